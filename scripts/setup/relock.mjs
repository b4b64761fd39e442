// `--relock-runtimes`: regenerates the runtimes' derived files (the Bun package.json and lock, the Python
// requirements.txt) from executor/runtimes/manifest.json.
import { copyFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BUN_NPM_FLAGS, NESTED_NPM_ENV, prepareBunDir, runtimePackageDependencies } from './bun.mjs';
import { readJson } from './files.mjs';
import { readManifest } from './manifest.mjs';
import { ensureUv, findBasePython } from './python.mjs';
import { BUN_DIR, RELOCK_COMMAND, REQUIREMENTS, ROOT, RUNTIME_PACKAGE, RUNTIME_PACKAGE_LOCK, RUNTIMES_DIR } from './paths.mjs';
import { npmCommand, runTool } from './tool.mjs';

/**
 * `--relock-runtimes`: writes runtime-package.json from the manifest, resolves its lock with npm, and
 * compiles requirements.txt with uv (universal: the same file serves Linux hosts and the Lima VM).
 * Existing locks act as preferences, so an unchanged pin keeps its transitive versions.
 * @param {Ctx} ctx
 */
export async function relockRuntimes(ctx) {
  const manifest = readManifest();
  const previous = readJson(RUNTIME_PACKAGE) ?? {};
  const pkg = {
    name: 'svc-emu-bun-runtime',
    version: '0.0.0',
    private: true,
    description:
      'The Bun runtime of the snippet service: installed by scripts/setup.mjs as .runtimes/bun/package.json. Generated from executor/runtimes/manifest.json by `node scripts/setup.mjs --relock-runtimes`.',
    ...previous,
    dependencies: runtimePackageDependencies(manifest),
    // bun's postinstall only moves its binary out of @oven/bun-<platform>; we use it where it is.
    allowScripts: { ...(previous.allowScripts ?? {}), bun: false },
  };
  writeFileSync(RUNTIME_PACKAGE, `${JSON.stringify(pkg, null, 2)}\n`);
  prepareBunDir();
  await runTool(
    ctx,
    'npm install --package-lock-only (.runtimes/bun)',
    npmCommand(['install', '--package-lock-only', '--prefix', BUN_DIR, ...BUN_NPM_FLAGS]),
    {
      cwd: BUN_DIR,
      env: NESTED_NPM_ENV,
      timeoutMs: 600_000,
    },
  );
  copyFileSync(join(BUN_DIR, 'package-lock.json'), RUNTIME_PACKAGE_LOCK);

  const base = findBasePython(manifest.python.version);
  const uv = await ensureUv(ctx, manifest, base);
  const input = join(RUNTIMES_DIR, 'requirements.in');
  writeFileSync(
    input,
    `${Object.entries(manifest.python.packages)
      .map(([n, v]) => `${n}==${v}`)
      .join('\n')}\n`,
  );
  const args = [
    uv,
    'pip',
    'compile',
    '--universal',
    '--python-version',
    manifest.python.version,
    '--custom-compile-command',
    RELOCK_COMMAND,
    '--output-file',
    REQUIREMENTS,
  ];
  const overrides = Object.entries(manifest.python.overrides ?? {});
  if (overrides.length > 0) {
    const file = join(RUNTIMES_DIR, 'overrides.txt');
    writeFileSync(file, `${overrides.map(([n, v]) => `${n}==${v}`).join('\n')}\n`);
    args.push('--override', 'overrides.txt');
  }
  args.push('requirements.in');
  await runTool(ctx, 'uv pip compile', args, { cwd: RUNTIMES_DIR, env: { UV_PYTHON_DOWNLOADS: 'never' }, timeoutMs: 300_000 });
  ctx.log(
    `setup: relocked ${relative(ROOT, RUNTIME_PACKAGE)}, ${relative(ROOT, RUNTIME_PACKAGE_LOCK)} and ${relative(ROOT, REQUIREMENTS)} from the manifest`,
  );
}
