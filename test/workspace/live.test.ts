/**
 * Save-to-live (issue 16): the loader's short quiet window must never turn half a save into a version, nor show
 * an error the save's next event fixes; a version and its deploy are one durable write; a live change starts the
 * new version's sandbox (prewarm) with the key its runs use, the startup scan starts none, and a start that fails
 * is the folder's error. The loader runs here on real storage and the real code checkers, with the prewarm
 * recorded (test/executor/prewarm.test.ts holds the executor's side); the last test runs it all in a core.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCodeChecker } from '../../executor/validate';
import type { PrewarmJob, PrewarmResult } from '../../executor/types';
import { jsonLogger } from '../../server/logger';
import { openState } from '../../server/open-state';
import { startEmulator, type RunningEmulator } from '../../server';
import { SnippetService, type CodeValidator } from '../../server/services/snippets';
import { TenantService } from '../../server/services/tenants';
import type { CoreDeps } from '../../server/core-deps';
import type { TenantRecord } from '../../server/storage/schema';
import { WorkspaceLoader, type FolderStatus } from '../../server/workspace/loader';
import { PROJECT_ROOT, request, tempDir } from '../helpers/core';

const lockPath = join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json');
const lock = existsSync(lockPath) ? JSON.parse(readFileSync(lockPath, 'utf8')) : null;
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';

let ws: string;
let deps: CoreDeps;
let tenant: TenantRecord;
let snippets: SnippetService;
let loader: WorkspaceLoader;
let check: ReturnType<typeof createCodeChecker>;
/** Every status the loader published, in order. */
const statuses: FolderStatus[] = [];
const prewarms: PrewarmJob[] = [];
/** Prewarms the loader ended because their version was not written. */
const dropped: PrewarmJob[] = [];
/** What the recorded prewarm answers, per snippet (ready unless set). */
const prewarmAnswer = new Map<string, PrewarmResult>();
/** Called with each bundle the code checker is asked about, before it answers (a test may hold the answer). */
let onCheck: (files: Record<string, string>) => Promise<void> = async () => {};

const folder = (name: string) => join(ws, 'snippets', name);
const statusOf = (name: string) => loader.status().folders.find((f) => f.snippet === name);
const versionsOf = (name: string) => snippets.listVersions(tenant, name, { limit: 100 }).data;
const filesOf = async (name: string, v: number) => (await snippets.getVersion(tenant, name, v)).files!;

beforeAll(async () => {
  if (!lock) return;
  ws = await tempDir('svc-emu-live-ws-');
  // Present before the start: the startup scan loads it, and prewarms nothing.
  await mkdir(folder('scanned'), { recursive: true });
  await writeFile(join(folder('scanned'), 'index.ts'), 'export default async () => ({ scanned: true });\n');
  ({ deps } = await openState(await tempDir('svc-emu-live-data-')));
  const tenants = new TenantService(deps);
  ({ tenant } = await tenants.ensureLocal());
  check = createCodeChecker({ bunBin: lock.bun.bin, pythonBin: lock.python.bin, runtimesDir: join(PROJECT_ROOT, 'executor', 'runtimes') });
  const validate: CodeValidator = async (input) => {
    await onCheck(input.files);
    return check(input);
  };
  snippets = new SnippetService(deps, validate);
  loader = new WorkspaceLoader({
    dir: ws,
    tenants,
    snippets,
    logger: jsonLogger(() => {}),
    onStatus: (s) => statuses.push(s),
    dropPrewarm: (job) => dropped.push(job),
    prewarm: async (job) => {
      prewarms.push(job);
      const snippet = deps.repo.read((db) => db.snippets.find((s) => s.id === job.snippetId));
      return prewarmAnswer.get(snippet?.name ?? '') ?? { outcome: 'ready' };
    },
  });
  await loader.start();
  await loader.settled();
}, 30_000);
afterAll(async () => {
  await loader?.stop();
  check?.close();
  await deps?.repo.close();
});

