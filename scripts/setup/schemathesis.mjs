// Schemathesis for the test suite (test/contract/schemathesis.test.ts), in a tools venv of its own:
// .runtimes/tools-venv, made with the same pinned uv as the snippet runtime's venv but never mixed into it
// (.runtimes/python must hold exactly executor/runtimes/python/requirements.txt, the production manifest).
// Called by scripts/setup.mjs for --for=test only. Node built-ins ONLY (this runs before node_modules exists).
//
// The venv holds exactly scripts/setup/schemathesis-requirements.txt (schemathesis==4.32.5 and what it needs,
// pinned). After changing the Schemathesis version, regenerate that file:
//   echo schemathesis==X.Y.Z | .runtimes/uv/bin/uv pip compile - --universal --no-header --no-annotate \
//     -o scripts/setup/schemathesis-requirements.txt
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REQUIREMENTS = join(dirname(fileURLToPath(import.meta.url)), 'schemathesis-requirements.txt');

/**
 * Makes (or checks, quickly, by a stamp) .runtimes/tools-venv with Schemathesis's `st` in it. Needs the uv
 * and the base Python that the python-runtime step of scripts/setup.mjs recorded, so it runs after it.
 * @param {{ runtimesDir: string, quiet?: boolean }} opts
 * @returns {Promise<string | undefined>} a one-line summary when it installed something
 */
export async function setupSchemathesis({ runtimesDir, quiet = false }) {
  const venv = join(runtimesDir, 'tools-venv');
  const stampFile = join(venv, '.svc-emu-stamp.json');
  const st = join(venv, 'bin', 'st');
  const requirements = readFileSync(REQUIREMENTS, 'utf8');
  const basePython = readJson(join(runtimesDir, 'python', '.svc-emu-stamp.json'))?.basePython;
  const uv = join(runtimesDir, 'uv', 'bin', 'uv');
  if (typeof basePython !== 'string' || !existsSync(uv)) {
    throw new Error(`no uv or base Python recorded in ${runtimesDir} (the python-runtime step of scripts/setup.mjs makes them)`);
  }
  const hash = createHash('sha256').update(requirements).update('\0').update(basePython).digest('hex');
  if (readJson(stampFile)?.hash === hash && existsSync(st)) return undefined;

  const started = Date.now();
  const env = { UV_PYTHON_DOWNLOADS: 'never', VIRTUAL_ENV: undefined, PYTHONPATH: undefined, NO_COLOR: '1' };
  rmSync(venv, { recursive: true, force: true });
  await run([uv, 'venv', '--no-project', '--python', basePython, venv], env);
  await run([uv, 'pip', 'sync', '--python', join(venv, 'bin', 'python'), REQUIREMENTS], env);
  const version = (await run([st, '--version'], env)).trim().split(/\s+/).at(-1);
  const wanted = /^schemathesis==(\S+)$/m.exec(requirements)?.[1];
  if (version !== wanted) throw new Error(`${st} --version says ${version}, ${REQUIREMENTS} pins ${wanted}`);
  writeFileSync(stampFile, `${JSON.stringify({ hash, version, basePython, at: new Date().toISOString() }, null, 2)}\n`);
  const summary = `Schemathesis ${version} ready in .runtimes/tools-venv (${((Date.now() - started) / 1000).toFixed(1)}s)`;
  if (!quiet) process.stdout.write(`setup: ${summary}\n`);
  return summary;
}

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

/** Runs argv (no shell, stdin closed, output captured); resolves to stdout, rejects with the output's tail. */
function run(argv, extraEnv) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...extraEnv };
    for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
    const child = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      output += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGTERM'), 600_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`${argv[0]} could not start: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(stdout);
      const tail = output.trim().split('\n').slice(-40).join('\n');
      reject(new Error(`${argv.slice(0, 3).join(' ')} ${signal ? `was killed (${signal})` : `exited with ${code}`}:\n${tail}`));
    });
  });
}
