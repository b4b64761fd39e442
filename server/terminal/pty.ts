/**
 * The seam between terminal sessions and a pseudo-terminal: what a session needs of a pty, and the real
 * one (`@lydell/node-pty`, a prebuilt N-API addon). The addon is loaded on the first terminal, so a core
 * that never opens one (or a host without a prebuilt binary) never loads it.
 */
export interface PtySpawnOptions {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

export interface PtyExit {
  exitCode: number;
  /** The signal number that ended the process (0 or absent: none). */
  signal?: number;
}

export interface PtyProcess {
  readonly pid: number;
  /** Raw bytes as the pty gave them (a multi-byte character may be split across two calls). */
  onData(listener: (data: Uint8Array) => void): void;
  onExit(listener: (exit: PtyExit) => void): void;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  kill(signal?: NodeJS.Signals): void;
}

export type PtySpawn = (opts: PtySpawnOptions) => Promise<PtyProcess>;

type NodePty = typeof import('@lydell/node-pty');

/** Spawns `file` on a real pty (TERM xterm-256color), reading bytes, not strings. */
export const nodePtySpawn: PtySpawn = async (opts) => {
  const mod = (await import('@lydell/node-pty')) as NodePty & { default?: NodePty };
  const spawn = mod.spawn ?? mod.default?.spawn;
  const pty = spawn(opts.file, opts.args, {
    name: 'xterm-256color',
    cols: opts.cols,
    rows: opts.rows,
    cwd: opts.cwd,
    env: opts.env,
    // Bytes: decoding is the session's job (one streaming decoder, so split characters survive).
    encoding: null,
  });
  return {
    pid: pty.pid,
    onData: (listener) => {
      // With `encoding: null` node-pty hands out Buffers, whatever its typings say.
      pty.onData((data: string | Uint8Array) => listener(typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
    },
    onExit: (listener) => {
      pty.onExit((e) => listener({ exitCode: e.exitCode, signal: e.signal }));
    },
    write: (data) => pty.write(data),
    resize: (cols, rows) => pty.resize(cols, rows),
    kill: (signal) => pty.kill(signal),
  };
};