/** Writes a file the way an editor that truncates first does: the file is empty, then half there, then whole. */
async function truncateThenWrite(path: string, parts: string[], between: () => Promise<void> = async () => {}) {
  const fh = await open(path, 'w');
  try {
    for (const part of parts) {
      await fh.write(part);
      await between();
    }
  } finally {
    await fh.close();
  }
}

/** Waits until the folder serves a version whose entry file is `content`, and returns that version. */
async function servedWith(name: string, entry: string, content: string): Promise<number> {
  return vi.waitFor(
    async () => {
      const s = statusOf(name);
      expect(s?.state).toMatch(/^(loaded|unchanged)$/);
      expect((await filesOf(name, s!.version!))[entry]).toBe(content);
      return s!.version!;
    },
    { timeout: 10_000, interval: 10 },
  );
}

describe('save-to-live', () => {
  it('the startup scan makes versions and starts no sandbox', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    expect(statusOf('scanned')).toMatchObject({ state: 'loaded', version: 1 });
    expect(prewarms.filter((p) => p.snippetId === snippets.get(tenant, 'scanned').id)).toEqual([]);
  });

  it('a save that fails to parse halfway never becomes a version, and its error is never shown', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('halfway'), { recursive: true });
    const entry = join(folder('halfway'), 'index.ts');
    await writeFile(entry, 'export default async () => ({ v: 0 });\n');
    const first = await servedWith('halfway', 'index.ts', 'export default async () => ({ v: 0 });\n');
    const seen = statuses.length;
    // The loader checks the half file (it does not parse) before the rest is written: the test holds the
    // checker's answer until then, so the refused load and the next event's load both happen, in that order.
    const half = 'export default async () => ({ v: ';
    let checkedHalf!: () => void;
    const halfChecked = new Promise<void>((r) => (checkedHalf = r));
    onCheck = async (files) => {
      if (files['index.ts'] === half) checkedHalf();
    };
    try {
      await truncateThenWrite(entry, [half, '1 });\n'], () => halfChecked);
      const v = await servedWith('halfway', 'index.ts', 'export default async () => ({ v: 1 });\n');
      expect(v).toBe(first + 1);
      await loader.settled(); // and no error waiting to be shown
    } finally {
      onCheck = async () => {};
    }
    const published = statuses.slice(seen).filter((s) => s.snippet === 'halfway');
    expect(published.map((s) => s.state)).not.toContain('error');
    expect(statusOf('halfway')).toMatchObject({ state: 'loaded', error: null });
    for (const rec of versionsOf('halfway')) expect((await filesOf('halfway', rec.version))['index.ts']).toMatch(/\}\);\n$/);
  });

  it('a half that parses is dropped before its write when the rest arrives during its check', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('parses'), { recursive: true });
    const entry = join(folder('parses'), 'index.ts');
    await writeFile(entry, 'export default async () => ({ v: 0 });\n');
    const first = await servedWith('parses', 'index.ts', 'export default async () => ({ v: 0 });\n');
    const half = "export default async () => ({ v: 'half' });\n";
    const whole = `${half}export const tail = 1;\n`;
    // The check of the half is held until the rest is on disk and the loader has seen its event.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    // The loader's count of the folder's changes (private): it has seen the rest's event once the count moved.
    const changes = () => (loader as unknown as { generation: Map<string, number> }).generation.get('parses') ?? 0;
    let atHold = 0;
    let heldHalf!: () => void;
    const halfHeld = new Promise<void>((r) => (heldHalf = r));
    onCheck = async (files) => {
      if (files['index.ts'] !== half) return;
      atHold = changes();
      heldHalf();
      await released;
    };
    try {
      await truncateThenWrite(entry, [half, 'export const tail = 1;\n'], () => halfHeld);
      await vi.waitFor(() => expect(changes()).toBeGreaterThan(atHold), { timeout: 5000, interval: 5 });
      release();
      const v = await servedWith('parses', 'index.ts', whole);
      expect(v).toBe(first + 1);
    } finally {
      release();
      onCheck = async () => {};
    }
    for (const rec of versionsOf('parses')) expect((await filesOf('parses', rec.version))['index.ts']).not.toBe(half);
  });

  it('a half that passed its check is dropped at its write when the rest arrives meanwhile, and its sandbox is ended', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('late'), { recursive: true });
    const entry = join(folder('late'), 'index.ts');
    await writeFile(entry, 'export default async () => ({ v: 0 });\n');
    const first = await servedWith('late', 'index.ts', 'export default async () => ({ v: 0 });\n');
    const half = "export default async () => ({ v: 'half' });\n";
    const whole = `${half}export const tail = 1;\n`;
    // The half's blob write (after its check, after its prewarm started) is held until the loader has seen the rest.
    const changes = () => (loader as unknown as { generation: Map<string, number> }).generation.get('late') ?? 0;
    let atHold = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let heldHalf!: () => void;
    const halfHeld = new Promise<void>((r) => (heldHalf = r));
    const put = deps.blobs.put.bind(deps.blobs);
    const spy = vi.spyOn(deps.blobs, 'put').mockImplementation(async (content) => {
      if (content === half) {
        atHold = changes();
        heldHalf();
        await released;
      }
      return put(content);
    });
    try {
      await truncateThenWrite(entry, [half, 'export const tail = 1;\n'], () => halfHeld);
      await vi.waitFor(() => expect(changes()).toBeGreaterThan(atHold), { timeout: 5000, interval: 5 });
      release();
      expect(await servedWith('late', 'index.ts', whole)).toBe(first + 1);
      await loader.settled();
    } finally {
      release();
      spy.mockRestore();
    }
    for (const rec of versionsOf('late')) expect((await filesOf('late', rec.version))['index.ts']).not.toBe(half);
    const snippetId = snippets.get(tenant, 'late').id;
    const contentOf = async (p: PrewarmJob) => (await p.bundle.load())['index.ts'];
    const started = await Promise.all(prewarms.filter((p) => p.snippetId === snippetId && p.version === first + 1).map(contentOf));
    expect(started).toEqual([half, whole]);
    expect(await Promise.all(dropped.filter((p) => p.snippetId === snippetId).map(contentOf))).toEqual([half]);
  });

  it('a burst of saves makes one version, for the last content', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('bursty'), { recursive: true });
    const entry = join(folder('bursty'), 'main.py');
    await writeFile(entry, 'def handler(input):\n    return {"i": 0}\n');
    const first = await servedWith('bursty', 'main.py', 'def handler(input):\n    return {"i": 0}\n');
    for (let i = 1; i <= 30; i++) await truncateThenWrite(entry, ['def handler(input):\n', `    return {"i": ${i}}\n`]);
    const v = await servedWith('bursty', 'main.py', 'def handler(input):\n    return {"i": 30}\n');
    await loader.settled();
    // Loads of content the burst had already replaced were dropped before their write (or never started).
    expect(v).toBe(first + 1);
    expect(snippets.get(tenant, 'bursty').latest_version).toBe(v);
  });

  it('a live save is one durable write for the version and its deploy, and prewarms the new version', async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('oneshot'), { recursive: true });
    const entry = join(folder('oneshot'), 'index.ts');
    await writeFile(entry, 'export default async () => ({ n: 1 });\n');
    await servedWith('oneshot', 'index.ts', 'export default async () => ({ n: 1 });\n');
    await loader.settled();
    const mutate = vi.spyOn(deps.repo, 'mutate');
    try {
      await writeFile(entry, 'export default async () => ({ n: 2 });\n');
      const v = await servedWith('oneshot', 'index.ts', 'export default async () => ({ n: 2 });\n');
      await loader.settled();
      expect(mutate).toHaveBeenCalledTimes(1);
      const snippet = snippets.get(tenant, 'oneshot');
      expect(snippets.listDeployments(tenant, 'oneshot').find((d) => d.env === 'dev')?.version).toBe(v);
      const rec = snippets.findVersion(snippet, v)!;
      const job = prewarms.filter((p) => p.snippetId === snippet.id).at(-1);
      expect(job).toMatchObject({
        tenantId: tenant.id,
        version: v,
        runtime: 'bun',
        bundle: { sha256: rec.sha256, entrypoint: 'index.ts' },
        limits: { timeout_ms: rec.timeout_ms, max_memory_mb: rec.max_memory_mb, max_cpu_percent: rec.max_cpu_percent },
      });
      expect(await job!.bundle.load()).toEqual({ 'index.ts': 'export default async () => ({ n: 2 });\n' });
    } finally {
      mutate.mockRestore();
    }
  });

  it("a version that fails to start is the folder's error; it stays deployed, and the next good save clears it", async (ctx) => {
    if (!lock) ctx.skip(NOT_INSTALLED);
    await mkdir(folder('fails'), { recursive: true });
    const entry = join(folder('fails'), 'index.ts');
    await writeFile(entry, 'export default async () => ({ ok: 1 });\n');
    await servedWith('fails', 'index.ts', 'export default async () => ({ ok: 1 });\n');
    await loader.settled();
    prewarmAnswer.set('fails', { outcome: 'handler_error', message: 'Error: broken at load' });
    await writeFile(entry, "throw new Error('broken at load');\nexport default async () => ({ ok: 2 });\n");
    const failed = await vi.waitFor(
      () => {
        const s = statusOf('fails');
        expect(s?.state).toBe('error');
        return s!;
      },
      { timeout: 10_000, interval: 10 },
    );
    expect(failed.error?.message).toMatch(/version \d+ is deployed but failed to start: Error: broken at load/);
    expect(failed.version).toBe(snippets.get(tenant, 'fails').latest_version);
    expect(snippets.listDeployments(tenant, 'fails').find((d) => d.env === 'dev')?.version).toBe(failed.version);
    prewarmAnswer.delete('fails');
    await writeFile(entry, 'export default async () => ({ ok: 3 });\n');
    await servedWith('fails', 'index.ts', 'export default async () => ({ ok: 3 });\n');
    expect(statusOf('fails')).toMatchObject({ state: 'loaded', error: null });
  });
});

