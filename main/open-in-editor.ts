// "Open in editor" for the Code tab: the OS opens a workspace source file with the user's app for it.
// shell.openPath runs whatever the OS associates with a file (a script may execute), so only source files
// inside the watched workspace are opened.
import { realpath, stat } from 'node:fs/promises';
import { extname, relative, isAbsolute } from 'node:path';

export const SOURCE_EXTENSIONS = new Set([
  '.ts',
  '.tsx',
  '.js',
  '.jsx',
  '.mjs',
  '.cjs',
  '.mts',
  '.cts',
  '.py',
  '.json',
  '.md',
  '.txt',
  '.toml',
  '.yaml',
  '.yml',
]);

/** Resolves to the real path to open, or throws an Error whose message says why not. */
export async function editableWorkspaceFile(path: string, workspace: string): Promise<string> {
  const ext = extname(path).toLowerCase();
  if (!SOURCE_EXTENSIONS.has(ext)) throw new Error(`only source files open in the editor (not ${ext || 'files without an extension'})`);
  let real: string;
  let root: string;
  try {
    [real, root] = await Promise.all([realpath(path), realpath(workspace)]);
  } catch {
    throw new Error(`${path} does not exist (was it renamed or deleted?)`);
  }
  const rel = relative(root, real);
  if (!rel || rel.startsWith('..') || isAbsolute(rel)) throw new Error(`${path} is not inside the workspace ${workspace}`);
  if (!(await stat(real)).isFile()) throw new Error(`${path} is not a file`);
  return real;
}
