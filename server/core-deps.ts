import type { Repository } from './storage/repository';
import type { BlobStore } from './storage/blobs';
import type { SecretBox } from './crypto/secret-box';
import type { EventBus } from './events/bus';

export type Clock = () => Date;

/** What every service is built from. Passed in, never imported: tests and the CLI build their own. */
export interface CoreDeps {
  repo: Repository;
  blobs: BlobStore;
  secretBox: SecretBox;
  clock: Clock;
  /** Where every change is announced (GET /_emu/events, the terminal's lines): one per core, never a singleton. */
  events: EventBus;
}

export const nowIso = (clock: Clock) => clock().toISOString();
