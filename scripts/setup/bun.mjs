// The step `bun-runtime`: .runtimes/bun, the npm package `bun` and the snippets' shared node_modules (npm ci of
// executor/runtimes/bun/runtime-package-lock.json), with our @svc/* libraries copied in.
import { copyFileSync, cpSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { installedTreeMatchesLock } from './deps.mjs';
import { hashTree, readJson, readText, sha256, writeJson } from './files.mjs';
import { manifestSection, readManifest } from './manifest.mjs';
import { BUN_DIR, BUN_STAMP, RELOCK_COMMAND, ROOT, RUNTIME_PACKAGE, RUNTIME_PACKAGE_LOCK, SVC_BUN_PACKAGES } from './paths.mjs';
import { npmCommand, runTool, SetupError, toolVersion } from './tool.mjs';

/** npm flags for the runtime's node_modules (install and relock alike; .npmrc there repeats them). */
export const BUN_NPM_FLAGS = ['--install-links', '--ignore-scripts', '--no-audit', '--no-fund', '--include=optional'];
/**
 * A nested npm must not inherit the outer `npm test`'s idea of where the project is: npm exports
 * npm_config_local_prefix=<repo root> to scripts, and npm ci would then install into the repo's own
 * node_modules. Also drop the outer run's allow-scripts setting (the runtime declares its own).
 */
export const NESTED_NPM_ENV = {
  npm_config_local_prefix: undefined,
  npm_config_prefix: undefined,
  npm_config_allow_scripts: undefined,
  npm_config_update_notifier: 'false',
  CI: process.env.CI ?? 'true',
};

/** @type {Step} */
export const bunRuntimeStep = {
  name: 'bun-runtime',
  title: 'installing the Bun runtime (.runtimes/bun)',
  isDone() {
    const stamp = readJson(BUN_STAMP);
    return (
      stamp !== null &&
      stamp.depsHash === bunDepsHash() &&
      stamp.svcHash === bunSvcHash() &&
      typeof stamp.bin === 'string' &&
      existsSync(stamp.bin)
    );
  },
  async run(ctx) {
    const manifest = readManifest();
    const disagreement = runtimePackageDisagreement(manifest, readJson(RUNTIME_PACKAGE), readJson(RUNTIME_PACKAGE_LOCK));
    if (disagreement) throw new SetupError(`${disagreement}: run \`${RELOCK_COMMAND}\``);
    const depsHash = bunDepsHash();
    const svcHash = bunSvcHash();
    const stamp = readJson(BUN_STAMP);
    rmSync(BUN_STAMP, { force: true });
    let how = 'libraries updated';
    if (stamp?.depsHash !== depsHash || !existsSync(join(BUN_DIR, 'node_modules', '.package-lock.json'))) {
      prepareBunDir();
      if (installedTreeMatchesLock(BUN_DIR)) {
        how = 'node_modules already matched its lock'; // only the stamp was stale
      } else {
        // npm ci: exactly the committed lock, so every machine (and the Lima VM) gets the same tree.
        // --ignore-scripts: the only install script in the tree is bun's postinstall, which just moves the
        // binary out of @oven/bun-<platform> (denied in allowScripts too; the flag also covers npm 10).
        // --install-links: `file:` deps are copied in, not symlinked (see syncSvcBunPackages).
        await runTool(ctx, 'npm ci (.runtimes/bun)', npmCommand(['ci', '--prefix', BUN_DIR, ...BUN_NPM_FLAGS]), {
          cwd: BUN_DIR,
          env: NESTED_NPM_ENV,
          timeoutMs: 600_000,
        });
        how = 'npm ci';
      }
    }
    syncSvcBunPackages();
    const bin = findBunBinary();
    if (!bin)
      throw new SetupError(`npm ci finished but no Bun binary was found under ${relative(ROOT, join(BUN_DIR, 'node_modules', '@oven'))}`);
    const version = toolVersion(bin, ['--version']);
    if (version !== manifest.bun.version)
      throw new SetupError(`${relative(ROOT, bin)} --version says ${version}, the manifest pins ${manifest.bun.version}`);
    writeJson(BUN_STAMP, { depsHash, svcHash, bin, version, at: new Date().toISOString() });
    return `Bun ${version} runtime ready in .runtimes/bun (${how})`;
  },
};

/** What `npm ci` in .runtimes/bun depends on (the platform too: it picks @oven/bun-<platform>). */
function bunDepsHash() {
  return sha256(manifestSection('bun'), readText(RUNTIME_PACKAGE), readText(RUNTIME_PACKAGE_LOCK), `${process.platform}-${process.arch}`);
}

function bunSvcHash() {
  return hashTree(Object.values(SVC_BUN_PACKAGES));
}

/** The dependencies runtime-package.json must declare for `manifest` (bun itself, the frameworks, our libraries). */
export function runtimePackageDependencies(manifest) {
  const deps = { bun: manifest.bun.version, ...manifest.bun.packages };
  // runtime-package.json is installed as .runtimes/bun/package.json: file: paths are relative to that dir.
  for (const [name, dir] of Object.entries(SVC_BUN_PACKAGES)) deps[name] = `file:../../${dir}`;
  return Object.fromEntries(Object.entries(deps).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Why runtime-package.json or its lock does not match the manifest, or null when they agree. */
function runtimePackageDisagreement(manifest, pkg, lock) {
  const rel = (f) => relative(ROOT, f);
  if (!pkg) return `${rel(RUNTIME_PACKAGE)} is missing`;
  if (!lock) return `${rel(RUNTIME_PACKAGE_LOCK)} is missing`;
  const want = runtimePackageDependencies(manifest);
  const have = pkg.dependencies ?? {};
  for (const name of new Set([...Object.keys(want), ...Object.keys(have)])) {
    if (want[name] !== have[name])
      return `${rel(RUNTIME_PACKAGE)} has ${name}@${have[name] ?? '(none)'}, the manifest wants ${want[name] ?? '(none)'}`;
  }
  const root = lock.packages?.[''];
  if (
    JSON.stringify(root?.dependencies ?? {}) !==
    JSON.stringify(Object.fromEntries(Object.entries(have).sort(([a], [b]) => (a < b ? -1 : 1))))
  ) {
    return `${rel(RUNTIME_PACKAGE_LOCK)} is out of date with ${rel(RUNTIME_PACKAGE)}`;
  }
  for (const [name, version] of Object.entries({ bun: manifest.bun.version, ...manifest.bun.packages })) {
    const locked = lock.packages?.[`node_modules/${name}`]?.version;
    if (locked !== version) return `${rel(RUNTIME_PACKAGE_LOCK)} locks ${name}@${locked ?? '(none)'}, the manifest wants ${version}`;
  }
  return null;
}

/** .runtimes/bun: package.json and package-lock.json from the committed sources, and an .npmrc for hand-run npm. */
export function prepareBunDir() {
  mkdirSync(BUN_DIR, { recursive: true });
  copyFileSync(RUNTIME_PACKAGE, join(BUN_DIR, 'package.json'));
  if (existsSync(RUNTIME_PACKAGE_LOCK)) copyFileSync(RUNTIME_PACKAGE_LOCK, join(BUN_DIR, 'package-lock.json'));
  writeFileSync(
    join(BUN_DIR, '.npmrc'),
    "# Written by scripts/setup.mjs: the Bun runtime's node_modules (see executor/runtimes/bun/runtime-package.json).\ninstall-links=true\nignore-scripts=true\naudit=false\nfund=false\n",
  );
}

/**
 * Copies our libraries into node_modules/@svc/*. npm's `file:` deps are symlinks by default, and a
 * symlinked package resolves its imports from its real path (executor/runtimes/…, whose parents hold
 * the repo's own node_modules, not the runtime's), and a sandbox would have to bind the source tree.
 * Copies resolve from inside .runtimes/bun like every other package. npm ci --install-links copies them
 * too; this re-copies after an edit without a full npm ci.
 */
function syncSvcBunPackages() {
  for (const [name, dir] of Object.entries(SVC_BUN_PACKAGES)) {
    const dest = join(BUN_DIR, 'node_modules', ...name.split('/'));
    rmSync(dest, { recursive: true, force: true });
    cpSync(join(ROOT, dir), dest, {
      recursive: true,
      filter: (src) => {
        const base = src.slice(src.lastIndexOf(sep) + 1);
        return !(base === 'node_modules' || (base.startsWith('.') && src !== join(ROOT, dir)));
      },
    });
  }
}

/**
 * The Bun binary from the platform's optional dependency (@oven/bun-linux-x64 here). Install scripts
 * are off, so bun's postinstall never moves it into node_modules/bun/bin/bun.exe (a placeholder then);
 * if someone ran npm with scripts on, that is where it is instead.
 */
export function findBunBinary() {
  const oven = join(BUN_DIR, 'node_modules', '@oven');
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  const exe = process.platform === 'win32' ? 'bun.exe' : 'bun';
  const names = [`bun-${os}-${arch}`, `bun-${os}-${arch}-musl`, `bun-${os}-${arch}-baseline`, `bun-${os}-${arch}-musl-baseline`];
  for (const name of names) {
    const bin = join(oven, name, 'bin', exe);
    if (existsSync(bin)) return bin;
  }
  const moved = join(BUN_DIR, 'node_modules', 'bun', 'bin', 'bun.exe');
  try {
    if (statSync(moved).size > 1_000_000) return moved;
  } catch {
    // not there either
  }
  return null;
}
