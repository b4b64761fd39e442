/**
 * A workspace that cannot block the core (issue 14): FIFOs, sockets, devices, symlinks to /dev/zero, out of
 * the workspace or in a loop, oversized files, deep trees, huge folders and deeply nested snippet.json are
 * never read (or read only within their caps), and each is listed in /_emu/workspace with its reason.
 * The core runs in its own process: if a FIFO ever held its threadpool again, that core would stop (and this
 * test would fail on a timeout) while the test runner itself stays free.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { request, tempDir } from '../helpers/core';
import { killAll, PROJECT_ROOT_ARGS, spawnCore, type Child } from '../helpers/spawn-core';
import { FOLDER_LIMITS } from '../../server/workspace/folder';

/** Twice the libuv threadpool the child gets: enough FIFOs to have stalled every thread of it. */
const POOL = Number(process.env.UV_THREADPOOL_SIZE) || 4;
const FIFOS = POOL * 2;
const HELLO = 'export default async () => ({ ok: true });\n';

let ws: string;
let core: Child;
let sockServer: Server;
const devices: { made: boolean; why: string } = { made: false, why: '' };
const snippets = (...p: string[]) => join(ws, 'snippets', ...p);
const fifoPaths: string[] = [];

interface Skipped {
  path: string;
  code: string;
  reason: string;
}
interface Folder {
  snippet: string;
  state: string;
  error: { message: string; file?: string } | null;
  skipped: Skipped[];
  version: number | null;
}
interface View {
  folders: Folder[];
  skipped: Skipped[];
}

