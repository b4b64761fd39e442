import type { Repository } from './storage/repository';
import type { BlobStore } from './storage/blobs';
import type { SecretBox } from './crypto/secret-box';

export type Clock = () => Date;

/** What every service is built from. Passed in, never imported: tests and the CLI build their own. */
export interface CoreDeps {
  repo: Repository;
  blobs: BlobStore;
  secretBox: SecretBox;
  clock: Clock;
}

export const nowIso = (clock: Clock) => clock().toISOString();
