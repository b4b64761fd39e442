import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { z } from 'zod';
import { BUNDLE_MAX_BYTES, NAME_RE } from '../api/schemas';
import { describeJsonError } from '../storage/atomic-file';

/**
 * One snippet folder of the workspace, read into what `POST …/versions` takes: the files (minus what
 * never belongs in a bundle), the runtime, and `snippet.json`'s settings. Problems come back as values
 * with the file and line, for `/_emu/workspace` and the GUI.
 */
export const SnippetJson = z
  .object({
    runtime: z.enum(['bun', 'python']).optional(),
    description: z.string().max(1000).optional(),
    timeout_ms: z.number().int().min(1).optional(),
    max_memory_mb: z.number().int().min(1).optional(),
    max_cpu_percent: z.number().int().min(1).optional(),
    deploy: z.array(z.string()).optional(),
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
  | { kind: 'problem'; problem: FolderProblem; notes: string[] }
  | { kind: 'ok'; runtime: 'bun' | 'python'; files: Record<string, string>; settings: SnippetJson; notes: string[] };

const SKIP_DIRS = new Set(['node_modules', '__pycache__']);

export async function readSnippetFolder(dir: string, name: string): Promise<FolderRead> {
  const info = await stat(dir).catch(() => null);
  if (!info?.isDirectory()) return { kind: 'missing' };
  const notes: string[] = [];
  if (!NAME_RE.test(name)) {
    return { kind: 'problem', problem: { message: `folder name '${name}' is not a snippet name: use a-z, 0-9 and '-' (63 at most)` }, notes };
  }
  const files: Record<string, string> = {};
  let settings: SnippetJson = {};
  const walk = async (at: string): Promise<void> => {
    for (const e of await readdir(at, { withFileTypes: true })) {
      const path = join(at, e.name);
      const rel = relative(dir, path).split(sep).join('/');
      if (e.name.startsWith('.')) continue; // dotfiles: editor swap files, .git, .env
      if (e.isDirectory()) {
        if (SKIP_DIRS.has(e.name)) notes.push(`${rel}/ ignored`);
        else await walk(path);
        continue;
      }
      if (!e.isFile()) continue;
      if (rel === 'snippet.json') continue;
      const size = (await stat(path)).size;
      if (size > BUNDLE_MAX_BYTES) {
        notes.push(`${rel} ignored: ${size} bytes is over the 1 MiB bundle limit`);
        continue;
      }
      files[rel] = await readFile(path, 'utf8');
    }
  };
  try {
    await walk(dir);
  } catch (err) {
    // The folder changed under us (an editor's rename dance): the next event reads it again.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw err;
  }
  const jsonText = await readFile(join(dir, 'snippet.json'), 'utf8').catch(() => null);
  if (jsonText !== null) {
    let raw: unknown;
    try {
      raw = JSON.parse(jsonText);
    } catch (err) {
      const where = describeJsonError(jsonText, err);
      const m = /line (\d+), column (\d+)/.exec(where);
      return {
        kind: 'problem',
        problem: { message: `snippet.json is not valid JSON: ${where}`, file: 'snippet.json', ...(m ? { line: Number(m[1]), column: Number(m[2]) } : {}) },
        notes,
      };
    }
    const parsed = SnippetJson.safeParse(raw);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      return { kind: 'problem', problem: { message: `snippet.json: ${i.path.join('.') || '(root)'}: ${i.message}`, file: 'snippet.json' }, notes };
    }
    settings = parsed.data;
  }
  const runtime =
    settings.runtime ?? (['index.ts', 'index.js', 'index.mjs', 'index.tsx'].some((f) => f in files) ? 'bun' : 'main.py' in files ? 'python' : null);
  if (!runtime) {
    return { kind: 'problem', problem: { message: 'no index.ts (Bun) or main.py (Python) in the folder, and snippet.json names no runtime' }, notes };
  }
  return { kind: 'ok', runtime, files, settings, notes };
}
