// The steps `python-runtime` (.runtimes/python: a uv-made venv of the locked requirements and our `svc` package,
// uv itself pinned in .runtimes/uv) and `runner-bytecode` (the Python runner compiled ahead).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { hashTree, readJson, readText, realpathSafe, sha256, writeJson } from './files.mjs';
import { manifestSection, readManifest } from './manifest.mjs';
import {
  PYTHON_STAMP,
  RELOCK_COMMAND,
  REQUIREMENTS,
  ROOT,
  RUNTIME_LOCK,
  RUNTIMES_DIR,
  SVC_PYTHON,
  UV_DIR,
  UV_STAMP,
  VENV,
} from './paths.mjs';
import { runTool, SetupError, toolVersion } from './tool.mjs';

/** @type {Step} */
export const pythonRuntimeStep = {
  name: 'python-runtime',
  title: 'installing the Python runtime (.runtimes/python, uv)',
  isDone() {
    const stamp = readJson(PYTHON_STAMP);
    return (
      stamp !== null &&
      stamp.hash === pythonHash() &&
      existsSync(join(VENV, 'bin', 'python')) &&
      typeof stamp.basePython === 'string' &&
      existsSync(stamp.basePython)
    );
  },
  async run(ctx) {
    const manifest = readManifest();
    const disagreement = requirementsDisagreement(manifest, readText(REQUIREMENTS));
    if (disagreement) throw new SetupError(`${disagreement}: run \`${RELOCK_COMMAND}\``);
    const hash = pythonHash();
    rmSync(PYTHON_STAMP, { force: true });
    const base = findBasePython(manifest.python.version);
    const uv = await ensureUv(ctx, manifest, base);
    const uvEnv = { UV_PYTHON_DOWNLOADS: 'never', VIRTUAL_ENV: undefined, PYTHONPATH: undefined };
    const python = join(VENV, 'bin', 'python');
    if (!venvMatches(base)) {
      rmSync(VENV, { recursive: true, force: true });
      await runTool(ctx, 'uv venv', [uv, 'venv', '--no-project', '--python', base.executable, VENV], { env: uvEnv });
    }
    // One `uv pip sync` of the locked requirements plus our `svc` package: the venv then holds exactly
    // these (a package dropped from the lock goes), and svc is never missing in between. svc is
    // installed non-editable (a sandbox sees site-packages, not the source tree) and rebuilt every time
    // this step runs, which is whenever its sources change (they are in pythonHash()).
    const wanted = join(RUNTIMES_DIR, 'python-sync.txt');
    writeFileSync(wanted, `-r ${REQUIREMENTS}\nsvc @ ${pathToFileURL(SVC_PYTHON).href}\n`);
    await runTool(ctx, 'uv pip sync', [uv, 'pip', 'sync', '--python', python, '--compile-bytecode', '--reinstall-package', 'svc', wanted], {
      env: uvEnv,
      timeoutMs: 600_000,
    });
    writeJson(PYTHON_STAMP, { hash, basePython: base.executable, version: base.version, at: new Date().toISOString() });
    return `Python ${base.version} runtime ready in .runtimes/python (uv ${manifest.tools.uv})`;
  },
};

/** PEP 503 name normalisation: `Langchain_Core` and `langchain-core` are one package. */
function normalisePyName(name) {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/** name → pinned version for every `name==version` line of a requirements file. */
export function parseRequirementPins(text) {
  const pins = {};
  for (const line of (text ?? '').split('\n')) {
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)/.exec(line.trim());
    if (match) pins[normalisePyName(match[1])] = match[2];
  }
  return pins;
}

function requirementsDisagreement(manifest, text) {
  if (text === null) return `${relative(ROOT, REQUIREMENTS)} is missing`;
  const pins = parseRequirementPins(text);
  for (const [name, version] of Object.entries(manifest.python.packages)) {
    const pinned = pins[normalisePyName(name)];
    if (pinned !== version) return `${relative(ROOT, REQUIREMENTS)} pins ${name}==${pinned ?? '(none)'}, the manifest wants ${version}`;
  }
  return null;
}

/** What the venv depends on: the manifest (python, uv), the locked requirements and our `svc` sources. */
function pythonHash() {
  return sha256(manifestSection('python', 'tools'), readText(REQUIREMENTS), hashTree([relative(ROOT, SVC_PYTHON)]));
}

