import { ConflictError } from './domain/errors';

import { CoreMemory } from '../contract/schemas/emu';
export { CoreMemory };

type Gc = () => void;

/**
 * The core process's own memory (what the soak benchmark and the small-heap test read: a long-running
 * core must not grow per invocation, docs/architecture.md). `forceGc` runs a full collection first, so the
 * figures are what is reachable, not what the collector has not got to yet; it needs `node --expose-gc`.
 */
export function coreMemory(forceGc: boolean, gc: Gc | null = (globalThis as { gc?: Gc }).gc ?? null): CoreMemory {
  if (forceGc) {
    if (!gc) {
      throw new ConflictError(
        'a forced collection needs the core started with node --expose-gc (e.g. node --expose-gc bin/svc-emu.mjs serve)',
        'gc_unavailable',
      );
    }
    gc();
  }
  const m = process.memoryUsage();
  return {
    rss_bytes: m.rss,
    heap_used_bytes: m.heapUsed,
    heap_total_bytes: m.heapTotal,
    external_bytes: m.external,
    array_buffers_bytes: m.arrayBuffers,
    gc: forceGc ? 'forced' : 'not_asked',
  };
}