const workspace = async (): Promise<View> => {
  const r = await request(core.url, 'GET', '/_emu/workspace', undefined, { key: core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json as View;
};
const folderOf = async (name: string) => (await workspace()).folders.find((f) => f.snippet === name);
/** Waits for the loader to have reported `name` (the event), never for a fixed time. */
const settledFolder = (name: string, check: (f: Folder) => void = () => {}) =>
  vi.waitFor(
    async () => {
      const f = await folderOf(name);
      expect(f, `${name} in /_emu/workspace`).toBeDefined();
      check(f!);
      return f!;
    },
    { timeout: 15_000, interval: 25 },
  );
/** Loaded (or reloaded without a change): a version serves and no error stands. */
const serving = (f: Folder) => expect([f.state, f.error]).toEqual([expect.stringMatching(/^(loaded|unchanged)$/), null]);
const skippedOf = (f: Folder, path: string) => f.skipped.find((s) => s.path === path);

const mkfifo = (path: string) => {
  execFileSync('mkfifo', [path]);
  fifoPaths.push(path);
};

/** Bytes the core process has read through read(2) so far (files and sockets alike). */
async function rchar(): Promise<number | null> {
  const text = await readFile(`/proc/${core.pid}/io`, 'utf8').catch(() => null);
  const m = text ? /^rchar: (\d+)$/m.exec(text) : null;
  return m ? Number(m[1]) : null;
}

/** inotify watches the core holds (null where /proc cannot say). */
async function inotifyWatches(): Promise<number | null> {
  let found = false;
  let watches = 0;
  for (const fd of await readdir(`/proc/${core.pid}/fd`).catch(() => [] as string[])) {
    if (!(await readlink(`/proc/${core.pid}/fd/${fd}`).catch(() => '')).includes('inotify')) continue;
    found = true;
    watches += ((await readFile(`/proc/${core.pid}/fdinfo/${fd}`, 'utf8')).match(/^inotify /gm) ?? []).length;
  }
  return found ? watches : null;
}

/** /healthz answers, and a request that needs the threadpool (a version read from the blob store) too. */
async function coreAnswers(): Promise<{ healthzMs: number; threadpoolMs: number }> {
  let healthzMs = 0;
  for (let i = 0; i < 10; i++) {
    const t = performance.now();
    const r = await fetch(`${core.url}/healthz`, { signal: AbortSignal.timeout(5000) });
    expect(r.status).toBe(200);
    healthzMs = Math.max(healthzMs, performance.now() - t);
  }
  const t = performance.now();
  const reads = await Promise.all(
    Array.from({ length: POOL * 2 }, () =>
      fetch(`${core.url}/v1/snippets/plain/versions/1`, {
        headers: { authorization: `Bearer ${core.key}` },
        signal: AbortSignal.timeout(5000),
      }),
    ),
  );
  for (const r of reads) expect(r.status).toBe(200);
  return { healthzMs, threadpoolMs: performance.now() - t };
}

/** No process has the FIFO open for reading: a non-blocking open for writing fails with ENXIO. */
function nobodyReads(fifo: string): boolean {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENXIO') return true;
    throw err;
  }
}

beforeAll(async () => {
  ws = await tempDir('svc-emu-hz-');
  await mkdir(join(ws, 'lib'), { recursive: true });
  await writeFile(join(ws, 'lib', 'shared.ts'), 'export const shared = 42;\n');
  await mkdir(snippets('plain'), { recursive: true });
  await writeFile(snippets('plain', 'index.ts'), HELLO);

  // FIFOs named snippet.json, more of them than the threadpool has threads (the reviewer's four).
  for (let i = 0; i < FIFOS; i++) {
    await mkdir(snippets(`fifo-${i}`), { recursive: true });
    await writeFile(snippets(`fifo-${i}`, 'index.ts'), HELLO);
    mkfifo(snippets(`fifo-${i}`, 'snippet.json'));
  }

  // One folder with one of each: a FIFO source file, a socket, links to /dev/zero, out of the workspace,
  // a loop, a link to a directory, one inside the workspace (read), an oversized (sparse) file, a deep tree.
  await mkdir(snippets('mixed'), { recursive: true });
  await writeFile(snippets('mixed', 'index.ts'), "import { shared } from './shared.ts';\nexport default async () => ({ shared });\n");
  mkfifo(snippets('mixed', 'pipe.ts'));
  sockServer = createServer();
  await new Promise<void>((res) => sockServer.listen(snippets('mixed', 'sock'), res));
  await symlink('/dev/zero', snippets('mixed', 'zero.ts'));
  await symlink('/etc/hostname', snippets('mixed', 'outside.ts'));
  await symlink('loop-b.ts', snippets('mixed', 'loop-a.ts'));
  await symlink('loop-a.ts', snippets('mixed', 'loop-b.ts'));
  await symlink('.', snippets('mixed', 'self'));
  await symlink(join('..', '..', 'lib', 'shared.ts'), snippets('mixed', 'shared.ts'));
  await writeFile(snippets('mixed', 'huge.bin'), '');
  await truncate(snippets('mixed', 'huge.bin'), 64 * 1024 * 1024);
  let deep = snippets('mixed');
  for (let i = 0; i <= FOLDER_LIMITS.maxDepth; i++) deep = join(deep, `d${i}`);
  await mkdir(deep, { recursive: true });
  await writeFile(join(deep, 'leaf.ts'), 'export const leaf = 1;\n');
  try {
    if (process.getuid?.() !== 0) throw new Error('not root: mknod needs CAP_MKNOD');
    execFileSync('mknod', [snippets('mixed', 'null-dev'), 'c', '1', '3']);
    devices.made = true;
  } catch (err) {
    devices.why = String(err);
  }

  // snippet.json: 60 000 '[' (under its 64 KiB cap), and one over the cap.
  await mkdir(snippets('deepjson'), { recursive: true });
  await writeFile(snippets('deepjson', 'index.ts'), HELLO);
  await writeFile(snippets('deepjson', 'snippet.json'), '['.repeat(60_000));
  await mkdir(snippets('bigjson'), { recursive: true });
  await writeFile(snippets('bigjson', 'index.ts'), HELLO);
  await writeFile(snippets('bigjson', 'snippet.json'), `{${' '.repeat(FOLDER_LIMITS.maxSnippetJsonBytes)}}`);

  // More files than a bundle may hold, and more entries than a folder may (dotfiles are never read, but counted).
  for (const [name, prefix] of [
    ['many', 'f'],
    ['many-dot', '.f'],
    ['thinned', '.f'],
  ] as const) {
    await mkdir(snippets(name), { recursive: true });
    await writeFile(snippets(name, 'index.ts'), HELLO);
    for (let i = 0; i < FOLDER_LIMITS.maxEntries + 100; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, k) => writeFile(snippets(name, `${prefix}${i + k}.txt`), '')));
    }
  }

  // Directly under snippets/: no folder the loader may read.
  mkfifo(snippets('pipe-top'));
  await writeFile(snippets('notes.md'), '# not a snippet\n');
  await symlink('/tmp', snippets('elsewhere'));
  await symlink(join('..', 'lib'), snippets('linked'));

  core = await spawnCore(await tempDir(), [...PROJECT_ROOT_ARGS, '--config', JSON.stringify({ workspace: ws })]);
}, 120_000);