/**
 * A CPython `want` (e.g. "3.11") already on this machine: uv runs with UV_PYTHON_DOWNLOADS=never, and a
 * sandbox must bind this install read-only (the venv's python is a symlink into it). Order: $SVC_EMU_PYTHON,
 * python3.11 on PATH (a pyenv shim resolves to the real one), pyenv's versions, the system's.
 * @returns {{ executable: string, version: string, basePrefix: string }}
 */
export function findBasePython(want) {
  const exe = `python${want}`;
  const candidates = [];
  if (process.env.SVC_EMU_PYTHON) candidates.push(process.env.SVC_EMU_PYTHON);
  candidates.push(exe);
  const pyenvRoot = process.env.PYENV_ROOT ?? join(homedir(), '.pyenv');
  try {
    const patch = (v) => Number(v.split('.')[2]);
    const versions = readdirSync(join(pyenvRoot, 'versions')).filter((v) => v.startsWith(`${want}.`) && /^\d+\.\d+\.\d+$/.test(v));
    for (const v of versions.sort((a, b) => patch(b) - patch(a))) candidates.push(join(pyenvRoot, 'versions', v, 'bin', exe));
  } catch {
    // no pyenv
  }
  candidates.push(`/usr/local/bin/${exe}`, `/usr/bin/${exe}`);
  const probe =
    'import json, sys; print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "basePrefix": sys.base_prefix, "version": "%d.%d.%d" % sys.version_info[:3]}))';
  const tried = [];
  for (const candidate of candidates) {
    const result = spawnSync(candidate, ['-I', '-c', probe], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
    if (result.status !== 0) {
      tried.push(candidate);
      continue;
    }
    let info;
    try {
      info = JSON.parse(result.stdout);
    } catch {
      continue;
    }
    if (!info.version.startsWith(`${want}.`)) {
      tried.push(`${candidate} (${info.version})`);
      continue;
    }
    // A venv's python stands for its base install: use the base, as uv and a sandbox need the real one.
    const executable = info.prefix === info.basePrefix ? realpathSync(info.executable) : realpathSync(join(info.basePrefix, 'bin', exe));
    return { executable, version: info.version, basePrefix: realpathSync(info.basePrefix) };
  }
  throw new SetupError(
    `no Python ${want} found (tried ${tried.join(', ')}). Install it (Debian: apt-get install python${want}; or pyenv install ${want}) or point SVC_EMU_PYTHON at one; setup never downloads a Python (UV_PYTHON_DOWNLOADS=never)`,
  );
}

/** uv from PyPI, pinned: a venv of its own in .runtimes/uv with `pip install uv==<manifest>`. Returns uv's path. */
export async function ensureUv(ctx, manifest, base) {
  const uv = join(UV_DIR, 'bin', 'uv');
  const stamp = readJson(UV_STAMP);
  if (stamp?.version === manifest.tools.uv && stamp.basePython === base.executable && existsSync(uv)) return uv;
  rmSync(UV_DIR, { recursive: true, force: true });
  await runTool(ctx, 'python -m venv .runtimes/uv', [base.executable, '-m', 'venv', UV_DIR]);
  await runTool(
    ctx,
    `pip install uv==${manifest.tools.uv}`,
    [join(UV_DIR, 'bin', 'python'), '-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', `uv==${manifest.tools.uv}`],
    {
      env: { PIP_REQUIRE_VIRTUALENV: undefined, VIRTUAL_ENV: undefined },
      timeoutMs: 300_000,
    },
  );
  const version = toolVersion(uv, ['--version']).split(/\s+/)[1];
  if (version !== manifest.tools.uv) throw new SetupError(`.runtimes/uv/bin/uv is ${version}, the manifest pins ${manifest.tools.uv}`);
  writeJson(UV_STAMP, { version, basePython: base.executable, at: new Date().toISOString() });
  return uv;
}

/** The venv exists and was made from `base` (pyvenv.cfg's home and version). */
function venvMatches(base) {
  const cfg = readText(join(VENV, 'pyvenv.cfg'));
  if (!cfg || !existsSync(join(VENV, 'bin', 'python'))) return false;
  const get = (key) => new RegExp(`^${key}\\s*=\\s*(.*)$`, 'm').exec(cfg)?.[1]?.trim();
  const home = get('home');
  return home !== undefined && realpathSafe(home) === dirname(base.executable) && get('version_info') === base.version;
}

/**
 * Where debugpy goes: <venv>/svc-debug, beside the venv's bin/ and lib/, not in its site-packages. Production has
 * no debugger, so a snippet must not be able to import one: only a debug run of the runner puts this directory on
 * sys.path (executor/runtimes/python/_svc_debug.py, DEBUGPY_DIR_NAME). It is inside the venv so that a sandbox,
 * which binds the venv read-only, sees it with no bind of its own.
 */
export const DEBUGPY_DIR = join(VENV, 'svc-debug');

/** The installed debugpy's version (its dist-info), or null. */
export function installedDebugpy() {
  try {
    const info = readdirSync(DEBUGPY_DIR).find((f) => /^debugpy-.+\.dist-info$/.test(f));
    return info ? info.slice('debugpy-'.length, -'.dist-info'.length) : null;
  } catch {
    return null;
  }
}

/**
 * The step `python-debugger`: debugpy, the version executor/runtimes/manifest.json pins under `debugger.debugpy`
 * (an emulator-only tool: production's runtime has none), installed with uv into DEBUGPY_DIR (`--target`,
 * no dependencies: debugpy vendors pydevd), bytecode compiled ahead (the sandbox binds it read-only). Runs after
 * python-runtime, which may have made the venv anew.
 * @type {Step}
 */
export const pythonDebuggerStep = {
  name: 'python-debugger',
  title: 'installing debugpy for Python debug runs (.runtimes/python/svc-debug)',
  isDone: () => installedDebugpy() === readManifest().debugger?.debugpy,
  async run(ctx) {
    const manifest = readManifest();
    const version = manifest.debugger?.debugpy;
    if (!version) throw new SetupError('executor/runtimes/manifest.json pins no debugger.debugpy');
    const uv = await ensureUv(ctx, manifest, findBasePython(manifest.python.version));
    rmSync(DEBUGPY_DIR, { recursive: true, force: true });
    await runTool(
      ctx,
      `uv pip install debugpy==${version}`,
      [
        uv,
        'pip',
        'install',
        '--python',
        join(VENV, 'bin', 'python'),
        '--target',
        DEBUGPY_DIR,
        '--no-deps',
        '--compile-bytecode',
        `debugpy==${version}`,
      ],
      { env: { UV_PYTHON_DOWNLOADS: 'never', VIRTUAL_ENV: undefined, PYTHONPATH: undefined }, timeoutMs: 300_000 },
    );
    const installed = installedDebugpy();
    if (installed !== version)
      throw new SetupError(`${relative(ROOT, DEBUGPY_DIR)} holds debugpy ${installed ?? '(none)'}, the manifest pins ${version}`);
    return `debugpy ${version} ready in ${relative(ROOT, DEBUGPY_DIR)} (debug runs only)`;
  },
};

const RUNNER_PY_DIR = join(ROOT, 'executor', 'runtimes', 'python');
const RUNNER_BYTECODE_STAMP = join(RUNTIMES_DIR, 'runner-bytecode.json');
const runnerSourcesHash = () =>
  createHash('sha256')
    .update(
      readdirSync(RUNNER_PY_DIR)
        .filter((f) => f.endsWith('.py'))
        .sort()
        .map((f) => f + readFileSync(join(RUNNER_PY_DIR, f), 'utf8'))
        .join('\0'),
    )
    .digest('hex');

/**
 * The Python runner's bytecode, compiled ahead: the sandbox binds executor/runtimes read-only, so a
 * runner could never cache it itself and would recompile on every cold start (~3 ms).
 * @type {Step}
 */
export const runnerBytecodeStep = {
  name: 'runner-bytecode',
  title: 'compiling the Python runner',
  isDone: () => readJson(RUNNER_BYTECODE_STAMP)?.hash === runnerSourcesHash(),
  async run(ctx) {
    const python = readJson(RUNTIME_LOCK)?.python?.bin;
    if (!python) throw new SetupError('no Python runtime recorded in the runtime lock: the python-runtime step did not finish');
    await runTool(ctx, 'python -m compileall (runner)', [python, '-m', 'compileall', '-q', RUNNER_PY_DIR]);
    writeJson(RUNNER_BYTECODE_STAMP, { hash: runnerSourcesHash() });
    return 'compiled the Python runner';
  },
};
