import { readFileSync } from 'node:fs';
import type { CgroupFs, ExecFn, KillFn } from './cgroupfs';
import { createNodeCgroupFs, nodeKill } from './cgroupfs';
import { CgroupV1Backend } from './cgroup-v1';
import { CPU_NOT_DELEGATED, CgroupV2Backend, planCgroupV2 } from './cgroup-v2';
import { nodeExec } from './common';
import type { CgroupMount } from './mountinfo';
import { cgroupDir, parseCgroupMounts, parseProcSelfCgroup, pickV2Mount, v1MountFor } from './mountinfo';
import { NO_BACKEND, NoLimitBackend } from './none';
import { SystemdScopeBackend } from './systemd-scope';
import type { LimitBackend, LimitBackendName } from './types';

/**
 * Chooses the limit backend for this host, once at start; doctor prints the result.
 *
 *   cgroup-v2      root, or our own cgroup is delegated to us, with memory + pids (+ cpu, else degraded)
 *   cgroup-v1      root, with memory, cpu, cpuacct and pids hierarchies (separate or combined mounts)
 *   systemd-scope  a systemd user manager we can reach (`systemctl --user is-system-running`, or
 *                  $XDG_RUNTIME_DIR/systemd/private exists) and a cgroup2 mount to read usage from
 *   none           timeout only; parity degraded
 *
 * Every input is injectable so the decision table is unit-tested with fixture mountinfo texts and a fake
 * cgroupfs tree under `fsRoot`. `SVC_EMU_LIMITS=<name>` (or `force`) pins one backend; if it cannot be
 * used, the result is `none` with the reason (never silently another backend).
 */

export interface DetectOptions {
  platform?: NodeJS.Platform;
  uid?: number;
  mountinfoText?: string;
  selfCgroupText?: string;
  /** Prefix for every cgroupfs (and XDG_RUNTIME_DIR) path: a fixture tree in tests, '' in production. */
  fsRoot?: string;
  env?: Record<string, string | undefined>;
  exec?: ExecFn;
  fs?: CgroupFs;
  kill?: KillFn;
  force?: LimitBackendName;
}

export interface DetectResult {
  backend: LimitBackend;
  /** One line for doctor: what was chosen and why (or why parity is degraded). */
  reason: string;
  /** Each candidate, in order, with its verdict. */
  checked: string[];
}

type Attempt = { backend: LimitBackend; reason: string } | { skip: string };

const REACHABLE_STATES = new Set(['running', 'degraded', 'starting', 'initializing', 'maintenance', 'stopping']);
const ORDER: Exclude<LimitBackendName, 'none'>[] = ['cgroup-v2', 'cgroup-v1', 'systemd-scope'];

interface Ctx {
  uid: number;
  mounts: CgroupMount[];
  selfV2: string | null;
  fsRoot: string;
  env: Record<string, string | undefined>;
  exec: ExecFn;
  fs: CgroupFs;
  kill: KillFn;
}

