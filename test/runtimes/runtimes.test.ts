// The snippet runtimes: the pinned manifest and the files derived from it agree, and what setup
// installed in .runtimes/ is what the manifest pins, with real Bun and real CPython.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  compareRuntime,
  readRuntimeInfo,
  RuntimeLock,
  RuntimeManifest,
  RuntimesNotInstalledError,
  type RuntimeInfo,
} from '../../executor/runtime-info';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MANIFEST_PATH = join(ROOT, 'executor/runtimes/manifest.json');
const LOCK_PATH = join(ROOT, '.runtimes/runtime-lock.json');
const manifest = RuntimeManifest.parse(JSON.parse(readFileSync(MANIFEST_PATH, 'utf8')));

const installed = existsSync(LOCK_PATH);
if (!installed) {
  console.warn(
    `\n[runtimes.test] SKIPPING every installed-runtime test: ${LOCK_PATH} is missing (run node scripts/setup.mjs; npm test runs it first)\n`,
  );
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function run(argv: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const [cmd, ...args] = argv;
    const child = spawn(cmd!, args, { cwd: opts.cwd ?? ROOT, env: opts.env ?? { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** name → version of every `name==version` line (PEP 503 names). */
function requirementPins(text: string): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)/.exec(line.trim());
    if (m) pins[m[1]!.toLowerCase().replace(/[-_.]+/g, '-')] = m[2]!;
  }
  return pins;
}

describe('runtime manifest and the files derived from it', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'executor/runtimes/bun/runtime-package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    allowScripts?: Record<string, boolean>;
  };
  const lock = JSON.parse(readFileSync(join(ROOT, 'executor/runtimes/bun/runtime-package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; dependencies?: Record<string, string> }>;
  };
  const requirements = readFileSync(join(ROOT, 'executor/runtimes/python/requirements.txt'), 'utf8');

  it('pins the expected stack (bun 1.4.x, ai 7, zod 4, Python 3.11, langgraph 1.2, uv 0.13)', () => {
    expect(manifest.bun.version).toMatch(/^1\.4\.\d+$/);
    expect(Object.keys(manifest.bun.packages).sort()).toEqual(['@ai-sdk/openai', '@ai-sdk/openai-compatible', '@mastra/core', 'ai', 'zod']);
    expect(manifest.bun.packages.ai).toMatch(/^7\./);
    expect(manifest.bun.packages.zod).toMatch(/^4\./);
    expect(manifest.python.version).toBe('3.11');
    expect(Object.keys(manifest.python.packages).sort()).toEqual(['langchain', 'langchain-core', 'langchain-openai', 'langgraph']);
    expect(manifest.python.packages.langgraph).toMatch(/^1\.2\./);
    expect(manifest.tools.uv).toMatch(/^0\.13\./);
  });

  it('runtime-package.json declares exactly bun, the manifest packages and our two libraries', () => {
    expect(pkg.dependencies).toEqual({
      bun: manifest.bun.version,
      ...manifest.bun.packages,
      // installed as .runtimes/bun/package.json: file: paths are relative to that directory
      '@svc/store': 'file:../../executor/runtimes/bun/packages/svc-store',
      '@svc/integrations': 'file:../../executor/runtimes/bun/packages/svc-integrations',
    });
    // the relative paths really reach the packages from .runtimes/bun
    for (const spec of [pkg.dependencies['@svc/store']!, pkg.dependencies['@svc/integrations']!]) {
      expect(existsSync(join(ROOT, '.runtimes/bun', spec.slice('file:'.length), 'package.json'))).toBe(true);
    }
    // bun's postinstall only moves its binary; it is denied, and install scripts are reviewed
    expect(pkg.allowScripts).toEqual({ bun: false });
  });

  it('runtime-package-lock.json matches runtime-package.json and locks the manifest versions', () => {
    expect(lock.packages['']?.dependencies).toEqual(pkg.dependencies);
    for (const [name, version] of Object.entries({ bun: manifest.bun.version, ...manifest.bun.packages })) {
      expect(lock.packages[`node_modules/${name}`]?.version, name).toBe(version);
    }
    expect(lock.packages['node_modules/@oven/bun-linux-x64']?.version).toBe(manifest.bun.version);
  });

  it("requirements.txt pins the manifest's Python packages exactly, and every line is an exact pin", () => {
    const pins = requirementPins(requirements);
    for (const [name, version] of Object.entries(manifest.python.packages)) expect(pins[name], name).toBe(version);
    const requirementLines = requirements.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#') && !l.startsWith(' '));
    for (const line of requirementLines) expect(line).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*==\S+/);
    for (const [name, version] of Object.entries(manifest.python.overrides)) expect(pins[name], name).toBe(version);
  });

  it('the @svc packages and the svc Python package exist where setup installs them from', () => {
    for (const dir of ['svc-store', 'svc-integrations']) {
      const p = JSON.parse(readFileSync(join(ROOT, 'executor/runtimes/bun/packages', dir, 'package.json'), 'utf8'));
      expect(p.name).toBe(`@svc/${dir.slice(4)}`);
      expect(existsSync(join(ROOT, 'executor/runtimes/bun/packages', dir, 'index.ts'))).toBe(true);
    }
    expect(readFileSync(join(ROOT, 'executor/runtimes/python/svc/pyproject.toml'), 'utf8')).toMatch(/^name = "svc"$/m);
    expect(existsSync(join(ROOT, 'executor/runtimes/python/svc/svc/__init__.py'))).toBe(true);
  });
});

describe('runtime-info', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-emu-rtinfo-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const fakeLock = (over: { bunVersion?: string; ai?: string | null; pyVersion?: string; svc?: string | null } = {}): RuntimeLock => ({
    schema: 1,
    generatedAt: new Date().toISOString(),
    platform: 'linux-x64',
    manifestSha256: 'x',
    bun: {
      bin: '/r/.runtimes/bun/node_modules/@oven/bun-linux-x64/bin/bun',
      version: over.bunVersion ?? manifest.bun.version,
      nodeModules: '/r/.runtimes/bun/node_modules',
      packages: {
        ...manifest.bun.packages,
        ai: over.ai === undefined ? manifest.bun.packages.ai! : over.ai,
        '@svc/store': '0.1.0',
        '@svc/integrations': '0.1.0',
      },
      bindReadOnly: ['/r/.runtimes/bun'],
    },
    python: {
      bin: '/r/.runtimes/python/bin/python',
      version: over.pyVersion ?? '3.11.9',
      sysVersion: '3.11.9 (main)',
      basePrefix: '/usr',
      baseExecutable: '/usr/bin/python3.11',
      venv: '/r/.runtimes/python',
      sitePackages: '/r/.runtimes/python/lib/python3.11/site-packages',
      packages: { ...manifest.python.packages, svc: over.svc === undefined ? '0.1.0' : over.svc },
      bindReadOnly: ['/r/.runtimes/python', '/usr'],
    },
    uv: { bin: '/r/.runtimes/uv/bin/uv', version: manifest.tools.uv },
    bwrap: null,
  });

  it('a missing lock is a clear error telling how to install', async () => {
    const err = await readRuntimeInfo({ lockPath: join(dir, 'nope.json'), manifestPath: MANIFEST_PATH }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RuntimesNotInstalledError);
    expect((err as Error).message).toMatch(/^runtimes not installed: run npm run build/);
    // from a root with no .runtimes at all, too
    await expect(readRuntimeInfo(dir)).rejects.toThrow(/runtime manifest .* is missing/);
  });

  it('a corrupt lock is an error naming the file and the field', async () => {
    const lockPath = join(dir, 'bad.json');
    writeFileSync(lockPath, JSON.stringify({ ...fakeLock(), bun: { bin: 'relative/bun' } }));
    await expect(readRuntimeInfo({ lockPath, manifestPath: MANIFEST_PATH })).rejects.toThrow(/bad\.json is invalid at bun\./);
    writeFileSync(lockPath, '{');
    await expect(readRuntimeInfo({ lockPath, manifestPath: MANIFEST_PATH })).rejects.toThrow(/not valid JSON/);
  });

  it('reports each difference between manifest and lock as {name, expected, actual}', async () => {
    expect(compareRuntime(manifest, fakeLock())).toEqual([]);
    expect(compareRuntime(manifest, fakeLock({ bunVersion: '1.0.0', ai: null, pyVersion: '3.12.1', svc: null }))).toEqual([
      { name: 'bun', expected: manifest.bun.version, actual: '1.0.0' },
      { name: 'ai', expected: manifest.bun.packages.ai, actual: null },
      { name: 'python', expected: '3.11', actual: '3.12.1' },
      { name: 'svc', expected: '*', actual: null },
    ]);
    // python 3.11 is a prefix match on a release boundary: 3.110.0 is not 3.11
    expect(compareRuntime(manifest, fakeLock({ pyVersion: '3.110.0' })).map((m) => m.name)).toEqual(['python']);

    const lockPath = join(dir, 'lock.json');
    writeFileSync(lockPath, JSON.stringify(fakeLock({ ai: '6.0.0' })));
    const info = await readRuntimeInfo({ lockPath, manifestPath: MANIFEST_PATH });
    expect(info.mismatches).toEqual([{ name: 'ai', expected: manifest.bun.packages.ai, actual: '6.0.0' }]);
    expect(info.stale).toBe(true);
    expect(info.bun.bin).toBe('/r/.runtimes/bun/node_modules/@oven/bun-linux-x64/bin/bun');
    expect(info.python).toMatchObject({ basePrefix: '/usr', venv: '/r/.runtimes/python' });
    expect(info.bwrap).toBeNull();
  });
});

