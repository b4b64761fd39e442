// Where the desktop app's core keeps its data and which workspace it watches, from argv and env.
import { isAbsolute, resolve } from 'node:path';

export interface ShellConfig {
  dataDir: string;
  workspace: string;
  port: number;
  host?: string;
}

/**
 * Reads `--data-dir`, `--workspace`, `--port` and `--host` (as `--flag value` or `--flag=value`) from
 * `argv`, then `SVC_EMU_DATA_DIR` / `SVC_EMU_WORKSPACE` from `env`. Unknown arguments (Electron's and
 * Chromium's own) are ignored. Defaults: workspace `cwd`, data dir `./.svc-emu`, port 0 (any free port).
 */
export function resolveShellConfig(argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string): ShellConfig {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const match = /^--(data-dir|workspace|port|host)(?:=(.*))?$/.exec(arg);
    if (!match) continue;
    const name = match[1] as string;
    const value = match[2] ?? argv[i + 1];
    if (match[2] === undefined) i++;
    if (value !== undefined && value !== '') flags.set(name, value);
  }
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(cwd, p));
  const port = Number(flags.get('port') ?? 0);
  const host = flags.get('host');
  return {
    dataDir: abs(flags.get('data-dir') ?? env.SVC_EMU_DATA_DIR ?? '.svc-emu'),
    workspace: abs(flags.get('workspace') ?? env.SVC_EMU_WORKSPACE ?? '.'),
    port: Number.isInteger(port) && port >= 0 && port <= 65535 ? port : 0,
    ...(host ? { host } : {}),
  };
}
