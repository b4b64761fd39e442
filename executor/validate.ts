import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import type { Runtime } from './types';
import type { CheckerSandbox } from './local-host';

export interface CodeProblem {
  file: string;
  line?: number;
  column?: number;
  message: string;
}

export interface CodeCheckerPaths {
  bunBin: string | null;
  pythonBin: string | null;
  /** executor/runtimes, where check.ts and check.py live. */
  runtimesDir: string;
  /**
   * The sandbox a checker runs in (LocalSandboxHost.checkerSandbox in executor/local-host.ts): checkers read
   * tenants' code, so a bug in a parser must not be the core's, let alone host root's. Absent or null: the
   * core's own user, no sandbox.
   */
  sandbox?: (runtime: Runtime, env: Record<string, string>) => Promise<CheckerSandbox | null>;
}

type CheckInput = { runtime: Runtime; entrypoint: string; files: Record<string, string> };

/**
 * Checks code with the runtime's own compiler (Bun's transpiler, CPython's `compile`), so a version that
 * cannot load is refused at creation with the file and line. One long-lived checker process per runtime
 * (started on first use, restarted if it dies or hangs) answers one request at a time: spawning one per
 * version cost ~15 ms of the version's creation.
 */
export function createCodeChecker(paths: CodeCheckerPaths, timeoutMs = 15_000) {
  const checkers: Partial<Record<Runtime, Checker>> = {};
  const argv = (runtime: Runtime): string[] | null => {
    if (runtime === 'bun') return paths.bunBin ? [paths.bunBin, '--no-install', join(paths.runtimesDir, 'bun', 'check.ts')] : null;
    return paths.pythonBin ? [paths.pythonBin, '-I', '-u', join(paths.runtimesDir, 'python', 'check.py')] : null;
  };
  const check = async (input: CheckInput): Promise<CodeProblem[]> => {
    const cmd = argv(input.runtime);
    if (!cmd) return []; // the runtime is not installed: nothing to check with (parity is reported degraded)
    const sandbox = paths.sandbox;
    const checker = (checkers[input.runtime] ??= new Checker(cmd, timeoutMs, sandbox ? (env) => sandbox(input.runtime, env) : null));
    return checker.check({ entrypoint: input.entrypoint, files: input.files });
  };
  check.close = () => {
    for (const c of Object.values(checkers)) c?.close();
  };
  return check;
}

class Checker {
  private child: ChildProcess | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private waiting: ((line: string | Error) => void) | null = null;
  private stderr = '';

  constructor(
    private readonly argv: string[],
    private readonly timeoutMs: number,
    private readonly sandbox: ((env: Record<string, string>) => Promise<CheckerSandbox | null>) | null,
  ) {}

  private async start(): Promise<ChildProcess> {
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0' };
    const sandbox = this.sandbox ? await this.sandbox({ ...env, PATH: '/usr/bin:/bin' }) : null;
    const argv = sandbox ? [...sandbox.prefix, ...this.argv] : this.argv;
    const seccomp = sandbox?.seccompFd ?? null;
    const fd = seccomp ? seccomp.open() : null;
    let child: ChildProcess;
    try {
      const stdio: ('pipe' | 'ignore' | number)[] = ['pipe', 'pipe', 'pipe'];
      if (seccomp) while (stdio.length <= seccomp.fd) stdio.push(stdio.length === seccomp.fd ? fd! : 'ignore');
      child = spawn(argv[0]!, argv.slice(1), { stdio, env: sandbox ? {} : env, ...(sandbox ? { cwd: '/' } : {}) });
    } finally {
      if (fd !== null) closeSync(fd); // the child has its own copy
    }
    createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', (line) => {
      const w = this.waiting;
      this.waiting = null;
      w?.(line);
    });
    child.stderr!.on('data', (c: Buffer) => (this.stderr = (this.stderr + c.toString('utf8')).slice(-2000)));
    const gone = (why: string) => {
      if (this.child === child) this.child = null;
      const w = this.waiting;
      this.waiting = null;
      w?.(new Error(`${why}: ${this.stderr.trim().slice(0, 500)}`));
    };
    child.on('exit', (code, signal) => gone(`the code checker exited (${signal ?? code})`));
    child.on('error', (err) => gone(`the code checker could not start (${err.message})`));
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    (child.stdout as unknown as { unref?: () => void }).unref?.();
    (child.stderr as unknown as { unref?: () => void }).unref?.();
    return child;
  }

  check(request: { entrypoint: string; files: Record<string, string> }): Promise<CodeProblem[]> {
    const run = async (): Promise<CodeProblem[]> => {
      const child = (this.child ??= await this.start());
      const answer = await new Promise<string | Error>((resolve) => {
        const timer = setTimeout(() => {
          this.waiting = null;
          child.kill('SIGKILL'); // hung: the next check starts a fresh one
          resolve(new Error(`the code check did not answer within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        this.waiting = (v) => {
          clearTimeout(timer);
          resolve(v);
        };
        child.stdin!.write(JSON.stringify(request) + '\n');
      });
      if (answer instanceof Error) throw answer;
      const parsed = JSON.parse(answer) as CodeProblem[] | { error: string };
      if (!Array.isArray(parsed)) throw new Error(`the code check failed: ${parsed.error}`);
      return parsed;
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => {});
    return next;
  }

  close(): void {
    this.child?.kill('SIGKILL');
    this.child = null;
  }
}
