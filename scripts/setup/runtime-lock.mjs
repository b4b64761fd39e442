// The step `runtime-lock`: .runtimes/runtime-lock.json, what is actually installed (asked of the installed things,
// not of the stamps), read by executor/runtime-info.ts.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { findBunBinary } from './bun.mjs';
import { findOnPath, readJson, readText, realpathSafe, sha256, writeJson } from './files.mjs';
import { readManifest } from './manifest.mjs';
import { DEBUGPY_DIR, installedDebugpy } from './python.mjs';
import { BUN_DIR, BUN_STAMP, MANIFEST, PYTHON_STAMP, ROOT, RUNTIME_LOCK, SVC_BUN_PACKAGES, UV_DIR, UV_STAMP, VENV } from './paths.mjs';
import { SetupError, toolVersion } from './tool.mjs';

/** @type {Step} */
export const runtimeLockStep = {
  name: 'runtime-lock',
  title: 'recording the installed runtimes (.runtimes/runtime-lock.json)',
  isDone() {
    return readJson(RUNTIME_LOCK)?.inputsHash === runtimeLockInputsHash();
  },
  async run(ctx) {
    const inputsHash = runtimeLockInputsHash();
    const lock = collectRuntimeLock(readManifest());
    writeJson(RUNTIME_LOCK, { ...lock, inputsHash });
    const wrong = lockMismatches(readManifest(), lock);
    if (wrong.length > 0) ctx.notice(`setup: installed runtimes differ from the manifest: ${wrong.join('; ')}`);
    return `recorded the installed runtimes in .runtimes/runtime-lock.json`;
  },
};

function runtimeLockInputsHash() {
  return sha256(
    readText(MANIFEST),
    readText(BUN_STAMP),
    readText(PYTHON_STAMP),
    readText(UV_STAMP),
    findOnPath('bwrap'),
    installedDebugpy(),
  );
}

const PYTHON_INFO = `
import importlib.metadata as md, json, sys, sysconfig
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "sysVersion": sys.version,
    "basePrefix": sys.base_prefix,
    "prefix": sys.prefix,
    "baseExecutable": getattr(sys, "_base_executable", None),
    "sitePackages": sysconfig.get_paths()["purelib"],
    "packages": {name: version(name) for name in json.loads(sys.argv[1])},
}))
`;

/** What is actually installed, asked of the installed things themselves (not of the stamps). */
function collectRuntimeLock(manifest) {
  const bin = findBunBinary();
  if (!bin) throw new SetupError('no Bun binary in .runtimes/bun: the bun-runtime step did not finish');
  const nodeModules = join(BUN_DIR, 'node_modules');
  const bunPackages = {};
  for (const name of [...Object.keys(manifest.bun.packages), ...Object.keys(SVC_BUN_PACKAGES)]) {
    bunPackages[name] = readJson(join(nodeModules, ...name.split('/'), 'package.json'))?.version ?? null;
  }
  const python = join(VENV, 'bin', 'python');
  const names = [...Object.keys(manifest.python.packages), 'svc'];
  const probe = spawnSync(python, ['-I', '-c', PYTHON_INFO, JSON.stringify(names)], {
    encoding: 'utf8',
    timeout: 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (probe.status !== 0)
    throw new SetupError(`${relative(ROOT, python)} could not describe itself: ${probe.error?.message ?? probe.stderr.trim()}`);
  const info = JSON.parse(probe.stdout);
  const uvBin = join(UV_DIR, 'bin', 'uv');
  const bwrapBin = findOnPath('bwrap');
  let bwrap = null;
  if (bwrapBin) {
    try {
      bwrap = { bin: bwrapBin, version: toolVersion(bwrapBin, ['--version']).replace(/^bubblewrap\s+/, '') };
    } catch {
      bwrap = null; // present but broken: the sandbox is off, as if absent
    }
  }
  const basePrefix = realpathSafe(info.basePrefix);
  return {
    schema: 1,
    generatedAt: new Date().toISOString(),
    platform: `${process.platform}-${process.arch}`,
    manifestSha256: sha256(readText(MANIFEST)),
    bun: {
      bin,
      version: toolVersion(bin, ['--version']),
      nodeModules,
      packages: bunPackages,
      // Everything Bun needs at run time is under .runtimes/bun (the binary is inside node_modules).
      bindReadOnly: [BUN_DIR],
    },
    python: {
      bin: python,
      version: info.version,
      sysVersion: info.sysVersion,
      basePrefix,
      baseExecutable: info.baseExecutable ? realpathSafe(info.baseExecutable) : null,
      venv: VENV,
      sitePackages: info.sitePackages,
      packages: info.packages,
      // The venv's bin/python is a symlink into basePrefix (stdlib there too): a sandbox binds both.
      bindReadOnly: [VENV, basePrefix],
    },
    uv: { bin: uvBin, version: existsSync(uvBin) ? toolVersion(uvBin, ['--version']).split(/\s+/)[1] : null },
    bwrap,
    // Emulator-only (manifest `debugger`): inside the venv, so the sandbox's bind of it covers it.
    debugpy: { dir: DEBUGPY_DIR, version: installedDebugpy() },
  };
}

/** Human-readable differences between the manifest and a collected lock (runtime-info.ts does the typed version). */
function lockMismatches(manifest, lock) {
  const out = [];
  if (lock.bun.version !== manifest.bun.version) out.push(`bun ${lock.bun.version} (manifest ${manifest.bun.version})`);
  for (const [name, v] of Object.entries(manifest.bun.packages))
    if (lock.bun.packages[name] !== v) out.push(`${name} ${lock.bun.packages[name]} (manifest ${v})`);
  if (!lock.python.version.startsWith(`${manifest.python.version}.`))
    out.push(`python ${lock.python.version} (manifest ${manifest.python.version})`);
  for (const [name, v] of Object.entries(manifest.python.packages))
    if (lock.python.packages[name] !== v) out.push(`${name} ${lock.python.packages[name]} (manifest ${v})`);
  return out;
}
