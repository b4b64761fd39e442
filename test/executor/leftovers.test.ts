/**
 * What a core killed with SIGKILL leaves (issue 14, "Clean up everything"): its limit groups (empty once
 * its runners died with it) and temp files — an atomic write's `.db.json.<pid>.<rand>.tmp`, an inbox
 * file's, a half-made bundle dir, a spare dir. The next core on that data dir sweeps them at start; a core
 * that is already running sweeps them on its housekeeping timer (period injected), without a restart.
 * Real cores in their own processes (test/helpers/core-process.mts), real cgroups.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, rm, rmdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { request, startTestCore, tempDir, type TestCore } from '../helpers/core';

const SCRIPT = resolve(__dirname, '../helpers/core-process.mts');
const ROOT = resolve(__dirname, '../..');
const CG = '/sys/fs/cgroup';

const children: ChildProcess[] = [];
const dataDirs: string[] = [];
const cores: TestCore[] = [];
const deadPids: number[] = [];

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const c of cores) await c.stop().catch(() => {});
  // a failing run must not leave the killed cores' groups behind
  for (const pid of deadPids) for (const dir of groupDirsOf(pid)) await rmdir(dir).catch(() => {});
  for (const d of dataDirs) await rm(d, { recursive: true, force: true });
});

/** Group directories (every v1 hierarchy, or the v2 tree) named after core `pid` (`c<pid>-…`). */
function groupDirsOf(pid: number): string[] {
  const parents = existsSync(`${CG}/svc-emu`) ? [`${CG}/svc-emu`] : [];
  for (const h of existsSync(CG) ? readdirSync(CG) : []) if (existsSync(`${CG}/${h}/svc-emu`)) parents.push(`${CG}/${h}/svc-emu`);
  return parents.flatMap((p) =>
    readdirSync(p)
      .filter((n) => n.startsWith(`c${pid}-`))
      .map((n) => `${p}/${n}`),
  );
}

/** A core in its own process on `dataDir` that has run one Python invocation (so it has a warm sandbox, spares and their groups). */
async function coreWithSandboxes(dataDir: string): Promise<{ pid: number; proc: ChildProcess; backend: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dataDir, '--project-root', ROOT], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const line = await Promise.race([
    new Promise<string>((res) => createInterface({ input: proc.stdout }).once('line', res)),
    once(proc, 'exit').then(() => Promise.reject(new Error(`the core exited before it listened:\n${stderr}`))),
  ]);
  const info = JSON.parse(line) as { url: string; key: string; admin: string; pid: number };
  const call = (m: string, p: string, b?: unknown, key = info.key) => request(info.url, m, p, b, { key });
  const backend = (await call('GET', '/_emu/executor', undefined, info.admin)).json.backend as string;
  expect((await call('POST', '/v1/snippets', { name: 'left', runtime: 'python' })).status).toBe(201);
  expect((await call('POST', '/v1/snippets/left/versions', { code: 'def handler(input):\n    return {"ok": True}\n' })).status).toBe(201);
  const r = await call('POST', '/v1/invoke/left', {});
  expect(r.status, r.text).toBe(200);
  return { pid: info.pid, proc, backend };
}

/** SIGKILLs the core and waits for it to be gone; its runners die with it (die-with-parent), its groups stay. */
async function killHard(c: { pid: number; proc: ChildProcess }): Promise<void> {
  const exited = once(c.proc, 'exit');
  c.proc.kill('SIGKILL');
  await exited;
  deadPids.push(c.pid);
}

/** The temp entries a core of `pid` would leave in a data dir if killed in the middle of writing them. */
async function plantLeftovers(dataDir: string, pid: number): Promise<string[]> {
  const sha = 'ab'.repeat(32);
  const paths = [
    join(dataDir, `.db.json.${pid}.0a1b2c3d.tmp`),
    join(dataDir, 'inbox', `.hooks.jsonl.${pid}.deadbeef.tmp`),
    join(dataDir, 'sandboxes', 'bundles', `.${sha}.${pid}.01234567`),
    join(dataDir, 'sandboxes', 'spare', `spare-python-${pid}-7`),
  ];
  await mkdir(join(dataDir, 'inbox'), { recursive: true });
  await mkdir(join(dataDir, 'sandboxes', 'bundles'), { recursive: true });
  await writeFile(paths[0]!, '{"half":');
  await writeFile(paths[1]!, '{}');
  await mkdir(join(paths[2]!, 'sub'), { recursive: true });
  await writeFile(join(paths[2]!, 'sub', 'main.py'), 'x');
  await mkdir(paths[3]!, { recursive: true });
  return paths;
}

describe('leftovers of a core killed with SIGKILL', () => {
  it('the next core on the data dir sweeps its groups and temp files at start', async (ctx) => {
    if (process.getuid?.() !== 0) ctx.skip('needs root for real cgroups');
    const dataDir = await tempDir('svc-emu-leftovers-');
    dataDirs.push(dataDir);
    const first = await coreWithSandboxes(dataDir);
    if (first.backend !== 'cgroup-v1' && first.backend !== 'cgroup-v2') ctx.skip(`limit backend is ${first.backend}: no cgroups to leave`);
    await killHard(first);
    expect(groupDirsOf(first.pid).length, 'precondition: the killed core left its groups').toBeGreaterThanOrEqual(2);
    const planted = await plantLeftovers(dataDir, first.pid);
    // One of the next core's own, fresh: in use, never swept.
    const mine = join(dataDir, 'inbox', `.hooks.jsonl.${process.pid}.feedface.tmp`);
    await writeFile(mine, '{}');

    const next = await startTestCore({ dataDir });
    cores.push(next);
    expect(groupDirsOf(first.pid), 'groups of the killed core').toEqual([]);
    expect(
      planted.filter((p) => existsSync(p)),
      'temp files of the killed core',
    ).toEqual([]);
    expect(existsSync(mine), 'a fresh temp file of a live process stays').toBe(true);
    expect((await next.call('POST', '/v1/invoke/left', {})).status, 'the next core runs the snippet').toBe(200);
  }, 90_000);

  it('a running core sweeps them on its timer, without a restart (injected period; waits on the swept event)', async (ctx) => {
    if (process.getuid?.() !== 0) ctx.skip('needs root for real cgroups');
    const running = await startTestCore({ config: { housekeepingMs: 50 } });
    cores.push(running);
    const otherDir = await tempDir('svc-emu-leftovers-other-');
    dataDirs.push(otherDir);
    const other = await coreWithSandboxes(otherDir);
    if (other.backend !== 'cgroup-v1' && other.backend !== 'cgroup-v2') ctx.skip(`limit backend is ${other.backend}: no cgroups to leave`);
    await killHard(other);
    const planted = await plantLeftovers(running.dataDir, other.pid);
    // A group is swept only once its core is dead: it is now. Two rounds: the second began after the plant.
    expect(groupDirsOf(other.pid).length + planted.filter((p) => existsSync(p)).length).toBeGreaterThan(0);
    for (let i = 0; i < 2; i++) await once(running.emu.housekeeping, 'swept');
    expect(groupDirsOf(other.pid), 'groups of the killed core').toEqual([]);
    expect(
      planted.filter((p) => existsSync(p)),
      'temp files left in the running core’s data dir',
    ).toEqual([]);
    expect(
      running.logs.some((l) => l.includes('housekeeping removed leftovers')),
      'the sweep is logged',
    ).toBe(true);
  }, 90_000);
});
