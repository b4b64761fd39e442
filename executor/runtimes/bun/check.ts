// Checks a bundle before it becomes a version: every TS/JS file transpiles, and the entrypoint exports
// a handler (default export, or a named `handler`). Reads {entrypoint, files} as JSON on stdin, writes
// [{file, line?, column?, message}] as JSON on stdout. Run with Bun (its transpiler is the runtime's own).
type Problem = { file: string; line?: number; column?: number; message: string };
type Loader = 'ts' | 'tsx' | 'js' | 'jsx';
declare const Bun: {
  stdin: { text(): Promise<string> };
  Transpiler: new (opts: { loader: Loader }) => { transformSync(code: string): string; scan(code: string): { exports: string[] } };
};

const input = JSON.parse(await Bun.stdin.text()) as { entrypoint: string; files: Record<string, string> };
const problems: Problem[] = [];
const loaderOf = (path: string): Loader => (path.endsWith('.tsx') ? 'tsx' : path.endsWith('.ts') ? 'ts' : path.endsWith('.jsx') ? 'jsx' : 'js');

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
    const e = err as { message?: string; position?: { line: number; column: number } | null; errors?: { message: string; position?: { line: number; column: number } }[] };
    const list = e.errors?.length ? e.errors : [e];
    for (const item of list) {
      problems.push({ file, line: item.position?.line, column: item.position?.column, message: String(item.message ?? err) });
    }
  }
}
process.stdout.write(JSON.stringify(problems));

export {};
