// Where the desktop app's core keeps its data and which workspace it watches, from argv and env.
import { isAbsolute, resolve } from 'node:path';

export interface ShellConfig {
  dataDir: string;
  workspace: string;
  port: number;
  host?: string;
  /** As for `svc-emu serve`; passed to the core as given (it refuses bad values with a message). */
  egressProfile?: string;
  egressAllow?: string[];
  asyncWorkers?: number;
  callbackRetryScale?: number;
  /** As for `svc-emu serve`: the server's egress mode and replay speed (the core refuses bad values with a message). */
  egressMode?: string;
  replaySpeed?: number;
  /** `local` or `lima` (checked by the app; absent: Lima on macOS when limactl is installed). */
  executor?: string;
  /** As for `svc-emu serve`: the terminal lines of `npm start` (server/terminal-lines.ts); checked at start. */
  logLevel?: string;
  logFormat?: string;
}

/**
 * Reads `--data-dir`, `--workspace`, `--port`, `--host` and the async/egress flags of `svc-emu serve`
 * (`--egress-profile`, `--egress-allow`…, `--egress-mode`, `--replay-speed`, `--async-workers`, `--callback-retry-scale`, `--executor`, `--log-level`, `--log-format`), as `--flag value` or `--flag=value`, from
 * `argv`, then `SVC_EMU_DATA_DIR` / `SVC_EMU_WORKSPACE` from `env`. Unknown arguments (Electron's and
 * Chromium's own) are ignored. Defaults: workspace `cwd`, data dir `./.svc-emu`, port 0 (any free port);
 * an installed app, started from the desktop with `/` as its cwd, passes its own `defaults`.
 */
export function resolveShellConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  defaults: { dataDir: string; workspace: string } = { dataDir: '.svc-emu', workspace: '.' },
): ShellConfig {
  const flags = new Map<string, string>();
  const allow: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const match =
      /^--(data-dir|workspace|port|host|egress-profile|egress-allow|egress-mode|replay-speed|async-workers|callback-retry-scale|executor|log-level|log-format)(?:=(.*))?$/.exec(
        arg,
      );
    if (!match) continue;
    const name = match[1] as string;
    const value = match[2] ?? argv[i + 1];
    if (match[2] === undefined) i++;
    if (value === undefined || value === '') continue;
    if (name === 'egress-allow') allow.push(value);
    else flags.set(name, value);
  }
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(cwd, p));
  const port = Number(flags.get('port') ?? 0);
  const host = flags.get('host');
  return {
    dataDir: abs(flags.get('data-dir') ?? env.SVC_EMU_DATA_DIR ?? defaults.dataDir),
    workspace: abs(flags.get('workspace') ?? env.SVC_EMU_WORKSPACE ?? defaults.workspace),
    port: Number.isInteger(port) && port >= 0 && port <= 65535 ? port : 0,
    ...(host ? { host } : {}),
    ...(flags.has('egress-profile') ? { egressProfile: flags.get('egress-profile') } : {}),
    ...(allow.length ? { egressAllow: allow } : {}),
    ...(flags.has('egress-mode') ? { egressMode: flags.get('egress-mode') } : {}),
    ...(flags.has('replay-speed') ? { replaySpeed: Number(flags.get('replay-speed')) } : {}),
    ...(flags.has('async-workers') ? { asyncWorkers: Number(flags.get('async-workers')) } : {}),
    ...(flags.has('callback-retry-scale') ? { callbackRetryScale: Number(flags.get('callback-retry-scale')) } : {}),
    ...(flags.has('executor') ? { executor: flags.get('executor') } : {}),
    ...(flags.has('log-level') ? { logLevel: flags.get('log-level') } : {}),
    ...(flags.has('log-format') ? { logFormat: flags.get('log-format') } : {}),
  };
}
