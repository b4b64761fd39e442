import { BlobStore } from './storage/blobs';
import { Repository } from './storage/repository';
import { quarantineDir } from './storage/quarantine';
import { dataDirPaths, type DataDirPaths } from './storage/data-dir';
import { aesGcmSecretBox, keyFileProvider, type SecretKeyProvider } from './crypto/secret-box';
import type { Clock, CoreDeps } from './core-deps';
import { EventBus } from './events/bus';

/** Opens a data dir's state (db, blobs, secret box): shared by the core and the CLI's offline mode. */
export async function openState(
  dataDir: string,
  opts: { secretKeyProvider?: SecretKeyProvider; clock?: Clock; events?: EventBus } = {},
): Promise<{ paths: DataDirPaths; deps: CoreDeps }> {
  const paths = dataDirPaths(dataDir);
  const repo = await Repository.open(paths.db, { quarantineDir: quarantineDir(paths.root), now: opts.clock });
  const key = await (opts.secretKeyProvider ?? keyFileProvider(paths.secretKey))();
  const clock = opts.clock ?? (() => new Date());
  // The CLI's offline mode gets a bus nobody listens to: its changes are seen by the next core's reads.
  const events = opts.events ?? new EventBus(clock);
  return { paths, deps: { repo, blobs: new BlobStore(paths.blobs), secretBox: aesGcmSecretBox(key), clock, events } };
}
