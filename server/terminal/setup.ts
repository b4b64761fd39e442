import type { Logger } from '../logger';
import { nodePtySpawn, type PtySpawn } from './pty';
import { TerminalSessions, type TerminalAccess, type TerminalSessionsOptions } from './sessions';
import { TerminalTargets } from './targets';

/**
 * Whether this core offers terminals, and the sessions if it does. Undecided (`enabled` undefined):
 * on when it listens on loopback only, off on any other address, where a shell over HTTP would be
 * remote code execution for anyone who can reach the port and holds the admin token.
 */
export function terminalAccess(opts: {
  enabled: boolean | undefined;
  host: string;
  workspace: string | null;
  dataDir: string;
  url: () => string;
  vmName: string;
  /** The core's `limactl` option (undefined: look on PATH). */
  limactl?: string | null;
  logger?: Logger;
  spawn?: PtySpawn;
  onChange?: TerminalSessionsOptions['onChange'];
}): TerminalAccess {
  const enabled = opts.enabled ?? isLoopbackHost(opts.host);
  if (!enabled) {
    return {
      sessions: null,
      disabled:
        opts.enabled === false
          ? 'terminals are disabled on this emulator (it was started with --no-terminal); restart it without that flag to use them'
          : `terminals are off because the emulator listens on ${opts.host}, beyond this machine (a shell over HTTP there is remote code execution for anyone with the admin token); restart it with --terminal to allow them anyway`,
    };
  }
  const targets = new TerminalTargets({
    workspace: opts.workspace,
    dataDir: opts.dataDir,
    url: opts.url,
    vmName: opts.vmName,
    limactl: opts.limactl,
  });
  return {
    sessions: new TerminalSessions({ spawn: opts.spawn ?? nodePtySpawn, targets, logger: opts.logger, onChange: opts.onChange }),
    disabled: null,
  };
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare);
}
