// Spawns the real runners (Bun, CPython) the way the executor does — stdio ['ignore','pipe','pipe','pipe'],
// frames on fd 3 — and drives them through RunnerChannel.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { RunnerChannel, type InvokeOutcome } from '../../executor/runner-client';
import type { HostOp, InitErrorFrame, ReadyFrame } from '../../executor/protocol';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BUN_RUNNER = join(ROOT, 'executor/runtimes/bun/runner.ts');
export const PY_RUNNER = join(ROOT, 'executor/runtimes/python/svc_runner.py');
export const PY_SVC_DIR = join(ROOT, 'executor/runtimes/python/svc');
const TMP = join(ROOT, 'test/.tmp/runners');

export type Runtime = 'bun' | 'python';

/** Bun from the project's runtimes (setup), else a scratch install in /tmp, else SVC_EMU_TEST_BUN. */
export function findBun(): string | null {
  const candidates = [
    process.env.SVC_EMU_TEST_BUN,
    join(ROOT, '.runtimes/bun/node_modules/@oven/bun-linux-x64/bin/bun'),
    join(ROOT, '.runtimes/bun/node_modules/bun/bin/bun.exe'),
    '/tmp/bunx/node_modules/@oven/bun-linux-x64/bin/bun',
    '/tmp/bunx/node_modules/bun/bin/bun.exe',
  ];
  for (const c of candidates) if (c && existsSync(c)) return c;
  return null;
}

