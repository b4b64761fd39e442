/**
 * A core in a child process (test/helpers/core-process.mts), for tests that kill it with SIGKILL or need
 * a second process on a data dir. Every child started here is SIGKILLed by `killAll` (call it in afterAll).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const SCRIPT = resolve(__dirname, 'core-process.mts');
const ROOT = resolve(__dirname, '../..');

export interface Child {
  proc: ChildProcess;
  url: string;
  key: string;
  admin: string;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
}

const children: ChildProcess[] = [];

/**
 * `args`: core-process.mts flags, e.g. ['--project-root', ROOT] to run snippets. `nodeFlags`: for node
 * itself, e.g. ['--max-old-space-size=64', '--expose-gc'].
 */
export async function spawnCore(dataDir: string, args: string[] = [], nodeFlags: string[] = []): Promise<Child> {
  const proc = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', SCRIPT, dataDir, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let err = '';
  proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, signal) => res({ code, signal })),
  );
  const line = await Promise.race([
    new Promise<string>((res) => createInterface({ input: proc.stdout }).once('line', res)),
    exited.then((e) => Promise.reject(new Error(`core process exited (${JSON.stringify(e)}) before it listened:\n${err}`))),
    new Promise<string>((_, rej) => setTimeout(() => rej(new Error(`core process did not start in 20 s:\n${err}`)), 20_000)),
  ]);
  const info = JSON.parse(line) as { url: string; key: string; admin: string; pid: number };
  return { proc, ...info, exited, stderr: () => err };
}

export function killAll(): void {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

export const PROJECT_ROOT_ARGS = ['--project-root', ROOT];
