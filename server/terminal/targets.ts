import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { ConflictError } from '../domain/errors';

/**
 * Where a terminal runs, and whether it can here: `workspace` (the user's shell in the workspace, with
 * the variables that point `svc-emu` at this core) or `vm` (`limactl shell <vm>`: the Lima VM snippets
 * run in on macOS).
 */
import type { TerminalTarget } from '../../contract/schemas/terminal';
export { TERMINAL_TARGETS, type TerminalTarget } from '../../contract/schemas/terminal';

export interface TargetAvailability {
  available: boolean;
  /** Why not (null when available). */
  reason: string | null;
}

/** What to start on the pty. */
export interface LaunchSpec {
  target: TerminalTarget;
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** The command as shown to a person (`/bin/bash`, `limactl shell svc-emu`). */
  shell: string;
}

export interface TerminalTargetsOptions {
  /** The watched workspace (null: the core has none, so shells start in the data dir). */
  workspace: string | null;
  dataDir: string;
  /** The core's URL (known once it listens). */
  url: () => string;
  /** The Lima VM's name (executor/lima/template.ts). */
  vmName: string;
  /** limactl: a path (the core's `limactl` option), null for none, or undefined to look on PATH. */
  limactl?: string | null;
  /** The core's environment (default: process.env). */
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** Is this an executable file? (default: the file system). */
  isExecutable?: (path: string) => boolean;
}

export const targetUnavailable = (target: TerminalTarget, reason: string) =>
  new ConflictError(`a ${target} terminal cannot be opened here: ${reason}`, 'terminal_target_unavailable', { target });

export class TerminalTargets {
  private readonly env: NodeJS.ProcessEnv;
  private readonly platform: NodeJS.Platform;
  private readonly isExecutable: (path: string) => boolean;

  constructor(private readonly opts: TerminalTargetsOptions) {
    this.env = opts.env ?? process.env;
    this.platform = opts.platform ?? process.platform;
    this.isExecutable = opts.isExecutable ?? executableFile;
  }

  availability(target: TerminalTarget): TargetAvailability {
    if (target === 'workspace')
      return this.shell()
        ? { available: true, reason: null }
        : { available: false, reason: 'no shell found ($SHELL, /bin/bash and /bin/sh are all missing)' };
    if (this.limactl()) return { available: true, reason: null };
    if (this.opts.limactl) return { available: false, reason: `the configured limactl, ${this.opts.limactl}, is not an executable file` };
    return {
      available: false,
      reason:
        this.platform === 'darwin'
          ? `limactl is not on PATH: install Lima (\`brew install lima\`), then create and start the VM on the Parity status page (or \`svc-emu lima create\` and \`svc-emu lima start\`)`
          : 'limactl is not on PATH, and not needed: limits are enforced on this host; the VM is only used on macOS',
    };
  }

  /** The launch of a terminal on `target`; 409 `terminal_target_unavailable` when it cannot be opened here. */
  launch(target: TerminalTarget): LaunchSpec {
    const cwd = this.opts.workspace ?? this.opts.dataDir;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.env)) if (v !== undefined) env[k] = v;
    Object.assign(env, {
      SVC_EMU_URL: this.opts.url(),
      SVC_EMU_DATA_DIR: this.opts.dataDir,
      TERM: 'xterm-256color',
      COLORTERM: 'truecolor',
    });
    if (target === 'workspace') {
      const shell = this.shell();
      if (!shell) throw targetUnavailable(target, this.availability(target).reason ?? 'no shell');
      // A shell on a tty is interactive by itself; no -l: the user's login profile is not re-run.
      return { target, file: shell, args: [], cwd, env, shell };
    }
    const limactl = this.limactl();
    if (!limactl) throw targetUnavailable(target, this.availability(target).reason ?? 'limactl is not on PATH');
    return { target, file: limactl, args: ['shell', this.opts.vmName], cwd, env, shell: `limactl shell ${this.opts.vmName}` };
  }

  /** `$SHELL` when it is an executable absolute path, else /bin/bash, else /bin/sh. */
  private shell(): string | null {
    const preferred = this.env.SHELL;
    const candidates = [...(preferred && isAbsolute(preferred) ? [preferred] : []), '/bin/bash', '/bin/sh'];
    return candidates.find((c) => this.isExecutable(c)) ?? null;
  }

  private limactl(): string | null {
    if (this.opts.limactl !== undefined) return this.opts.limactl && this.isExecutable(this.opts.limactl) ? this.opts.limactl : null;
    for (const dir of (this.env.PATH ?? '').split(':')) {
      if (dir && this.isExecutable(join(dir, 'limactl'))) return join(dir, 'limactl');
    }
    return null;
  }
}

function executableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
