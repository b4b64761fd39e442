import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * What runtimes snippets run on here: the pinned manifest (executor/runtimes/manifest.json, production's)
 * next to what scripts/setup.mjs actually installed (.runtimes/runtime-lock.json), and how they differ.
 * Backs `GET /_emu/runtime` and `svc-emu doctor`, and gives the executor its binaries and bind paths.
 *
 * ## How a snippet's bundle finds the shared packages (verified with Bun 1.4.4 and CPython 3.11.7)
 *
 * Bun — a bundle lives in an arbitrary directory (e.g. `<workDir>/bundles/<sha>/index.ts`):
 * - Bun resolves a bare import (`@mastra/core/agent`, `ai`, `zod`, `@svc/store`) by walking up
 *   `node_modules` directories from the importing file's directory. A **symlink named `node_modules`**
 *   pointing at `installed.bun.nodeModules` (.runtimes/bun/node_modules), placed in the bundle's
 *   directory or any parent of it (one `<workDir>/bundles/node_modules` serves every bundle), works:
 *   the packages behind it resolve their own dependencies from their real paths inside
 *   .runtimes/bun/node_modules. Because a `node_modules` directory is found, Bun's auto-install stays
 *   off and a missing package fails at once with `Cannot find package 'x'`.
 * - `NODE_PATH=<nodeModules>` also works with Bun, but only with `--no-install`: with no `node_modules`
 *   above the script, Bun's default `--install=auto` fetches any package it cannot resolve from the npm
 *   registry (observed: an unpinned `left-pad` got downloaded and imported). Pass `--no-install` in
 *   every case; it costs nothing and keeps a sandbox from ever reaching for the registry.
 * - Inside bubblewrap the symlink's target must exist at the same path: bind `installed.bun.bindReadOnly`
 *   (.runtimes/bun, which also holds the binary) read-only at its own path.
 * - `@svc/store` and `@svc/integrations` are real copies in node_modules (setup copies them; npm's
 *   `file:` links would resolve from executor/…, next to the repo's own node_modules): their sources
 *   must only import relative files inside their own folder.
 * - `@mastra/core` exposes `Agent` at the `./agent` subpath export (`import { Agent } from
 *   "@mastra/core/agent"`); its package.json declares node >= 22.13, which concerns Node, not Bun.
 *
 * Python — `installed.python.bin` (.runtimes/python/bin/python) is a venv interpreter: it finds its
 * site-packages (frameworks and our `svc`, installed non-editable) through `pyvenv.cfg` beside `bin/`,
 * whatever the script's directory, so nothing is needed per bundle. `-I` (isolated) drops PYTHON* env
 * vars, user site-packages and the script's own directory from sys.path, so a runner run with `-I` adds
 * the bundle directory to sys.path itself. The venv's python is a symlink into `basePrefix` (pyvenv.cfg's
 * `home` is an absolute path there): a sandbox binds `installed.python.bindReadOnly` (the venv and
 * basePrefix) read-only at their own paths.
 */

const Version = z.string().regex(/^\d+\.\d+\.\d+([-+.][0-9A-Za-z.-]+)?$/, 'an exact version (x.y.z)');
const Packages = z.record(z.string(), Version);

export const RuntimeManifest = z.object({
  schema: z.literal(1),
  bun: z.object({ version: Version, packages: Packages }),
  python: z.object({
    /** major.minor: any patch release of it matches. */
    version: z.string().regex(/^\d+\.\d+$/, 'major.minor (e.g. 3.11)'),
    packages: Packages,
    /** Forced versions of transitive dependencies (uv --override), normally empty. */
    overrides: Packages.default({}),
  }),
  tools: z.object({ uv: Version }),
  /** Emulator-only: what debug runs use (production's runtime has no debugger). Absent: Python debug runs are off. */
  debugger: z.object({ debugpy: Version }).optional(),
});
export type RuntimeManifest = z.infer<typeof RuntimeManifest>;

const AbsPath = z.string().startsWith('/');
const InstalledPackages = z.record(z.string(), z.string().nullable());

/** .runtimes/runtime-lock.json as scripts/setup.mjs writes it (absolute, machine-local paths). */
export const RuntimeLock = z.object({
  schema: z.literal(1),
  generatedAt: z.string(),
  platform: z.string(),
  manifestSha256: z.string(),
  bun: z.object({
    bin: AbsPath,
    version: z.string(),
    nodeModules: AbsPath,
    packages: InstalledPackages,
    bindReadOnly: z.array(AbsPath),
  }),
  python: z.object({
    bin: AbsPath,
    /** x.y.z of the interpreter. */
    version: z.string(),
    /** sys.version */
    sysVersion: z.string(),
    /** sys.base_prefix: the real install the venv links to (a sandbox binds it read-only). */
    basePrefix: AbsPath,
    baseExecutable: AbsPath.nullable(),
    venv: AbsPath,
    sitePackages: AbsPath,
    packages: InstalledPackages,
    bindReadOnly: z.array(AbsPath),
  }),
  uv: z.object({ bin: AbsPath, version: z.string().nullable() }),
  bwrap: z.object({ bin: AbsPath, version: z.string() }).nullable(),
  /** debugpy for Python debug runs, outside the venv's site-packages (executor/runtimes/python/_svc_debug.py). */
  debugpy: z.object({ dir: AbsPath, version: z.string().nullable() }).optional(),
});
export type RuntimeLock = z.infer<typeof RuntimeLock>;

export const RuntimeMismatch = z.object({
  name: z.string(),
  /** The manifest's version, or `*` for our own libraries (any version, but present). */
  expected: z.string(),
  /** What is installed; null when it is missing. */
  actual: z.string().nullable(),
});
export type RuntimeMismatch = z.infer<typeof RuntimeMismatch>;

export const RuntimeInfo = z.object({
  manifest: RuntimeManifest,
  installed: RuntimeLock,
  mismatches: z.array(RuntimeMismatch),
  /** The lock was written for another manifest than the current one (setup has not run since an edit). */
  stale: z.boolean(),
  bun: z.object({ bin: AbsPath, version: z.string(), nodeModules: AbsPath }),
  python: z.object({ bin: AbsPath, version: z.string(), basePrefix: AbsPath, venv: AbsPath, sitePackages: AbsPath }),
  bwrap: z.object({ bin: AbsPath, version: z.string() }).nullable(),
});
export type RuntimeInfo = z.infer<typeof RuntimeInfo>;

/** Our own libraries: no pinned version in the manifest, but they must be there. */
const OWN_BUN_PACKAGES = ['@svc/store', '@svc/integrations'] as const;
const OWN_PYTHON_PACKAGES = ['svc'] as const;

export class RuntimesNotInstalledError extends Error {
  override readonly name = 'RuntimesNotInstalledError';
  constructor(readonly lockPath: string) {
    super(`runtimes not installed: run npm run build (${lockPath} is missing)`);
  }
}

export class RuntimeInfoInvalidError extends Error {
  override readonly name = 'RuntimeInfoInvalidError';
}

export interface RuntimeInfoPaths {
  /** .runtimes/runtime-lock.json */
  lockPath: string;
  /** executor/runtimes/manifest.json */
  manifestPath: string;
}

/** Where the lock and the manifest are for a project root. */
export function runtimeInfoPaths(root: string, runtimesDir = process.env.SVC_EMU_RUNTIMES_DIR): RuntimeInfoPaths {
  return {
    // SVC_EMU_RUNTIMES_DIR, as in scripts/setup.mjs: a VM's own runtimes beside the host's checkout.
    lockPath: join(runtimesDir ?? join(root, '.runtimes'), 'runtime-lock.json'),
    manifestPath: join(root, 'executor', 'runtimes', 'manifest.json'),
  };
}

/**
 * Reads the manifest and the lock (from a project root, or explicit paths) and compares them.
 * Throws RuntimesNotInstalledError when the lock is missing, RuntimeInfoInvalidError when a file does
 * not parse or does not match its schema.
 */
export async function readRuntimeInfo(where: string | RuntimeInfoPaths): Promise<RuntimeInfo> {
  const paths = typeof where === 'string' ? runtimeInfoPaths(where) : where;
  const manifestText = await readText(paths.manifestPath);
  if (manifestText === null) throw new RuntimeInfoInvalidError(`the runtime manifest ${paths.manifestPath} is missing`);
  const manifest = parseFile(RuntimeManifest, manifestText, paths.manifestPath);
  const lockText = await readText(paths.lockPath);
  if (lockText === null) throw new RuntimesNotInstalledError(paths.lockPath);
  const installed = parseFile(RuntimeLock, lockText, paths.lockPath);
  const manifestSha256 = createHash('sha256').update(manifestText).update('\0').digest('hex');
  return RuntimeInfo.parse({
    manifest,
    installed,
    mismatches: compareRuntime(manifest, installed),
    stale: installed.manifestSha256 !== manifestSha256,
    bun: { bin: installed.bun.bin, version: installed.bun.version, nodeModules: installed.bun.nodeModules },
    python: {
      bin: installed.python.bin,
      version: installed.python.version,
      basePrefix: installed.python.basePrefix,
      venv: installed.python.venv,
      sitePackages: installed.python.sitePackages,
    },
    bwrap: installed.bwrap,
  });
}

/** Every difference between what the manifest pins and what the lock says is installed. */
export function compareRuntime(manifest: RuntimeManifest, installed: RuntimeLock): RuntimeMismatch[] {
  const out: RuntimeMismatch[] = [];
  const exact = (name: string, expected: string, actual: string | null | undefined) => {
    if (actual !== expected) out.push({ name, expected, actual: actual ?? null });
  };
  const present = (name: string, actual: string | null | undefined) => {
    if (!actual) out.push({ name, expected: '*', actual: null });
  };
  exact('bun', manifest.bun.version, installed.bun.version);
  for (const [name, version] of Object.entries(manifest.bun.packages)) exact(name, version, installed.bun.packages[name]);
  for (const name of OWN_BUN_PACKAGES) present(name, installed.bun.packages[name]);
  const py = installed.python.version;
  if (py !== manifest.python.version && !py.startsWith(`${manifest.python.version}.`)) {
    out.push({ name: 'python', expected: manifest.python.version, actual: py });
  }
  for (const [name, version] of Object.entries(manifest.python.packages)) exact(name, version, installed.python.packages[name]);
  for (const name of OWN_PYTHON_PACKAGES) present(name, installed.python.packages[name]);
  exact('uv', manifest.tools.uv, installed.uv.version);
  return out;
}

async function readText(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function parseFile<T extends z.ZodType>(schema: T, text: string, file: string): z.infer<T> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new RuntimeInfoInvalidError(`${file} is not valid JSON (${(err as Error).message}); run npm run build`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new RuntimeInfoInvalidError(
      `${file} is invalid at ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'schema mismatch'}; run npm run build`,
    );
  }
  return parsed.data;
}