afterAll(async () => {
  killAll();
  await new Promise<void>((res) => (sockServer ? sockServer.close(() => res()) : res()));
  if (ws) await rm(ws, { recursive: true, force: true });
});

describe('a workspace that cannot block the core', () => {
  it(`${FIFOS} FIFOs named snippet.json (twice the threadpool), at start and added live: the core answers, its threadpool stays free, \
each is reported and none is opened`, async () => {
    for (let i = 0; i < FIFOS; i++) {
      const f = await settledFolder(`fifo-${i}`, (f) => expect(f.state).toBe('error'));
      expect(f.error).toMatchObject({ file: 'snippet.json' });
      expect(f.error!.message).toContain('FIFO');
      expect(skippedOf(f, 'snippet.json')).toMatchObject({ code: 'special_file' });
    }
    const atStart = await coreAnswers();

    for (let i = 0; i < FIFOS; i++) {
      await mkdir(snippets(`live-${i}`), { recursive: true });
      await writeFile(snippets(`live-${i}`, 'index.ts'), HELLO);
      mkfifo(snippets(`live-${i}`, 'snippet.json'));
    }
    for (let i = 0; i < FIFOS; i++) {
      await settledFolder(`live-${i}`, (f) => expect(skippedOf(f, 'snippet.json')?.code).toBe('special_file'));
    }
    const live = await coreAnswers();
    console.log(
      `[hazards] ${FIFOS} FIFOs at start: /healthz max ${atStart.healthzMs.toFixed(1)} ms, ` +
        `${POOL * 2} threadpool reads ${atStart.threadpoolMs.toFixed(1)} ms; ` +
        `${FIFOS} more live: /healthz max ${live.healthzMs.toFixed(1)} ms, reads ${live.threadpoolMs.toFixed(1)} ms`,
    );
    // A stalled threadpool shows as reads that never answer (the 5 s aborts above); /healthz only has to stay quick.
    expect(atStart.healthzMs).toBeLessThan(2000);
    expect(live.healthzMs).toBeLessThan(2000);
    for (const fifo of fifoPaths) expect(nobodyReads(fifo), fifo).toBe(true);
  }, 60_000);

  it('a FIFO source file and a socket are skipped with their kind and what to do; the rest of the folder loads', async () => {
    const f = await settledFolder('mixed', serving);
    expect(skippedOf(f, 'pipe.ts')).toMatchObject({ code: 'special_file', reason: expect.stringContaining('FIFO') });
    expect(skippedOf(f, 'sock')).toMatchObject({ code: 'special_file', reason: expect.stringContaining('socket') });
    expect(skippedOf(f, 'pipe.ts')!.reason).toContain('replace it with a regular file');
  });

  it('a device node is skipped', async (ctx) => {
    if (!devices.made) ctx.skip(`no device node could be made here (${devices.why})`);
    const f = await settledFolder('mixed', serving);
    expect(skippedOf(f, 'null-dev')).toMatchObject({ code: 'special_file', reason: expect.stringContaining('character device') });
  });

  it('a symlink to /dev/zero and one out of the workspace are not followed, and nothing is read through them; \
one inside the workspace is read', async (ctx) => {
    const f = await settledFolder('mixed', serving);
    expect(skippedOf(f, 'zero.ts')).toMatchObject({ code: 'symlink_outside', reason: expect.stringContaining('/dev/zero') });
    expect(skippedOf(f, 'outside.ts')).toMatchObject({ code: 'symlink_outside' });
    expect(skippedOf(f, 'shared.ts')).toBeUndefined();
    const version = await request(core.url, 'GET', `/v1/snippets/mixed/versions/${f.version}`, undefined, { key: core.key });
    expect(Object.keys(version.json.files).sort()).toEqual(['index.ts', 'shared.ts']);
    expect(version.json.files['shared.ts']).toBe('export const shared = 42;\n');

    // Live: a new /dev/zero link costs the core no read (the reviewer saw ~550 MB read before).
    const before = await rchar();
    if (before === null) ctx.skip('no /proc/PID/io here to count the bytes the core reads');
    await mkdir(snippets('zero-live'), { recursive: true });
    await writeFile(snippets('zero-live', 'index.ts'), HELLO);
    await symlink('/dev/zero', snippets('zero-live', 'snippet.json'));
    await symlink('/dev/zero', snippets('zero-live', 'data.ts'));
    const live = await settledFolder('zero-live', (f) => expect(f.state).toBe('error'));
    expect(skippedOf(live, 'data.ts')?.code).toBe('symlink_outside');
    expect(live.error).toMatchObject({ file: 'snippet.json' });
    const read = (await rchar())! - before!;
    console.log(`[hazards] the core read ${read} bytes while it loaded a folder with two links to /dev/zero`);
    expect(read).toBeLessThan(4 * 1024 * 1024);
  });

  it('a symlink loop and a link to its own folder are skipped, not walked', async () => {
    const f = await settledFolder('mixed', serving);
    expect(skippedOf(f, 'loop-a.ts')).toMatchObject({ code: 'symlink_broken', reason: expect.stringContaining('loop') });
    expect(skippedOf(f, 'loop-b.ts')).toMatchObject({ code: 'symlink_broken' });
    expect(skippedOf(f, 'self')).toMatchObject({ code: 'symlink_not_file', reason: expect.stringContaining('directory') });
  });

  it('an oversized file is skipped by its size, before a byte of it is read; an oversized snippet.json is an error', async () => {
    const f = await settledFolder('mixed', serving);
    expect(skippedOf(f, 'huge.bin')).toMatchObject({ code: 'too_large', reason: expect.stringContaining('67,108,864 bytes') });
    const big = await settledFolder('bigjson', (f) => expect(f.state).toBe('error'));
    expect(big.error).toMatchObject({ file: 'snippet.json' });
    expect(big.error!.message).toContain('64 KiB');
    expect(skippedOf(big, 'snippet.json')?.code).toBe('too_large');
  });

  it('a deeply nested snippet.json is reported as an error, not dropped', async () => {
    const f = await settledFolder('deepjson', (f) => expect(f.state).toBe('error'));
    expect(f.error).toMatchObject({ file: 'snippet.json' });
    expect(f.error!.message).toContain('snippet.json is not valid JSON');
  });

  it('a folder below the depth limit is skipped; a folder with more files or entries than the limits is an error, \
read no further', async () => {
    const f = await settledFolder('mixed', serving);
    const tooDeep = f.skipped.find((s) => s.code === 'too_deep');
    expect(tooDeep?.path).toBe(`${Array.from({ length: FOLDER_LIMITS.maxDepth + 1 }, (_, i) => `d${i}`).join('/')}/`);
    const many = await settledFolder('many', (f) => expect(f.state).toBe('error'));
    expect(many.error!.message).toContain('more than 200 files (the bundle limit)');
    const dots = await settledFolder('many-dot', (f) => expect(f.state).toBe('error'));
    expect(dots.error!.message).toContain(`more than ${FOLDER_LIMITS.maxEntries.toLocaleString('en')} entries`);
  });

  it('the watcher leaves a folder with too many entries alone, and counts it again: thinned out, it loads', async (ctx) => {
    await settledFolder('thinned', (f) => expect(f.state).toBe('error'));
    const watches = await inotifyWatches();
    if (watches === null) ctx.skip('no inotify descriptor visible in /proc here');
    // Three folders of 5,500 entries each, none of them watched file by file.
    console.log(`[hazards] the core holds ${watches} inotify watches`);
    expect(watches).toBeLessThan(FOLDER_LIMITS.maxEntries);
    const names = (await readdir(snippets('thinned'))).filter((n) => n.startsWith('.f'));
    expect(names.length).toBeGreaterThan(FOLDER_LIMITS.maxEntries);
    await Promise.all(names.slice(0, names.length - FOLDER_LIMITS.maxEntries + 100).map((n) => rm(snippets('thinned', n))));
    await settledFolder('thinned', serving);
    await writeFile(snippets('thinned', 'index.ts'), 'export default async () => ({ thinned: true });\n');
    await settledFolder('thinned', (f) => expect(f.version).toBe(2));
  }, 60_000);

  it('a watched folder that grows past the entry limit is reported, dropped by the watcher, and loads again once cleaned', async (ctx) => {
    await mkdir(snippets('grows'), { recursive: true });
    await writeFile(snippets('grows', 'index.ts'), HELLO);
    await settledFolder('grows', serving);
    const dirs = Array.from({ length: FOLDER_LIMITS.maxEntries + 100 }, (_, i) => snippets('grows', `d${i}`));
    for (let i = 0; i < dirs.length; i += 500) await Promise.all(dirs.slice(i, i + 500).map((d) => mkdir(d)));
    const f = await settledFolder('grows', (f) => expect(f.state).toBe('error'));
    expect(f.error!.message).toContain(`more than ${FOLDER_LIMITS.maxEntries.toLocaleString('en')} entries`);
    const watches = await vi.waitFor(
      async () => {
        const w = await inotifyWatches();
        if (w !== null) expect(w).toBeLessThan(1000);
        return w;
      },
      { timeout: 15_000, interval: 50 },
    );
    if (watches === null) ctx.skip('no inotify descriptor visible in /proc here');
    console.log(`[hazards] after the folder grew past the limit the core holds ${watches} inotify watches`);
    // The watcher that replaced the old one still sees saves in the other folders.
    const before = (await settledFolder('plain', serving)).version!;
    await writeFile(snippets('plain', 'index.ts'), `export default async () => ({ after: ${before} });\n`);
    await settledFolder('plain', (f) => expect(f.version).toBe(before + 1));
    for (let i = 0; i < dirs.length; i += 500) await Promise.all(dirs.slice(i, i + 500).map((d) => rm(d, { recursive: true })));
    await settledFolder('grows', serving);
  }, 60_000);

  it('entries directly under snippets/ that are no folder are listed workspace-level, with the reason', async () => {
    const view = await vi.waitFor(
      async () => {
        const v = await workspace();
        const paths = v.skipped.map((s) => s.path).sort();
        expect(paths).toEqual(['snippets/elsewhere', 'snippets/linked', 'snippets/notes.md', 'snippets/pipe-top']);
        return v;
      },
      { timeout: 15_000, interval: 25 },
    );
    const by = new Map(view.skipped.map((s) => [s.path, s]));
    expect(by.get('snippets/pipe-top')).toMatchObject({ code: 'special_file' });
    expect(by.get('snippets/notes.md')).toMatchObject({ code: 'not_a_folder' });
    expect(by.get('snippets/elsewhere')).toMatchObject({ code: 'symlink_outside' });
    expect(by.get('snippets/linked')).toMatchObject({ code: 'symlink_not_file' });
    expect(view.folders.map((f) => f.snippet)).not.toContain('pipe-top');
  });
});

