import type { Dirent } from 'node:fs';
import { lstat, opendir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { z } from 'zod';
import { NAME_RE } from '../../contract/schemas/common';
import { BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES, CreateSnippet, Limits } from '../../contract/schemas/snippets';
import { SnippetEgress } from '../../contract/schemas/cassette';
import { describeJsonError } from '../storage/atomic-file';
import { inspect, readInspected, tooLarge, type SkippedEntry } from './safe-read';

/**
 * One snippet folder of the workspace, read into what `POST …/versions` takes: the files (minus what
 * never belongs in a bundle), the runtime, and `snippet.json`'s settings. Problems come back as values
 * with the file and line, for `/_emu/workspace` and the GUI.
 */
// The limits and the description are the REST schemas' own (contract/schemas/snippets.ts): one validation for every way in.
export const SnippetJson = z
  .object({
    runtime: z.enum(['bun', 'python']).optional(),
    description: CreateSnippet.shape.description,
    timeout_ms: Limits.timeout_ms.optional(),
    max_memory_mb: Limits.max_memory_mb.optional(),
    max_cpu_percent: Limits.max_cpu_percent.optional(),
    deploy: z.array(z.string()).optional(),
    /** Record and replay of outbound calls (contract/schemas/cassette.ts): mode, cassette, matchers. */
    egress: SnippetEgress.optional(),
  })
  .strict();
export type SnippetJson = z.infer<typeof SnippetJson>;

export interface FolderProblem {
  message: string;
  file?: string;
  line?: number;
  column?: number;
}

export type FolderRead =
  | { kind: 'missing' }
  /** The entry under snippets/ is no folder the loader may read (a FIFO, a file, a symlink…). */
  | { kind: 'not_folder'; entry: SkippedEntry }
  /** `oversized`: the folder holds more entries than `limits.maxEntries` (the watcher should leave it alone). */
  | { kind: 'problem'; problem: FolderProblem; notes: string[]; skipped: SkippedEntry[]; oversized?: true }
  | {
      kind: 'ok';
      runtime: 'bun' | 'python';
      files: Record<string, string>;
      settings: SnippetJson;
      notes: string[];
      skipped: SkippedEntry[];
    };

/** How much of a snippet folder the loader looks at: a folder with a million files or a deep tree costs this much and no more. */
export interface FolderLimits {
  /** Folder levels read below the snippet folder. */
  maxDepth: number;
  /** Entries (files, folders, dotfiles) looked at in one snippet folder. */
  maxEntries: number;
  /** snippet.json holds a few settings: this is far more than it needs. */
  maxSnippetJsonBytes: number;
}
export const FOLDER_LIMITS: FolderLimits = { maxDepth: 16, maxEntries: 5000, maxSnippetJsonBytes: 64 * 1024 };

const SKIP_DIRS = new Set(['node_modules', '__pycache__']);
/** A snippet folder's `cassettes/` holds its recorded outbound calls (docs/cassettes.md): never part of a version. */
export const CASSETTES_DIR = 'cassettes';
const BUNDLE_LIMIT = '1 MiB bundle limit';

/** A refusal that stops reading the folder: the previous version keeps serving. */
class Stop extends Error {
  constructor(
    readonly problem: FolderProblem,
    readonly oversized = false,
  ) {
    super(problem.message);
  }
}

/** A directory entry that is a real folder (not a symlink to one); a file system that gives no type gets an lstat. */
async function isDir(e: Dirent, path: string): Promise<boolean> {
  if (e.isDirectory()) return true;
  if (e.isFile() || e.isSymbolicLink() || e.isFIFO() || e.isSocket() || e.isCharacterDevice() || e.isBlockDevice()) return false;
  return lstat(path).then(
    (st) => st.isDirectory(),
    () => false,
  );
}

/**
 * Whether a snippet folder holds more than `maxEntries` entries, counted the way readSnippetFolder counts
 * them (dotfiles included, dotfolders, node_modules/ and __pycache__/ not entered, no symlink followed, no
 * deeper than `maxDepth`), stopping at the first one too many: cheap even for a million files.
 */
export async function exceedsEntries(dir: string, limits: Pick<FolderLimits, 'maxEntries' | 'maxDepth'>): Promise<boolean> {
  let entries = 0;
  const walk = async (at: string, depth: number): Promise<boolean> => {
    const handle = await opendir(at).catch(() => null);
    if (!handle) return false;
    for await (const e of handle) {
      if (++entries > limits.maxEntries) return true;
      if (depth >= limits.maxDepth || e.name.startsWith('.') || SKIP_DIRS.has(e.name) || (depth === 0 && e.name === CASSETTES_DIR))
        continue;
      if ((await isDir(e, join(at, e.name))) && (await walk(join(at, e.name), depth + 1))) return true;
    }
    return false;
  };
  return walk(dir, 0);
}

/**
 * Reads `dir` (snippets/<name>) through ./safe-read.ts: only regular files inside `root` (the workspace's
 * real path), never more than `limits` and the bundle caps allow. Every entry not read is in `skipped`.
 */
export async function readSnippetFolder(
  dir: string,
  name: string,
  root: string,
  limits: FolderLimits = FOLDER_LIMITS,
): Promise<FolderRead> {
  const top = await inspect(dir, root);
  if (top.kind === 'skip') {
    if (top.code === 'unreadable' && !(await exists(dir))) return { kind: 'missing' };
    return { kind: 'not_folder', entry: { path: `snippets/${name}`, code: top.code, reason: top.reason } };
  }
  if (top.kind === 'file') {
    const reason = 'a file, not a folder: each snippet is a folder, snippets/<name>/index.ts or main.py';
    return { kind: 'not_folder', entry: { path: `snippets/${name}`, code: 'not_a_folder', reason } };
  }
  const notes: string[] = [];
  const skipped: SkippedEntry[] = [];
  if (!NAME_RE.test(name)) {
    const message = `folder name '${name}' is not a snippet name: use a-z, 0-9 and '-' (63 at most)`;
    return { kind: 'problem', problem: { message }, notes, skipped };
  }
  const files: Record<string, string> = {};
  let settings: SnippetJson = {};
  let entries = 0;
  let fileCount = 0;
  let bytes = 0;
  let jsonFile: { path: string; dev: number; ino: number } | null = null;
  const walk = async (at: string, depth: number): Promise<void> => {
    for await (const e of await opendir(at)) {
      if (++entries > limits.maxEntries) {
        throw new Stop(
          {
            message:
              `the folder holds more than ${limits.maxEntries.toLocaleString('en')} entries (files and folders, dotfiles included): ` +
              'the loader stops reading there, and looks again every few seconds. ' +
              `Move data, build output or virtualenvs out of snippets/${name}/ (node_modules/, __pycache__/ and dotfolders are never read)`,
          },
          true,
        );
      }
      if (e.name.startsWith('.')) continue; // dotfiles: editor swap files, .git, .env
      const path = join(at, e.name);
      const rel = relative(dir, path).split(sep).join('/');
      const it = await inspect(path, root);
      if (it.kind === 'skip') {
        skipped.push({ path: rel, code: it.code, reason: it.reason });
        continue;
      }
      if (it.kind === 'dir') {
        if (depth === 0 && e.name === CASSETTES_DIR) continue; // recorded calls, not code: a record run's write makes no version
        if (SKIP_DIRS.has(e.name)) notes.push(`${rel}/ ignored`);
        else if (depth >= limits.maxDepth) {
          const reason = `a folder ${depth + 1} levels down: the loader reads ${limits.maxDepth} levels at most; flatten the folder`;
          skipped.push({ path: `${rel}/`, code: 'too_deep', reason });
        } else await walkSub(path, rel, depth + 1);
        continue;
      }
      if (rel === 'snippet.json') {
        jsonFile = it;
        continue;
      }
      if (it.size > BUNDLE_MAX_BYTES) {
        skipped.push({ path: rel, code: 'too_large', reason: tooLarge(it.size, BUNDLE_MAX_BYTES, BUNDLE_LIMIT) });
        continue;
      }
      if (++fileCount > BUNDLE_MAX_FILES) {
        throw new Stop({
          message:
            `the folder holds more than ${BUNDLE_MAX_FILES} files (the bundle limit): ` +
            `move what the snippet does not import out of snippets/${name}/`,
        });
      }
      if (bytes + it.size > BUNDLE_MAX_BYTES) {
        throw new Stop({
          message:
            `the folder's files add up to more than 1 MiB (the bundle limit) at ${rel}: ` +
            `move data or build output out of snippets/${name}/`,
        });
      }
      const read = await readInspected(it, BUNDLE_MAX_BYTES - bytes, BUNDLE_LIMIT);
      if (!read.ok) {
        skipped.push({ path: rel, code: read.code, reason: read.reason });
        continue;
      }
      bytes += read.bytes;
      files[rel] = read.text;
    }
  };
  const walkSub = async (path: string, rel: string, depth: number): Promise<void> => {
    try {
      await walk(path, depth);
    } catch (err) {
      if (err instanceof Stop) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      skipped.push({
        path: `${rel}/`,
        ...(code === 'ENOENT' || code === 'ENOTDIR'
          ? { code: 'changed_while_reading' as const, reason: `changed while it was read (${code}): the next save reads it again` }
          : { code: 'unreadable' as const, reason: `could not be read (${code ?? String(err)}): check its permissions` }),
      });
    }
  };
  try {
    await walk(top.path, 0);
  } catch (err) {
    if (err instanceof Stop) {
      return { kind: 'problem', problem: err.problem, notes, skipped, ...(err.oversized ? { oversized: true as const } : {}) };
    }
    // The folder changed under us (an editor's rename dance): the next event reads it again.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw err;
  }
  const jsonSkipped = skipped.find((s) => s.path === 'snippet.json');
  if (jsonSkipped) {
    return { kind: 'problem', problem: { message: `snippet.json: ${jsonSkipped.reason}`, file: 'snippet.json' }, notes, skipped };
  }
  if (jsonFile) {
    const kib = Math.round(limits.maxSnippetJsonBytes / 1024);
    const read = await readInspected(jsonFile, limits.maxSnippetJsonBytes, `${kib} KiB limit for snippet.json`);
    if (!read.ok) {
      skipped.push({ path: 'snippet.json', code: read.code, reason: read.reason });
      return { kind: 'problem', problem: { message: `snippet.json: ${read.reason}`, file: 'snippet.json' }, notes, skipped };
    }
    const jsonText = read.text;
    let raw: unknown;
    try {
      raw = JSON.parse(jsonText);
    } catch (err) {
      const where = jsonErrorWhere(jsonText, err);
      const m = /line (\d+), column (\d+)/.exec(where);
      return {
        kind: 'problem',
        problem: {
          message: `snippet.json is not valid JSON: ${where}`,
          file: 'snippet.json',
          ...(m ? { line: Number(m[1]), column: Number(m[2]) } : {}),
        },
        notes,
        skipped,
      };
    }
    const parsed = SnippetJson.safeParse(raw);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      const message = `snippet.json: ${i.path.join('.') || '(root)'}: ${i.message}`;
      return { kind: 'problem', problem: { message, file: 'snippet.json' }, notes, skipped };
    }
    settings = parsed.data;
  }
  const runtime =
    settings.runtime ??
    (['index.ts', 'index.js', 'index.mjs', 'index.tsx'].some((f) => f in files) ? 'bun' : 'main.py' in files ? 'python' : null);
  if (!runtime) {
    const message = 'no index.ts (Bun) or main.py (Python) in the folder, and snippet.json names no runtime';
    return { kind: 'problem', problem: { message }, notes, skipped };
  }
  return { kind: 'ok', runtime, files, settings, notes, skipped };
}

/** Where JSON.parse failed; a describer that gives up (deep nesting) still leaves the parser's own message. */
function jsonErrorWhere(text: string, err: unknown): string {
  try {
    return describeJsonError(text, err);
  } catch {
    return err instanceof Error ? err.message : String(err);
  }
}

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    () => false,
  );
