// Checks bundles before they become versions: every TS/JS file transpiles, and the entrypoint exports a
// handler (default export, a named `handler`, or CommonJS). Long-lived: reads one request a line on
// stdin, {entrypoint, files}, and answers one line on stdout, [{file, line?, column?, message}]. Run
// with Bun (its transpiler is the runtime's own).
import { createInterface } from 'node:readline';

type Problem = { file: string; line?: number; column?: number; message: string };
type Loader = 'ts' | 'tsx' | 'js' | 'jsx';
declare const Bun: {
  Transpiler: new (opts: { loader: Loader }) => { transformSync(code: string): string; scan(code: string): { exports: string[] } };
};

const loaderOf = (path: string): Loader =>
  path.endsWith('.tsx') ? 'tsx' : path.endsWith('.ts') ? 'ts' : path.endsWith('.jsx') ? 'jsx' : 'js';

function check(input: { entrypoint: string; files: Record<string, string> }): Problem[] {
  const problems: Problem[] = [];
  for (const [file, code] of Object.entries(input.files)) {
    if (!/\.(ts|tsx|js|mjs|jsx)$/.test(file)) continue;
    const transpiler = new Bun.Transpiler({ loader: loaderOf(file) });
    try {
      transpiler.transformSync(code);
      if (file === input.entrypoint) {
        const { exports } = transpiler.scan(code);
        // CommonJS (`module.exports = { handler }`) is accepted by the runner too; the scan sees no ESM exports.
        const commonJs = /\bmodule\.exports\b|\bexports\.handler\b/.test(code);
        if (!exports.includes('default') && !exports.includes('handler') && !commonJs) {
          problems.push({ file, message: 'exports no handler: add `export default async function handler(input) { … }`' });
        }
      }
    } catch (err) {
      const e = err as {
        message?: string;
        position?: { line: number; column: number } | null;
        errors?: { message: string; position?: { line: number; column: number } }[];
      };
      const list = e.errors?.length ? e.errors : [e];
      for (const item of list) {
        problems.push({ file, line: item.position?.line, column: item.position?.column, message: String(item.message ?? err) });
      }
    }
  }
  return problems;
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  let answer: unknown;
  try {
    answer = check(JSON.parse(line) as { entrypoint: string; files: Record<string, string> });
  } catch (err) {
    answer = { error: String(err) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
