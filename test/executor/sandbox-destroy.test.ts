/**
 * A sandbox's destroy (executor/local-host.ts): it resolves once every process of the sandbox is gone — a timeout's or
 * an OOM's answer waits for that (docs/parity.md: killed hard) — and the emptied limit group and a spare's dir are
 * removed after, off that answer's path; the host's close() waits for those removals, so nothing is left behind. Real
 * runtimes, this host's limit backend (the group read where the kernel holds it) and bubblewrap.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLocalHost } from '../../executor';
import type { LocalSandboxHost } from '../../executor/local-host';
import { parseCgroupMounts, pickV2Mount, v1MountFor } from '../../executor/limits/mountinfo';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';

const hosts: LocalSandboxHost[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The memory (v1) or unified (v2) cgroup dir of a process in a sandbox group, or null when it is in none. */
function groupDirOf(pid: number): string | null {
  const mounts = parseCgroupMounts(readFileSync('/proc/self/mountinfo', 'utf8'));
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [, ctrls, path] = line.split(':');
    if (!path?.includes('/svc-emu/')) continue;
    if (ctrls === '') return join(pickV2Mount(mounts)!.mountPoint, path);
    if (ctrls!.split(',').includes('memory')) return join(v1MountFor(mounts, 'memory')!.mountPoint, path);
  }
  return null;
}
const listed = (dir: string) =>
  existsSync(dir) ? readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number) : [];

describe('a sandbox’s destroy', () => {
  it('resolves with its processes gone; its group and spare dir are removed after, and close() waits for that', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const workDir = await tempDir('svc-emu-sandbox-destroy-');
    dirs.push(workDir);
    const { host } = await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 1 });
    hosts.push(host);
    if (host.info.backend !== 'cgroup-v1' && host.info.backend !== 'cgroup-v2')
      return ctx.skip(`the limit backend here is ${host.info.backend}: no cgroup of ours to read a sandbox's processes from`);

    // A bundle whose top level leaves a child behind (a process of the sandbox besides its own), named so it can be found.
    const mark = `600.${process.pid}`;
    const code = `import subprocess\nsubprocess.Popen(["sleep", "${mark}"])\ndef handler(input):\n    return {"ok": True}\n`;
    const sha = createHash('sha256').update(`sandbox-destroy\0${process.pid}\0${code}`).digest('hex');
    await host.materialize(sha, 'main.py', { 'main.py': code });
    const sandbox = await host.create({
      id: `sbx-destroy-${process.pid}`,
      runtime: 'python',
      bundleSha: sha,
      entrypoint: 'main.py',
      memoryMb: 256,
      pidsMax: 64,
      tmpSizeMb: 64,
    });
    expect(sandbox.ready.t).toBe('ready');
    const child = await vi.waitFor(
      () => {
        const pid = readdirSync('/proc').find(
          (n) => /^\d+$/.test(n) && safe(() => readFileSync(`/proc/${n}/cmdline`, 'utf8')) === `sleep\0${mark}\0`,
        );
        if (!pid) throw new Error('the child has not started');
        return Number(pid);
      },
      { timeout: 10_000, interval: 20 },
    );
    const group = groupDirOf(child);
    expect(group, 'the sandbox’s group').toBeTruthy();
    const inGroup = listed(group!);
    expect(inGroup.length, 'bubblewrap, the runner and the child at least').toBeGreaterThan(2);

    await sandbox.destroy();
    // Every process of it is gone now (zombies are not listed), whether or not the group is removed yet.
    expect(listed(group!)).toEqual([]);
    for (const pid of inGroup)
      expect(
        safe(() => groupDirOf(pid)),
        `pid ${pid}`,
      ).toBeNull();

    await host.close();
    hosts.splice(hosts.indexOf(host), 1);
    expect(existsSync(group!), 'the group, removed by the time close() resolves').toBe(false);
    const spareRoot = join(workDir, 'spare');
    const left = existsSync(spareRoot) ? readdirSync(spareRoot).filter((n) => n.startsWith('spare-')) : [];
    expect(left, 'spare dirs, the claimed one’s included').toEqual([]);
  });
});

/** `fn()`, or null when it throws (a process gone meanwhile). */
function safe<T>(fn: () => T): T | null {
  try {
    return fn();
  } catch {
    return null;
  }
}
