/**
 * A spare runner's life outside a claim (executor/local-host.ts, "spares"): one that dies while idle leaves the
 * pool and another starts (it used to keep its place of the budget, dead, so no spare was ever ready again),
 * and two hosts of one process never touch each other's spares (their limit groups used to share names: the
 * second host's spare emptied the first's group, its close killed the first's spare). Real runtimes, this
 * host's limit backend and bubblewrap; each step waits on the host's onSpare events.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalHost } from '../../executor';
import type { LocalSandboxHost, SpareEvent } from '../../executor/local-host';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';

/** The onSpare events of one host, and a way to wait for the next that matches (failing, saying what, after 20 s). */
function spareEvents() {
  const seen: SpareEvent[] = [];
  const waiting: { match: (e: SpareEvent) => boolean; resolve: (e: SpareEvent) => void }[] = [];
  return {
    seen,
    on: (e: SpareEvent) => {
      seen.push(e);
      for (const w of waiting.splice(0)) {
        if (w.match(e)) w.resolve(e);
        else waiting.push(w);
      }
    },
    /** The first event (already seen or still to come) that matches. */
    next(what: string, match: (e: SpareEvent) => boolean): Promise<SpareEvent> {
      const had = seen.find(match);
      if (had) return Promise.resolve(had);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no spare event: ${what} within 20 s (seen: ${JSON.stringify(seen)})`)), 20_000);
        waiting.push({
          match,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
  };
}

/** The processes of a spare (its runner, and bubblewrap or setpriv around it): their command line names its dir. */
function processesOf(spareId: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.includes(`/spare/${spareId}\0`) || cmdline.endsWith(`/spare/${spareId}`)) pids.push(Number(name));
  }
  return pids;
}

const hosts: LocalSandboxHost[] = [];
const dirs: string[] = [];
async function host(events: ReturnType<typeof spareEvents>): Promise<LocalSandboxHost> {
  const workDir = await tempDir('svc-emu-spare-life-');
  dirs.push(workDir);
  const built = await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 1, onSpare: events.on });
  hosts.push(built.host);
  return built.host;
}
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const started = (runtime: string, not?: string) => (e: SpareEvent) => e.type === 'started' && e.runtime === runtime && e.id !== not;

describe('a spare outside a claim', () => {
  it('none starts before sparesAfter settles (the core passes its listening); then they do', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const events = spareEvents();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const workDir = await tempDir('svc-emu-spare-life-');
    dirs.push(workDir);
    const built = await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 1, onSpare: events.on, sparesAfter: gate });
    hosts.push(built.host);
    // A refill lists its spares at once (as starting): none listed means none was started.
    expect(built.host.spareStats().spares).toEqual([]);
    open();
    await events.next('a bun spare started', started('bun'));
    await events.next('a python spare started', started('python'));
  });

  it.for(['bun', 'python'] as const)('%s: one killed while idle leaves the pool and a new one is ready', async (runtime, ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const events = spareEvents();
    const h = await host(events);
    const first = await events.next(`a ${runtime} spare started`, started(runtime));
    const pids = processesOf(first.id);
    expect(pids.length, `the processes of ${first.id}`).toBeGreaterThan(0);
    for (const pid of pids) process.kill(pid, 'SIGKILL');

    const died = await events.next(`${first.id} died`, (e) => e.type === 'died' && e.id === first.id);
    expect(died).toMatchObject({ type: 'died', runtime, replaced: true });
    const next = await events.next(`a new ${runtime} spare started`, started(runtime, first.id));
    expect(next.id).not.toBe(first.id);
    expect(h.spareStats().ready[runtime]).toBe(1);
    expect(processesOf(next.id).length).toBeGreaterThan(0);
  });

  it('two hosts of one process: the second starting and closing leaves the first one’s spares alone', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const a = spareEvents();
    const first = await host(a);
    const mine = await Promise.all((['bun', 'python'] as const).map((rt) => a.next(`a ${rt} spare of the first host`, started(rt))));
    const b = spareEvents();
    const second = await host(b);
    const theirs = await Promise.all((['bun', 'python'] as const).map((rt) => b.next(`a ${rt} spare of the second host`, started(rt))));
    for (const e of theirs) expect(mine.map((m) => m.id)).not.toContain(e.id);
    await second.close(); // destroys its spares' limit groups, and whatever is in them

    for (const e of mine) expect(processesOf(e.id).length, `${e.id} still running`).toBeGreaterThan(0);
    expect(a.seen.filter((e) => e.type === 'died')).toEqual([]);
    expect(first.spareStats().ready).toEqual({ bun: 1, python: 1 });
  });
});

describe('a claimed spare’s replacement', () => {
  /** A hello bundle of its own digest, materialised, and the spec of a sandbox for it. */
  async function helloSpec(h: LocalSandboxHost, n: number) {
    const code = `export default () => ({ n: ${n} });\n`;
    const sha = createHash('sha256').update(`replacement\0${process.pid}\0${n}\0${code}`).digest('hex');
    await h.materialize(sha, 'index.ts', { 'index.ts': code });
    return {
      id: `sbx-replacement-${process.pid}-${n}`,
      runtime: 'bun' as const,
      bundleSha: sha,
      entrypoint: 'index.ts',
      memoryMb: 128,
      pidsMax: 256,
      tmpSizeMb: 64,
    };
  }

  it('takes the claimed one’s place at once (listed as starting), and a cold start meanwhile gets it, not a fresh runner', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const events = spareEvents();
    const h = await host(events);
    const first = await events.next('a bun spare started', started('bun'));
    const a = await h.create(await helloSpec(h, 1));
    try {
      expect(h.spareStats().claimed).toBe(1);
      // Its place is taken, before any new runner is up: the listing says one is starting.
      const bun = (h.spareStats().spares ?? []).filter((s) => s.runtime === 'bun' && s.profile === 'plain');
      expect(bun).toEqual([expect.objectContaining({ state: 'starting' })]);
      expect(processesOf(first.id).length).toBeGreaterThan(0); // the claimed one: now the sandbox
      // Wanted at once: the cold start starts it and is served by it (a claim, not a fresh start).
      const b = await h.create(await helloSpec(h, 2));
      try {
        expect(b.ready.t).toBe('ready');
        expect(h.spareStats().claimed).toBe(2);
      } finally {
        await b.destroy();
      }
    } finally {
      await a.destroy();
    }
  });
});