describe('save-to-live in a core', () => {
  let emu: RunningEmulator;
  let coreWs: string;
  beforeAll(async () => {
    if (!lock) return;
    coreWs = await tempDir('svc-emu-live-core-ws-');
    emu = await startEmulator({
      dataDir: await tempDir(),
      port: 0,
      workspace: coreWs,
      projectRoot: PROJECT_ROOT,
      spares: 'plain', // as test/helpers/core.ts: a framework spare's import is ~1 s of CPU per core start
      logger: jsonLogger(() => {}),
    });
  }, 30_000);
  afterAll(async () => {
    await emu?.stop();
  });

  for (const [runtime, file, code] of [
    ['bun', 'index.ts', (n: number) => `export default async () => ({ n: ${n} });\n`],
    ['python', 'main.py', (n: number) => `def handler(input):\n    return {"n": ${n}}\n`],
  ] as const) {
    it(`${runtime}: a save is live, and its first invocation is warm`, async (ctx) => {
      if (!lock) ctx.skip(NOT_INSTALLED);
      const name = `live-${runtime}`;
      const invoke = () => request(emu.url, 'POST', `/v1/invoke/${name}?env=dev`, {}, { defaultKey: emu.localApiKey! });
      await mkdir(join(coreWs, 'snippets', name), { recursive: true });
      await writeFile(join(coreWs, 'snippets', name, file), code(1));
      await vi.waitFor(async () => expect((await invoke()).json).toEqual({ n: 1 }), { timeout: 10_000, interval: 20 });
      await writeFile(join(coreWs, 'snippets', name, file), code(2));
      await vi.waitFor(() => expect(emu.services.workspace!.status().folders.find((f) => f.snippet === name)?.version).toBe(2), {
        timeout: 10_000,
        interval: 10,
      });
      await (emu.services.workspace as WorkspaceLoader).settled(); // the version's sandbox has started (server/index.ts: the loader)
      const r = await invoke();
      expect(r.json).toEqual({ n: 2 });
      const id = r.headers.get('x-invocation-id')!;
      const rec = await request(emu.url, 'GET', `/_emu/invocations/${id}`, undefined, { key: emu.adminToken });
      expect(rec.json).toMatchObject({ version: 2, outcome: 'success', warm: true });
    });
  }
});
