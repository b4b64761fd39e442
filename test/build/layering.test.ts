/**
 * The layering holds by the build itself (docs/architecture.md, "How the layers are enforced"): a probe file that
 * imports across a boundary fails the compiler (its layer's tsconfig project does not reference the target's, TS6307) or
 * ESLint (the `no-restricted-imports` rules eslint.config.mjs exports as `layers`), and the same probe importing
 * what its layer may import does not.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '..', '..');
const TMP = join(ROOT, 'test', '.tmp');
const made: string[] = [];

afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** The project references of a layer's tsconfig, as absolute paths (`extends` does not carry them). */
function referencesOf(tsconfig: string): string[] {
  const { config, error } = ts.readConfigFile(tsconfig, (p) => ts.sys.readFile(p));
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const refs = (config as { references?: { path: string }[] }).references ?? [];
  return refs.map((r) => resolve(dirname(tsconfig), r.path));
}

/** Source files parsed once for every probe's program (lib.dom.d.ts and friends dominate a cold program's cost). */
const parsed = new Map<string, ts.SourceFile>();

function cachingHost(options: ts.CompilerOptions): ts.CompilerHost {
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    if (fileName.startsWith(TMP)) return read(fileName, languageVersion, onError, shouldCreate);
    const key = `${fileName}\0${typeof languageVersion === 'object' ? `${languageVersion.languageVersion}:${languageVersion.impliedNodeFormat}` : languageVersion}`;
    let file = parsed.get(key);
    if (!file) {
      file = read(fileName, languageVersion, onError, shouldCreate);
      if (file) parsed.set(key, file);
    }
    return file;
  };
  return host;
}

/**
 * Builds the program of one probe file as a member of `project` (its options and its references) that imports
 * `target`, as `tsc -p` would, and returns the project's and the probe's diagnostics, one line each.
 */
function compileProbe(project: string, target: string): string[] {
  mkdirSync(TMP, { recursive: true });
  const dir = mkdtempSync(join(TMP, 'layering-'));
  made.push(dir);
  const spec = relative(dir, join(ROOT, target)).replace(/\.tsx?$/, '');
  writeFileSync(join(dir, 'probe.ts'), `import * as target from '${spec}';\nexport const seen: unknown = target;\n`);
  const tsconfig = join(ROOT, project);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      extends: tsconfig,
      compilerOptions: { rootDir: ROOT, outDir: join(dir, 'out'), noEmit: true },
      files: ['probe.ts'],
      references: referencesOf(tsconfig).map((path) => ({ path })),
    }),
  );
  const config = ts.getParsedCommandLineOfConfigFile(join(dir, 'tsconfig.json'), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  if (!config) throw new Error(`cannot read ${dir}/tsconfig.json`);
  const program = ts.createProgram({
    rootNames: config.fileNames,
    options: config.options,
    projectReferences: config.projectReferences,
    host: cachingHost(config.options),
  });
  // TS6307 is reported against the importing file, among its semantic diagnostics (only the probe is checked).
  const probe = program.getSourceFile(join(dir, 'probe.ts'));
  return [...program.getConfigFileParsingDiagnostics(), ...program.getOptionsDiagnostics(), ...program.getSemanticDiagnostics(probe)].map(
    (d) => `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
  );
}

const notListed = (target: string) => `TS6307: File '${join(ROOT, target)}' is not listed within the file list of project`;

describe('tsc -b: a layer sees only the projects it references', () => {
  it.each([
    ['renderer/tsconfig.json', 'server/ids.ts'],
    ['main/tsconfig.json', 'renderer/src/csp-nonce.ts'],
    ['executor/tsconfig.json', 'contract/operation.ts'],
    ['executor/runtimes/bun/tsconfig.json', 'executor/protocol.ts'],
    ['contract/tsconfig.json', 'executor/log-buffer.ts'],
    ['server/tsconfig.json', 'main/paths.ts'],
  ])('%s refuses %s', (project, target) => {
    expect(compileProbe(project, target).join('\n')).toContain(notListed(target));
  });

  it.each([
    ['renderer/tsconfig.json', 'contract/operation.ts'],
    ['server/tsconfig.json', 'executor/log-buffer.ts'],
    ['server/cli/tsconfig.json', 'server/ids.ts'],
  ])('%s accepts %s', (project, target) => {
    expect(compileProbe(project, target).join('\n')).not.toContain('TS6307');
  });
});

describe('eslint: the entry points and packages each layer may import', () => {
  async function lintProbe(file: string, spec: string): Promise<string[]> {
    const configUrl = new URL('../../eslint.config.mjs', import.meta.url).href;
    const { layers } = (await import(configUrl)) as { layers: Linter.Config[] };
    const eslint = new ESLint({
      cwd: ROOT,
      overrideConfigFile: true,
      overrideConfig: [{ files: ['**/*.ts', '**/*.tsx'], languageOptions: { parser: tseslint.parser } }, ...layers],
    });
    const code = `import * as target from '${spec}';\nexport const seen: unknown = target;\n`;
    const [result] = await eslint.lintText(code, { filePath: join(ROOT, file) });
    return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'fatal'}: ${m.message}`);
  }

  it.each([
    ['main/probe.ts', '../server/api/routes'],
    ['main/probe.ts', '../executor'],
    ['server/probe.ts', '../executor/local-host'],
    ['server/http/probe.ts', '../../executor/limits/detect'],
    ['server/probe.ts', '../main/paths'],
    ['server/probe.ts', './cli/main'],
    ['server/cli/probe.ts', '../../executor/remote'],
    ['renderer/src/probe.ts', '../../server'],
    ['renderer/src/probe.ts', '../../main/app'],
    ['renderer/src/pages/probe.tsx', 'node:fs'],
    ['contract/probe.ts', 'node:fs'],
    ['contract/v1/probe.ts', 'koa'],
    ['contract/probe.ts', '../server/ids'],
    ['executor/limits/probe.ts', '../../server'],
  ])('%s may not import %s', async (file, spec) => {
    const messages = await lintProbe(file, spec);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/^no-restricted-imports: /);
  });

  it.each([
    ['main/probe.ts', '../server'],
    ['main/probe.ts', '../server/index'],
    ['server/probe.ts', '../executor'],
    ['server/http/probe.ts', '../../executor/index'],
    ['server/cli/probe.ts', '../storage/data-dir'],
    ['renderer/src/probe.ts', '../../contract/operation'],
    ['renderer/src/probe.ts', '../../main/bridge'],
    ['contract/v1/probe.ts', 'zod'],
    ['contract/v1/probe.ts', '../operation'],
    ['executor/probe.ts', 'node:fs'],
  ])('%s may import %s', async (file, spec) => {
    expect(await lintProbe(file, spec)).toEqual([]);
  });
});