export async function detectLimitBackend(opts: DetectOptions = {}): Promise<DetectResult> {
  const platform = opts.platform ?? process.platform;
  const env = opts.env ?? process.env;
  const kill = opts.kill ?? nodeKill;
  const checked: string[] = [];
  const forced = opts.force ?? (env.SVC_EMU_LIMITS as LimitBackendName | undefined);

  if (platform !== 'linux') {
    const why =
      platform === 'darwin'
        ? 'macOS has no cgroups: limits are enforced only inside the Lima VM executor; here only the timeout is enforced'
        : `${platform} has no cgroups: only the timeout is enforced`;
    checked.push(`platform ${platform}: no cgroup backends`);
    return { backend: new NoLimitBackend(why, kill), reason: `none — ${why}`, checked };
  }

  const ctx: Ctx = {
    uid: opts.uid ?? process.getuid?.() ?? -1,
    mounts: parseCgroupMounts(opts.mountinfoText ?? safeRead('/proc/self/mountinfo')),
    selfV2: parseProcSelfCgroup(opts.selfCgroupText ?? safeRead('/proc/self/cgroup')).v2,
    fsRoot: opts.fsRoot ?? '',
    env,
    exec: opts.exec ?? nodeExec,
    fs: opts.fs ?? createNodeCgroupFs(),
    kill,
  };

  if (forced === 'none') {
    const why = `${NO_BACKEND} (${opts.force ? 'pinned by the caller' : 'SVC_EMU_LIMITS=none'})`;
    checked.push('forced: none');
    return { backend: new NoLimitBackend(why, kill), reason: `none — ${why}`, checked };
  }
  if (forced !== undefined && !ORDER.includes(forced)) {
    checked.push(`SVC_EMU_LIMITS=${String(forced)} is not a backend name (ignored)`);
  }
  const order = forced && ORDER.includes(forced) ? [forced] : ORDER;

  for (const name of order) {
    let attempt: Attempt;
    try {
      attempt = name === 'cgroup-v2' ? await tryV2(ctx) : name === 'cgroup-v1' ? await tryV1(ctx) : await trySystemd(ctx);
    } catch (err) {
      attempt = { skip: (err as Error).message };
    }
    if ('backend' in attempt) {
      checked.push(`${name}: chosen — ${attempt.reason}`);
      const b = attempt.backend;
      const reason = b.degraded ? `${name} (parity degraded: ${b.degraded}) — ${attempt.reason}` : `${name} — ${attempt.reason}`;
      return { backend: b, reason, checked };
    }
    checked.push(`${name}: not usable — ${attempt.skip}`);
  }
  const why = forced ? `${NO_BACKEND} (SVC_EMU_LIMITS=${forced} could not be used)` : NO_BACKEND;
  return { backend: new NoLimitBackend(why, kill), reason: `none — ${why}`, checked };
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

async function tryV2(c: Ctx): Promise<Attempt> {
  const m = pickV2Mount(c.mounts);
  if (!m) return { skip: 'no cgroup2 mount' };
  let anchor: string | null;
  let mode: 'root' | 'delegated';
  if (c.uid === 0) {
    anchor = cgroupDir(m, m.root, c.fsRoot);
    mode = 'root';
  } else {
    if (!c.selfV2) return { skip: 'our process has no cgroup v2 path in /proc/self/cgroup' };
    anchor = cgroupDir(m, c.selfV2, c.fsRoot);
    mode = 'delegated';
    if (!anchor) return { skip: `our cgroup ${c.selfV2} is outside the cgroup2 mount at ${m.mountPoint}` };
    const unit = c.selfV2.split('/').pop() ?? '';
    if (/\.(scope|service)$/.test(unit) && (await userManagerReachable(c))) {
      const r = await c.exec('systemctl', ['--user', 'show', '-p', 'Delegate', '--value', unit], { timeoutMs: 3000 });
      if (r.code === 0 && r.stdout.trim() !== 'yes') {
        return {
          skip: `our cgroup belongs to systemd unit ${unit}, which is not delegated (Delegate=no): start the emulator with \`systemd-run --user -p Delegate=yes …\` to manage cgroups directly`,
        };
      }
    }
  }
  if (!anchor) return { skip: 'cannot map the cgroup2 root to a directory' };
  const planned = await planCgroupV2(c.fs, anchor, mode);
  if ('reason' in planned) {
    const hybrid = c.mounts.some((x) => x.version === 1 && x.controllers.includes('memory'));
    return { skip: hybrid ? `${planned.reason} — controllers are bound to cgroup v1 (hybrid host)` : planned.reason };
  }
  const backend = await CgroupV2Backend.open({ plan: planned.plan, fs: c.fs, kill: c.kill });
  return { backend, reason: `${mode === 'root' ? 'root' : 'delegated subtree'}: groups under ${backend.base}` };
}

async function tryV1(c: Ctx): Promise<Attempt> {
  const needed = ['memory', 'cpu', 'cpuacct', 'pids'];
  const missing = needed.filter((h) => !v1MountFor(c.mounts, h));
  if (missing.length === needed.length) return { skip: 'no cgroup v1 hierarchies mounted' };
  if (missing.length) return { skip: `no cgroup v1 hierarchy for ${missing.join(', ')}` };
  if (c.uid !== 0) return { skip: `cgroup v1 needs root (uid ${c.uid})` };
  const backend = await CgroupV1Backend.open({ mounts: c.mounts, fsRoot: c.fsRoot, fs: c.fs, kill: c.kill });
  const where = [...new Set(Object.values(backend.parents))].join(', ');
  return { backend, reason: `root: groups under ${where}` };
}

async function userManagerReachable(c: Ctx): Promise<boolean> {
  const xdg = c.env.XDG_RUNTIME_DIR;
  if (xdg && (await c.fs.exists(`${c.fsRoot}${xdg}/systemd/private`))) return true;
  const r = await c.exec('systemctl', ['--user', 'is-system-running'], { timeoutMs: 3000 });
  return REACHABLE_STATES.has(r.stdout.trim());
}

async function trySystemd(c: Ctx): Promise<Attempt> {
  const m = pickV2Mount(c.mounts);
  if (!m) return { skip: 'no cgroup2 mount to read scope usage from' };
  if (!(await userManagerReachable(c))) {
    return { skip: 'no systemd user manager reachable (`systemctl --user is-system-running` failed, no $XDG_RUNTIME_DIR/systemd/private)' };
  }
  const run = await c.exec('systemd-run', ['--version'], { timeoutMs: 3000 });
  if (run.code !== 0) return { skip: `systemd-run not usable: ${(run.error ?? run.stderr).trim()}` };
  // What the user manager may hand out: its own cgroup's controllers.
  const managerPath = /^(.*\/user@\d+\.service)(\/|$)/.exec(c.selfV2 ?? '')?.[1] ?? `/user.slice/user-${c.uid}.slice/user@${c.uid}.service`;
  const managerDir = cgroupDir(m, managerPath, c.fsRoot);
  const text = managerDir ? await c.fs.read(`${managerDir}/cgroup.controllers`) : null;
  const notes: string[] = [];
  const problems: string[] = [];
  if (text === null) {
    notes.push(`could not read ${managerPath}/cgroup.controllers: delegation unknown`);
  } else {
    const ctrls = new Set(text.split(/\s+/).filter(Boolean));
    if (!ctrls.has('memory'))
      problems.push('the memory controller is not delegated to the systemd user manager: MemoryMax is not enforced');
    if (!ctrls.has('pids')) problems.push('the pids controller is not delegated: TasksMax is not enforced');
    if (!ctrls.has('cpu')) problems.push(CPU_NOT_DELEGATED.replace(/^cgroup v2: /, ''));
  }
  const backend = new SystemdScopeBackend({
    exec: c.exec,
    fs: c.fs,
    kill: c.kill,
    cgroupMount: c.fsRoot + m.mountPoint,
    degraded: problems.length ? problems.join('; ') : null,
    notes,
  });
  return { backend, reason: 'unprivileged: one transient scope per sandbox (systemd-run --user --scope)' };
}
