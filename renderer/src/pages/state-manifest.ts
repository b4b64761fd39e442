// Reads an export archive's manifest in the page, before it is uploaded: the archive is a gzip'd POSIX tar
// whose first part is `manifest.json` (contract/emu/state.ts), so only its first blocks are inflated
// (DecompressionStream) and read. Anything else is not an archive of ours; the core still has the last
// word on import. No React here (Node-testable).
import type { StateManifest } from '../../../contract/emu/state';

const BLOCK = 512;
/** A manifest larger than this is not one the emulator writes. */
const MAX_MANIFEST = 8 * 1024 * 1024;

/** The tar header's field as text (NUL-terminated). */
function field(block: Uint8Array, from: number, len: number): string {
  const bytes = block.subarray(from, from + len);
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end < 0 ? bytes : bytes.subarray(0, end)).trim();
}

/** Reads `blob`'s first tar part through gunzip: throws saying why when it is not our archive. */
export async function readManifest(blob: Blob): Promise<StateManifest> {
  const head = new Uint8Array(await blob.slice(0, 2).arrayBuffer());
  if (head[0] !== 0x1f || head[1] !== 0x8b) throw new Error('not gzip-compressed');
  const reader = blob.stream().pipeThrough(new DecompressionStream('gzip')).getReader();
  const chunks: Uint8Array[] = [];
  let have = 0;
  let need = BLOCK;
  let size = -1;
  try {
    while (have < need) {
      const { done, value } = await reader.read();
      if (done) throw new Error('it ends before its manifest does');
      chunks.push(value);
      have += value.length;
      if (size < 0 && have >= BLOCK) {
        const header = concat(chunks, BLOCK);
        const name = field(header, 0, 100);
        if (name !== 'manifest.json' && name !== './manifest.json')
          throw new Error(`its first part is ${JSON.stringify(name)}, not manifest.json`);
        size = parseInt(field(header, 124, 12), 8);
        if (!Number.isFinite(size) || size <= 0 || size > MAX_MANIFEST) throw new Error('its manifest has no sensible size');
        need = BLOCK + size;
      }
    }
  } finally {
    void reader.cancel().catch(() => {});
  }
  const all = concat(chunks, need);
  const manifest = JSON.parse(new TextDecoder().decode(all.subarray(BLOCK, BLOCK + size))) as StateManifest;
  if (manifest.format !== 'svc-emu-state') throw new Error('its manifest is not an svc-emu state manifest');
  return manifest;
}

function concat(chunks: Uint8Array[], upTo: number): Uint8Array {
  const out = new Uint8Array(upTo);
  let at = 0;
  for (const c of chunks) {
    if (at >= upTo) break;
    const take = c.subarray(0, Math.min(c.length, upTo - at));
    out.set(take, at);
    at += take.length;
  }
  return out;
}
