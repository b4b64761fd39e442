import { main, type CliIO } from '../../server/cli/main';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `svc-emu ARGV` in-process (server/cli/main.ts) from `cwd`, its output captured. */
export async function runCli(argv: string[], cwd = '/'): Promise<CliRun> {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = {
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    cwd,
    untilSignal: () => new Promise(() => {}),
  };
  const code = await main(argv, io);
  return { code, ...out };
}

/** A command that runs until told to stop (`logs --follow`, `serve`): its output so far, and `stop()` (a SIGINT). */
export function startCli(argv: string[], cwd = '/') {
  const out = { stdout: '', stderr: '' };
  let signal!: (s: string) => void;
  const stopped = new Promise<string>((res) => (signal = res));
  const io: CliIO = {
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    cwd,
    untilSignal: () => stopped,
  };
  const done = main(argv, io);
  return {
    out,
    done,
    async stop(): Promise<CliRun> {
      signal('SIGINT');
      const code = await done;
      return { code, ...out };
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false, or throws after `ms` with `what`. */
export async function until<T>(check: () => Promise<T | undefined | false> | T | undefined | false, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
