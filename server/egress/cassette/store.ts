import { readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { CASSETTE_FORMAT, CASSETTE_NAME_RE, CassetteMatch, type Cassette, type HarEntry } from '../../../contract/schemas/cassette';
import { readFileIfExists, writeFileAtomic } from '../../storage/atomic-file';
import { cassetteText, emptyCassette, episodesOf, parseCassette } from './har';
import { matchInputOfEntry, normalise, normaliseHead } from './match';
import { CassetteError, type CassetteFile, type CassetteRef, type CassetteStore } from './types';

export interface FileCassetteStoreOptions {
  /** The folder a snippet's cassettes live in (a workspace snippet's `cassettes/`, or under the data dir). */
  locate(tenant: string, snippet: string): string;
  /** Written as `log.creator.version`. */
  creatorVersion: string;
}

/**
 * Cassettes as `<folder>/<name>.har` files (docs/cassettes.md). Writes are atomic (temp file + rename) and
 * chained per file, so two runs ending together both land; reads are checked (a damaged or foreign file is
 * a CassetteError naming the file and the entry). Files are written with keys in a fixed order, so the
 * same cassette is always the same bytes.
 */
export class FileCassetteStore implements CassetteStore {
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(private readonly opts: FileCassetteStoreOptions) {}

  pathOf(ref: CassetteRef): string {
    if (!CASSETTE_NAME_RE.test(ref.name)) {
      throw new CassetteError(ref.name, 'a cassette name is 1–63 of a-z 0-9 . _ -, starting with a letter or digit');
    }
    return join(this.opts.locate(ref.tenant, ref.snippet), `${ref.name}.har`);
  }

  /** Runs `fn` after every earlier write to the same file has settled. */
  private chained<T>(path: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(path) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => {});
    this.chains.set(path, settled);
    void settled.then(() => {
      if (this.chains.get(path) === settled) this.chains.delete(path);
    });
    return next;
  }

  async read(ref: CassetteRef): Promise<CassetteFile | null> {
    const path = this.pathOf(ref);
    const text = await readFileIfExists(path);
    if (text === null) return null;
    const cassette = parseCassette(text, path, ref);
    const st = await stat(path).catch(() => null);
    return { path, cassette, bytes: Buffer.byteLength(text), updatedAt: (st?.mtime ?? new Date()).toISOString() };
  }

  private async writeFile(path: string, cassette: Cassette): Promise<CassetteFile> {
    const text = cassetteText(cassette);
    await writeFileAtomic(path, text, 0o644);
    return { path, cassette, bytes: Buffer.byteLength(text), updatedAt: new Date().toISOString() };
  }

  /**
   * Writes a whole cassette (replacing one of the same name): what `PUT …/cassettes/{name}` and state
   * import use. The caller checks and redacts it first (server/egress/cassette/har.ts `checkCassette`,
   * server/egress/cassette/tape.ts `redactEntry` on each entry).
   */
  write(ref: CassetteRef, cassette: Cassette): Promise<CassetteFile> {
    const path = this.pathOf(ref);
    return this.chained(path, () => this.writeFile(path, cassette));
  }

  merge(ref: CassetteRef, entries: readonly HarEntry[], match: Partial<CassetteMatch>): Promise<CassetteFile> {
    const path = this.pathOf(ref);
    return this.chained(path, async () => {
      const text = await readFileIfExists(path);
      const current = text === null ? emptyCassette(ref, this.opts.creatorVersion) : parseCassette(text, path, ref);
      const m = effectiveMatch(current.log._svcEmu.match, match);
      const incoming = [...entries].sort((a, b) => a._svcEmu.seq - b._svcEmu.seq);
      const runs = new Set(incoming.map((e) => e._svcEmu.invocation_id));
      const norms = incoming.map((e) => normalise(matchInputOfEntry(e), m));
      const heads = new Set(norms.map((x) => x.head));
      const keys = new Set(norms.map((x) => x.key));
      // An earlier episode's call with the same request is replaced by the new recording of it; a run
      // merged again replaces its own episode whole. (Bodies are compared only where method, path and query agree.)
      const sameCall = (e: HarEntry) => heads.has(normaliseHead(e.request, m).head) && keys.has(normalise(matchInputOfEntry(e), m).key);
      const kept = current.log.entries.filter((e) => !runs.has(e._svcEmu.invocation_id) && !sameCall(e));
      const cassette: Cassette = {
        ...current,
        log: {
          ...current.log,
          creator: { ...current.log.creator, name: 'snippet-emulator', version: this.opts.creatorVersion },
          entries: [...kept, ...incoming],
          _svcEmu: { ...current.log._svcEmu, format: CASSETTE_FORMAT, tenant: ref.tenant, snippet: ref.snippet },
        },
      };
      return this.writeFile(path, cassette);
    });
  }

  /** Every `*.har` in the snippet's folder, by name. A damaged file makes the list fail naming it. */
  async list(tenant: string, snippet: string): Promise<CassetteFile[]> {
    const dir = this.opts.locate(tenant, snippet);
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: CassetteFile[] = [];
    for (const file of names.filter((n) => n.endsWith('.har')).sort()) {
      const name = file.slice(0, -4);
      if (!CASSETTE_NAME_RE.test(name)) continue;
      const f = await this.read({ tenant, snippet, name });
      if (f) out.push(f);
    }
    return out;
  }

  remove(ref: CassetteRef): Promise<boolean> {
    const path = this.pathOf(ref);
    return this.chained(path, async () => {
      try {
        await unlink(path);
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    });
  }
}

const DEFAULT_MATCH = CassetteMatch.parse({});

/**
 * The matchers a merge compares with: the defaults, then the cassette's own (`log._svcEmu.match`), then
 * whatever the caller's (the snippet's) says differently from the defaults. A caller that passes a whole
 * matcher set (defaults filled in) thus does not undo the cassette's own.
 */
export function effectiveMatch(cassette: Partial<CassetteMatch> | undefined, given: Partial<CassetteMatch>): CassetteMatch {
  const out: CassetteMatch = { ...DEFAULT_MATCH, ...cassette };
  for (const [k, v] of Object.entries(given) as [keyof CassetteMatch, unknown][]) {
    if (v !== undefined && JSON.stringify(v) !== JSON.stringify(DEFAULT_MATCH[k])) (out as Record<string, unknown>)[k] = v;
  }
  return CassetteMatch.parse(out);
}

/** The summary `GET …/cassettes` lists. */
export function summarize(
  name: string,
  f: CassetteFile,
): { name: string; path: string; entries: number; episodes: string[]; bytes: number; updated_at: string } {
  return {
    name,
    path: f.path,
    entries: f.cassette.log.entries.length,
    episodes: episodesOf(f.cassette.log.entries),
    bytes: f.bytes,
    updated_at: f.updatedAt,
  };
}
