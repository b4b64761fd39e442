/**
 * createNodeCgroupFs (executor/limits/cgroupfs.ts): a group file read once stays open and is read again
 * with a pread at offset 0, so a sample does not open and close nine files. What must hold: every read
 * sees the kernel's current value, nothing stays open once the group is removed (and the removal is not
 * blocked), a group removed behind its back reads as absent, a plain directory standing in for cgroupfs
 * is read afresh each time, and no descriptor reaches a spawned process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  rmdirSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNodeCgroupFs } from '../../executor/limits/cgroupfs';

const MEMORY = '/sys/fs/cgroup/memory';
const CGROUP_V1_MAGIC = 0x27e0eb;
const root = typeof process.getuid === 'function' && process.getuid() === 0;

/** Why a cgroup v1 memory hierarchy cannot be used here, or null. */
function noV1Memory(): string | null {
  if (!root) return 'not root';
  try {
    if (statfsSync(MEMORY).type !== CGROUP_V1_MAGIC) return `${MEMORY} is not a cgroup v1 hierarchy`;
  } catch {
    return `no ${MEMORY}`;
  }
  return null;
}

/** This process's open descriptors that point into `dir`. */
function fdsInto(dir: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(`${dir}/`)) out.push(target);
    } catch {
      /* closed meanwhile (the readdir's own descriptor) */
    }
  }
  return out;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function newGroup(): string {
  const dir = join(MEMORY, 'svc-emu', `c${process.pid}-fdcache-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(dir, { recursive: true });
  cleanups.push(() => {
    if (existsSync(dir)) rmdirSync(dir);
  });
  return dir;
}

describe('createNodeCgroupFs on a real cgroup v1 group', () => {
  it('keeps one descriptor per file and every read sees the current value', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    const dir = newGroup();
    const fs = createNodeCgroupFs();
    const file = `${dir}/memory.limit_in_bytes`;
    await fs.write(file, String(64 * 1024 * 1024));
    expect(Number(await fs.read(file))).toBe(64 * 1024 * 1024);
    await fs.write(file, String(32 * 1024 * 1024));
    expect(Number(await fs.read(file))).toBe(32 * 1024 * 1024); // read again through the kept descriptor
    expect(fdsInto(dir)).toEqual([file]);
    // An instant write (synchronous, its descriptor kept) lands like any other, every time.
    const peak = `${dir}/memory.max_usage_in_bytes`;
    for (let i = 0; i < 3; i++) {
      await fs.write(peak, '0');
      expect(Number(await fs.read(peak))).toBe(0);
    }
    expect(fdsInto(dir).sort()).toEqual([file, peak, peak].sort());
    expect(await fs.read(`${dir}/no-such-file`)).toBeNull();
  });

  it('a value the kernel refuses through a kept write descriptor is an error naming the file; the next write lands', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    let cpu: string;
    try {
      if (statfsSync('/sys/fs/cgroup/cpu').type !== CGROUP_V1_MAGIC) return ctx.skip('no cgroup v1 cpu hierarchy');
      cpu = join('/sys/fs/cgroup/cpu', 'svc-emu', `c${process.pid}-fdcache-${Math.random().toString(36).slice(2, 8)}`);
      mkdirSync(cpu, { recursive: true });
    } catch {
      return ctx.skip('no cgroup v1 cpu hierarchy');
    }
    cleanups.push(() => {
      if (existsSync(cpu)) rmdirSync(cpu);
    });
    const fs = createNodeCgroupFs();
    const quota = `${cpu}/cpu.cfs_quota_us`;
    await fs.write(quota, '50000');
    expect(fdsInto(cpu)).toEqual([quota]);
    await expect(fs.write(quota, 'not a number')).rejects.toThrow(/cpu\.cfs_quota_us/);
    await fs.write(quota, '20000');
    expect(Number(await fs.read(quota))).toBe(20000);
    await fs.rmdir(cpu);
    expect(fdsInto(cpu)).toEqual([]);
  });

  it('rmdir closes the group’s descriptors and removes it', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    const dir = newGroup();
    const fs = createNodeCgroupFs();
    await fs.read(`${dir}/memory.usage_in_bytes`);
    await fs.read(`${dir}/memory.stat`);
    expect(fdsInto(dir)).toHaveLength(2);
    await fs.rmdir(dir);
    expect(existsSync(dir)).toBe(false);
    expect(fdsInto(dir)).toEqual([]);
  });

  it('a group removed behind its back reads as absent, and a new group of the same name is read afresh', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    const dir = newGroup();
    const fs = createNodeCgroupFs();
    const file = `${dir}/memory.limit_in_bytes`;
    await fs.write(file, String(64 * 1024 * 1024));
    expect(Number(await fs.read(file))).toBe(64 * 1024 * 1024);
    rmdirSync(dir); // another owner's sweep, say
    expect(await fs.read(file)).toBeNull();
    expect(fdsInto(dir)).toEqual([]);
    mkdirSync(dir);
    await fs.write(file, String(48 * 1024 * 1024));
    expect(Number(await fs.read(file))).toBe(48 * 1024 * 1024);
  });

  it('cgroup.procs is read afresh: a process that left the group is not listed by the next read', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    const dir = newGroup();
    const fs = createNodeCgroupFs();
    const procs = `${dir}/cgroup.procs`;
    // A shell that enters the group, then waits for its stdin to close.
    const child = spawn('/bin/sh', ['-c', `echo $$ > ${procs}; echo in; read _`], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise((r) => child.once('exit', r));
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    expect(await fs.read(procs)).toBe(`${child.pid}\n`);
    child.stdin.end();
    await exited;
    // cgroup v1 hands a kept descriptor the same process list again for up to a second after its first read.
    expect(await fs.read(procs)).toBe('');
    expect(fdsInto(dir)).toEqual([]);
  });

  it('no kept descriptor reaches a spawned process (close-on-exec)', async (ctx) => {
    const why = noV1Memory();
    if (why) return ctx.skip(why);
    const dir = newGroup();
    const fs = createNodeCgroupFs();
    await fs.read(`${dir}/memory.usage_in_bytes`);
    expect(fdsInto(dir)).toHaveLength(1);
    const child = spawnSync('/bin/sh', ['-c', 'for f in /proc/self/fd/*; do readlink "$f" || true; done'], { encoding: 'utf8' });
    expect(child.status).toBe(0);
    expect(child.stdout.split('\n').filter((t) => t.startsWith(`${dir}/`))).toEqual([]);
  });
});

describe('createNodeCgroupFs on a plain directory', () => {
  it('keeps nothing open and reads a replaced file afresh', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-emu-fdcache-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const fs = createNodeCgroupFs();
    const file = join(dir, 'memory.usage_in_bytes');
    writeFileSync(file, '1\n');
    expect(await fs.read(file)).toBe('1\n');
    // A test's fake tree may replace a file by rename: a kept descriptor would go on reading the old one.
    writeFileSync(`${file}.new`, '2\n');
    renameSync(`${file}.new`, file);
    expect(await fs.read(file)).toBe('2\n');
    expect(fdsInto(dir)).toEqual([]);
    await fs.write(join(dir, 'memory.max_usage_in_bytes'), '0');
    expect(await fs.read(join(dir, 'memory.max_usage_in_bytes'))).toBe('0');
  });
});