/** The project's venv python, else python3 (resolved to the real binary: a pyenv shim costs ~50 ms a spawn). */
export function findPython(): string | null {
  const venv = join(ROOT, '.runtimes/python/bin/python');
  if (existsSync(venv)) return venv;
  try {
    const exe = execFileSync('python3', ['-c', 'import sys; assert sys.version_info >= (3, 11); print(sys.executable)'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return exe || null;
  } catch {
    return null;
  }
}

export function runtimeBinary(runtime: Runtime): string | null {
  return runtime === 'bun' ? findBun() : findPython();
}

/** Logs loudly (once per file) why a runtime's tests are skipped. */
export function skipNote(runtime: Runtime): void {
  const what = runtime === 'bun' ? 'Bun (.runtimes/bun or /tmp/bunx: `npm i bun@1.4.4`)' : 'Python 3.11 (.runtimes/python or python3)';
  console.warn(`\n  !!! SKIPPING the ${runtime} runner tests: no ${what} found\n`);
}

let tmpReady = false;
/** test/.tmp/runners with node_modules/@svc/* linked to our packages (as the runtime's shared node_modules has them). */
function tmpRoot(): string {
  if (tmpReady) return TMP;
  for (const name of ['store', 'integrations']) {
    const link = join(TMP, 'node_modules/@svc', name);
    if (existsSync(link)) continue;
    mkdirSync(dirname(link), { recursive: true });
    try {
      symlinkSync(join(ROOT, 'executor/runtimes/bun/packages', `svc-${name}`), link, 'dir');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  tmpReady = true;
  return TMP;
}

export function makeBundle(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpRoot(), 'bundle-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

export interface StartedRunner {
  runtime: Runtime;
  child: ChildProcess;
  channel: RunnerChannel;
  ready: ReadyFrame | InitErrorFrame;
  /** spawn → ready (or init_error), ms. */
  coldMs: number;
  bundle: string;
  stderr(): string;
  stop(): Promise<void>;
}

export function spawnRunner(runtime: Runtime, bundle: string, entry: string, extraEnv: Record<string, string> = {}): ChildProcess {
  const bin = runtimeBinary(runtime);
  if (!bin) throw new Error(`no ${runtime} binary`);
  const args =
    runtime === 'bun' ? [BUN_RUNNER, '--bundle', bundle, '--entry', entry] : ['-u', PY_RUNNER, '--bundle', bundle, '--entry', entry];
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', RUNNER_OWN: 'kept' };
  // The svc package as the venv will have it installed (until setup installs it there).
  if (runtime === 'python') env.PYTHONPATH = PY_SVC_DIR;
  Object.assign(env, extraEnv);
  return spawn(bin, args, { cwd: bundle, env, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
}

export async function startRunner(
  runtime: Runtime,
  files: Record<string, string>,
  entry?: string,
  extraEnv: Record<string, string> = {},
): Promise<StartedRunner> {
  const bundle = makeBundle(files);
  const theEntry = entry ?? (runtime === 'bun' ? 'main.ts' : 'main.py');
  const t0 = performance.now();
  const child = spawnRunner(runtime, bundle, theEntry, extraEnv);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stderr += `[stdout] ${d}`));
  const channel = new RunnerChannel(child.stdio[3] as Duplex);
  let ready: ReadyFrame | InitErrorFrame;
  try {
    ready = await channel.waitReady(15_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${runtime} runner did not start: ${(err as Error).message}\nstderr: ${stderr}`);
  }
  const coldMs = performance.now() - t0;
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    runtime,
    child,
    channel,
    ready,
    coldMs,
    bundle,
    stderr: () => stderr,
    async stop() {
      channel.close();
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
      rmSync(bundle, { recursive: true, force: true });
    },
  };
}

export type Event =
  | { t: 'chunk'; data: unknown }
  | { t: 'log'; stream: 'stdout' | 'stderr'; data: string }
  | { t: 'call'; op: HostOp; args: Record<string, unknown> };

export interface RunResult {
  outcome: InvokeOutcome;
  events: Event[];
  chunks: unknown[];
  /** stdout / stderr text of this invocation. */
  stdout: string;
  stderr: string;
}

let seq = 0;

/** Runs one invocation; host calls go to `onCall` (default: a fresh in-memory store). */
export async function run(
  r: StartedRunner,
  input: Record<string, unknown> = {},
  env: Record<string, string> = {},
  onCall?: (op: HostOp, args: Record<string, unknown>) => Promise<unknown>,
): Promise<RunResult> {
  const events: Event[] = [];
  const answer = onCall ?? fakeStore().onCall;
  const outcome = await r.channel.invoke(`inv_${++seq}`, input, env, {
    onChunk: (data) => events.push({ t: 'chunk', data }),
    onLog: (stream, data) => events.push({ t: 'log', stream, data }),
    onCall: async (op, args) => {
      events.push({ t: 'call', op, args });
      return answer(op, args);
    },
  });
  const logs = (s: 'stdout' | 'stderr') =>
    events
      .filter((e): e is Extract<Event, { t: 'log' }> => e.t === 'log' && e.stream === s)
      .map((e) => e.data)
      .join('');
  return {
    outcome,
    events,
    chunks: events.filter((e) => e.t === 'chunk').map((e) => (e as { data: unknown }).data),
    stdout: logs('stdout'),
    stderr: logs('stderr'),
  };
}

/** An in-memory store answering store.* host calls (errors carry a code, as the core's do). */
export function fakeStore(initial: Record<string, unknown> = {}) {
  const map = new Map<string, unknown>(Object.entries(initial));
  return {
    map,
    onCall: async (op: HostOp, args: Record<string, unknown>): Promise<unknown> => {
      const key = String(args.key);
      switch (op) {
        case 'store.get':
          return map.has(key) ? map.get(key) : null;
        case 'store.set':
          if (key === 'forbidden') throw Object.assign(new Error('that key is not allowed'), { code: 'validation_failed' });
          map.set(key, args.value);
          return null;
        case 'store.delete':
          return map.delete(key);
        case 'store.list':
          return [...map.keys()].filter((k) => k.startsWith(String(args.prefix ?? ''))).sort();
        case 'integrations.call':
          return { status: 200, headers: { 'content-type': 'application/json' }, body: { echo: args } };
      }
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