describe.skipIf(!installed)('installed runtimes (.runtimes)', () => {
  let info: RuntimeInfo;
  let scratch: string;
  beforeAll(async () => {
    info = await readRuntimeInfo(ROOT);
    scratch = mkdtempSync(join(tmpdir(), 'svc-emu-runtimes-'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('runtime-info reports zero mismatches for the current manifest', () => {
    expect(info.mismatches).toEqual([]);
    expect(info.stale).toBe(false);
    expect(info.installed.python.bindReadOnly).toContain(info.python.basePrefix);
    if (info.bwrap) expect(info.bwrap.version).toMatch(/^\d+\.\d+/);
  });

  it('bun --version is the manifest version', async () => {
    const r = await run([info.bun.bin, '--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(manifest.bun.version);
  });

  it("the venv's python imports langgraph, langchain_openai and svc (from site-packages) at the manifest versions", async () => {
    const names = [...Object.keys(manifest.python.packages), 'svc'];
    const code = [
      'import importlib.metadata as md, json, sys',
      'import langgraph, langchain, langchain_core, langchain_openai, svc',
      'from langgraph.graph import StateGraph',
      'from langchain_openai import ChatOpenAI',
      `print(json.dumps({"svc": svc.__file__, "versions": {n: md.version(n) for n in ${JSON.stringify(names)}}, "base": sys.base_prefix}))`,
    ].join('\n');
    // from an unrelated directory, isolated (-I): nothing but the venv provides these
    const r = await run([info.python.bin, '-I', '-c', code], { cwd: scratch });
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout) as { svc: string; versions: Record<string, string>; base: string };
    expect(out.svc.startsWith(info.python.sitePackages)).toBe(true); // non-editable install
    expect(out.base).toBe(info.python.basePrefix);
    for (const [name, version] of Object.entries(manifest.python.packages)) expect(out.versions[name], name).toBe(version);
    expect(out.versions.svc).toBeTruthy();
  });

  it('Bun imports @mastra/core/agent, ai, zod and @svc/store from a bundle in any directory via a node_modules symlink', async () => {
    const bundles = join(scratch, 'bundles');
    const bundle = join(bundles, 'abc123');
    mkdirSync(bundle, { recursive: true });
    // the mechanism runtime-info.ts documents: one symlink in a parent of every bundle
    symlinkSync(info.bun.nodeModules, join(bundles, 'node_modules'));
    writeFileSync(
      join(bundle, 'index.ts'),
      [
        'import { Agent } from "@mastra/core/agent";',
        'import { generateText, streamText } from "ai";',
        'import { createOpenAI } from "@ai-sdk/openai";',
        'import { createOpenAICompatible } from "@ai-sdk/openai-compatible";',
        'import { z } from "zod";',
        'import * as store from "@svc/store";',
        'import * as integrations from "@svc/integrations";',
        'const schema = z.object({ n: z.number() });',
        'console.log(JSON.stringify({ agent: typeof Agent, ai: typeof generateText + typeof streamText, openai: typeof createOpenAI,',
        '  compat: typeof createOpenAICompatible, zod: schema.parse({ n: 1 }).n, store: typeof store, integrations: typeof integrations }));',
      ].join('\n'),
    );
    const env = { PATH: '/usr/bin:/bin', HOME: scratch, NO_COLOR: '1' };
    const r = await run([info.bun.bin, '--no-install', join(bundle, 'index.ts')], { cwd: scratch, env });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      agent: 'function',
      ai: 'functionfunction',
      openai: 'function',
      compat: 'function',
      zod: 1,
      store: 'object',
      integrations: 'object',
    });

    // a package that is not in the runtime fails at once, offline (no auto-install from the registry)
    writeFileSync(join(bundle, 'missing.ts'), 'import leftPad from "left-pad";\nconsole.log(leftPad);\n');
    const missing = await run([info.bun.bin, '--no-install', join(bundle, 'missing.ts')], { cwd: scratch, env });
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/Cannot find (package|module) 'left-pad'/);
  });

  it('NODE_PATH works for Bun too (with --no-install)', async () => {
    const bundle = join(scratch, 'loose');
    mkdirSync(bundle, { recursive: true });
    writeFileSync(
      join(bundle, 'index.ts'),
      'import { z } from "zod";\nimport * as store from "@svc/store";\nconsole.log(typeof z.object, typeof store);\n',
    );
    const r = await run([info.bun.bin, '--no-install', join(bundle, 'index.ts')], {
      cwd: bundle,
      env: { PATH: '/usr/bin:/bin', HOME: scratch, NODE_PATH: info.bun.nodeModules },
    });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('function object');
  });

  it('setup is idempotent: with runtimes installed, the runtime steps have nothing to do and a no-op run is fast and silent', async () => {
    const check = await run([process.execPath, 'scripts/setup.mjs', '--check', '--no-build']);
    expect(check.stdout.trim()).toBe('setup: nothing to do');
    expect(check.code).toBe(0);
    const again = await run([process.execPath, 'scripts/setup.mjs', '--quiet', '--no-build']);
    expect(again).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(again.ms).toBeLessThan(3000); // ~70 ms (node start-up included)
    // and the lock did not change under us
    expect((await readRuntimeInfo(ROOT)).installed.generatedAt).toBe(info.installed.generatedAt);
  });
});