describe('a workspace whose snippets/ is no folder', () => {
  it('the core starts and says what snippets/ is; once it is a folder, its snippets load', async () => {
    const dir = await tempDir('svc-emu-hz-top-');
    execFileSync('mkfifo', [join(dir, 'snippets')]);
    const c = await spawnCore(await tempDir(), [...PROJECT_ROOT_ARGS, '--config', JSON.stringify({ workspace: dir })]);
    try {
      const view = async () => {
        const r = await request(c.url, 'GET', '/_emu/workspace', undefined, { key: c.admin });
        return r.json as View & { watching: boolean };
      };
      const first = await view();
      expect(first.watching).toBe(false);
      const fifo = { path: 'snippets', code: 'special_file', reason: expect.stringContaining('FIFO') };
      expect(first.skipped).toEqual([expect.objectContaining(fifo)]);
      expect(nobodyReads(join(dir, 'snippets'))).toBe(true);

      await rm(join(dir, 'snippets'));
      await mkdir(join(dir, 'snippets', 'late'), { recursive: true });
      await writeFile(join(dir, 'snippets', 'late', 'index.ts'), HELLO);
      await vi.waitFor(
        async () => {
          const v = await view();
          expect(v.watching).toBe(true);
          expect(v.skipped).toEqual([]);
          expect(v.folders.find((f) => f.snippet === 'late')?.state).toBe('loaded');
        },
        { timeout: 20_000, interval: 50 },
      );
    } finally {
      c.proc.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('snippets/ as a symlink to a folder inside the workspace is watched through its real path; one out of it is refused', async () => {
    const inside = await tempDir('svc-emu-hz-link-');
    const outside = await tempDir('svc-emu-hz-out-');
    await mkdir(join(inside, 'real', 'linked-snippet'), { recursive: true });
    await writeFile(join(inside, 'real', 'linked-snippet', 'index.ts'), HELLO);
    await symlink('real', join(inside, 'snippets'));
    const outWs = await tempDir('svc-emu-hz-outws-');
    await symlink(outside, join(outWs, 'snippets'));
    const a = await spawnCore(await tempDir(), [...PROJECT_ROOT_ARGS, '--config', JSON.stringify({ workspace: inside })]);
    const b = await spawnCore(await tempDir(), [...PROJECT_ROOT_ARGS, '--config', JSON.stringify({ workspace: outWs })]);
    try {
      const view = async (c: Child) => (await request(c.url, 'GET', '/_emu/workspace', undefined, { key: c.admin })).json as View;
      expect((await view(a)).folders.find((f) => f.snippet === 'linked-snippet')?.state).toBe('loaded');
      // A save through the link is seen.
      await writeFile(join(inside, 'snippets', 'linked-snippet', 'index.ts'), 'export default async () => ({ v: 2 });\n');
      await vi.waitFor(async () => expect((await view(a)).folders.find((f) => f.snippet === 'linked-snippet')?.version).toBe(2), {
        timeout: 15_000,
        interval: 50,
      });
      expect((await view(b)).skipped).toEqual([expect.objectContaining({ path: 'snippets', code: 'symlink_outside' })]);
    } finally {
      a.proc.kill('SIGKILL');
      b.proc.kill('SIGKILL');
      for (const d of [inside, outside, outWs]) await rm(d, { recursive: true, force: true });
    }
  }, 60_000);
});
