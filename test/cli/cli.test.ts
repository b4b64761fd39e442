/**
 * The svc-emu CLI (issue 2), called in-process through `main(argv, io)`: operator commands with no core
 * running (they edit the data dir under its lock) and with one (they go through /_emu), bad input,
 * two cores on one data dir, and `serve`.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIO } from '../../server/cli/main';
import { startEmulator, DataDirInUseError } from '../../server';
import { request, startTestCore, tempDir, type TestCore } from '../helpers/core';

const dirs: string[] = [];
const cores: TestCore[] = [];
afterAll(async () => {
  for (const c of cores) await c.stop().catch(() => {});
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function newDir(): Promise<string> {
  const d = await tempDir('svc-emu-cli-');
  dirs.push(d);
  return d;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function captureIO(cwd: string, untilSignal: () => Promise<string> = () => new Promise(() => {})) {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = {
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    cwd,
    untilSignal,
  };
  return { io, out };
}

async function cli(argv: string[], cwd = '/'): Promise<Run> {
  const { io, out } = captureIO(cwd);
  const code = await main(argv, io);
  return { code, ...out };
}

const DEFAULT_CAPS = { timeout_ms: 900000, max_memory_mb: 2048, max_cpu_percent: 100, max_concurrency: 10 };

describe('without a running core (on the data dir’s files)', () => {
  it('tenant create, tenant limits, key create, tenant list --json; the state is what a core then serves', async () => {
    const dir = await newDir();
    const dd = ['--data-dir', dir];

    const created = await cli(['tenant', 'create', 'acme', ...dd]);
    expect(created, created.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toContain('acme');
    expect(existsSync(join(dir, 'emulator.json'))).toBe(false); // the command's lock is released

    const limits = await cli(['tenant', 'limits', 'acme', '--max-memory-mb', '512', ...dd]);
    expect(limits, limits.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(limits.stdout).toMatch(/max_memory_mb\s+512/);

    const limitsJson = await cli([
      'tenant',
      'limits',
      'acme',
      '--timeout-ms',
      '30000',
      '--max-cpu-percent',
      '50',
      '--max-concurrency',
      '3',
      '--json',
      ...dd,
    ]);
    expect(limitsJson.code).toBe(0);
    expect(JSON.parse(limitsJson.stdout)).toEqual({
      tenant: 'acme',
      caps: { timeout_ms: 30000, max_memory_mb: 512, max_cpu_percent: 50, max_concurrency: 3 },
    });

    const show = await cli(['tenant', 'limits', 'acme', '--json', ...dd]); // no flag: shows the caps
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout).caps).toEqual({ timeout_ms: 30000, max_memory_mb: 512, max_cpu_percent: 50, max_concurrency: 3 });

    const key = await cli(['key', 'create', '--tenant', 'acme', ...dd]);
    expect(key.code, key.stderr).toBe(0);
    expect(key.stdout).toMatch(/^svc_[0-9A-Za-z]{40}\n$/);
    expect(key.stderr).toBe('');

    const keyJson = await cli(['key', 'create', '--tenant', 'acme', '--json', ...dd]);
    expect(keyJson.code).toBe(0);
    const kj = JSON.parse(keyJson.stdout);
    expect(kj).toMatchObject({ tenant: 'acme', key: expect.stringMatching(/^svc_[0-9A-Za-z]{40}$/) });
    expect(kj.key).not.toBe(key.stdout.trim());

    const list = await cli(['tenant', 'list', '--json', ...dd]);
    expect(list.code).toBe(0);
    const tenants = JSON.parse(list.stdout).data;
    const acme = tenants.find((t: { name: string }) => t.name === 'acme');
    expect(acme.caps).toEqual({ timeout_ms: 30000, max_memory_mb: 512, max_cpu_percent: 50, max_concurrency: 3 });
    expect(acme.keys).toHaveLength(2);
    expect(list.stdout).not.toContain(key.stdout.trim()); // keys are shown once

    const human = await cli(['tenant', 'list', ...dd]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('acme');

    // the key is stored hashed only
    const db = await readFile(join(dir, 'db.json'), 'utf8');
    expect(db).not.toContain(key.stdout.trim());

    // a core started on the data dir serves that state: the key works, the caps apply
    const core = await startTestCore({ dataDir: dir });
    cores.push(core);
    const caps = await core.call('GET', '/v1/tenant/runtime-limits', undefined, { key: key.stdout.trim() });
    expect(caps.status).toBe(200);
    expect(caps.json).toEqual({ timeout_ms: 30000, max_memory_mb: 512, max_cpu_percent: 50, max_concurrency: 3 });
    expect((await core.call('GET', '/v1/snippets', undefined, { key: kj.key })).status).toBe(200);
    await core.stop();
  });

  it('doctor --json reports the host', async () => {
    const r = await cli(['doctor', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep).toMatchObject({ node: process.version, platform: process.platform, arch: process.arch });
    expect(['full', 'degraded']).toContain(rep.parity);
    expect(['v1', 'v2', 'hybrid', 'none']).toContain(rep.cgroup.mode);
    expect(Array.isArray(rep.notes)).toBe(true);
    const human = await cli(['doctor']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('cgroups');
    if (rep.sandbox.bubblewrap)
      expect(human.stdout).toMatch(/snippet +host uid [1-9]\d* \(.*\), no capabilities, no_new_privs on, seccomp filter\n/);
    // The limits line names the backend once (its reason starts with the name).
    const limits = /^limits +(.*)$/m.exec(human.stdout)?.[1] ?? '';
    expect(limits.startsWith(rep.limits.backend), limits).toBe(true);
    expect(limits.split(rep.limits.backend).length - 1, limits).toBe(1);
  });

  it('--version prints the version (and --json as an object); --version V still names a snippet version elsewhere', async () => {
    const v = await cli(['--version']);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toMatch(/^svc-emu \d+\.\d+\.\d+\n$/);
    const j = await cli(['--version', '--json']);
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout)).toEqual({ version: v.stdout.trim().split(' ')[1] });
    const usage = await cli(['--help']);
    expect(usage.stdout).toContain('svc-emu --version');
    const deploy = await cli(['deploy', 'x', '--version']); // a snippet version with no value: a usage error, not the version
    expect(deploy.code).toBe(2);
  });

  it('--help prints usage and exits 0; no command prints usage and exits 2', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('svc-emu tenant create NAME');
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage');
  });
});

describe('bad input: exit 2 with a clear message and no change', () => {
  /** Every file of the data dir with its content, to prove a refused command changed nothing. */
  async function dirState(dir: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const walk = async (d: string) => {
      for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
        const p = join(d, e.name);
        if (e.isDirectory()) await walk(p);
        else out[p.slice(dir.length)] = (await readFile(p)).toString('base64');
      }
    };
    await walk(dir);
    return out;
  }

  const usageCases: [string, string[], RegExp][] = [
    ['bad tenant name', ['tenant', 'create', 'Bad_Name'], /NAME.*(a-z|lowercase|must)/i],
    ['tenant name with a leading dash', ['tenant', 'create', '--', '-lead'], /NAME/],
    ['tenant name of 64 chars', ['tenant', 'create', 'a'.repeat(64)], /NAME/],
    ['--max-memory-mb 0', ['tenant', 'limits', 'acme', '--max-memory-mb', '0'], /--max-memory-mb.*at least 1/],
    ['--max-memory-mb -1', ['tenant', 'limits', 'acme', '--max-memory-mb=-1'], /--max-memory-mb/],
    ['--max-memory-mb abc', ['tenant', 'limits', 'acme', '--max-memory-mb', 'abc'], /--max-memory-mb.*integer/],
    ['--max-memory-mb 1.5', ['tenant', 'limits', 'acme', '--max-memory-mb', '1.5'], /--max-memory-mb.*integer/],
    ['--timeout-ms empty', ['tenant', 'limits', 'acme', '--timeout-ms', ''], /--timeout-ms/],
    ['--max-concurrency too large', ['tenant', 'limits', 'acme', '--max-concurrency', '99999999999'], /--max-concurrency/],
    ['unknown command', ['frobnicate'], /unknown command 'frobnicate'/],
    ['unknown subcommand', ['tenant', 'frob'], /unknown command 'tenant frob'/],
    ['unknown key subcommand', ['key', 'delete', '--tenant', 'acme'], /unknown command 'key delete'/],
    ['unknown flag', ['tenant', 'list', '--bogus'], /bogus/],
    ['key create without --tenant', ['key', 'create'], /--tenant/],
    ['tenant create without a name', ['tenant', 'create'], /tenant create NAME/],
    ['tenant create with two names', ['tenant', 'create', 'a', 'b'], /unexpected argument 'b'/],
    ['tenant list with an argument', ['tenant', 'list', 'extra'], /unexpected argument 'extra'/],
    ['doctor with an argument', ['doctor', 'now'], /unexpected argument 'now'/],
    ['serve with a bad port', ['serve', '--port', 'abc'], /--port/],
    ['serve with a port out of range', ['serve', '--port', '70000'], /--port/],
  ];

  it.each(usageCases)('%s → 2, on an existing data dir, nothing changes', async (_label, argv, message) => {
    const dir = await newDir();
    expect((await cli(['tenant', 'create', 'acme', '--data-dir', dir])).code).toBe(0);
    const before = await dirState(dir);
    const r = await cli(['--data-dir', dir, ...argv]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/at .*\.ts:\d+/); // no stack trace
    expect(r.stdout).toBe('');
    expect(await dirState(dir)).toEqual(before);
    const list = JSON.parse((await cli(['tenant', 'list', '--json', '--data-dir', dir])).stdout).data;
    expect(list.map((t: { name: string }) => t.name)).toEqual(['acme']);
    expect(list[0].caps).toEqual(DEFAULT_CAPS);
    expect(list[0].keys).toEqual([]);
  });

  it('bad input on a data dir that does not exist yet → 2, and the data dir is not created', async () => {
    const parent = await newDir();
    const created: string[] = [];
    for (const [label, argv] of usageCases) {
      const dir = join(parent, label.replace(/[^a-z0-9]+/gi, '-'));
      const r = await cli(['--data-dir', dir, ...argv]);
      expect(r.code, `${label}: ${r.stderr}`).toBe(2);
      if (existsSync(dir)) created.push(`${label} (svc-emu ${argv.join(' ')}) created ${(await readdir(dir)).join(', ')}`);
    }
    expect(created).toEqual([]);
  });

  it('failures that are not usage errors exit 1 with the reason: duplicate tenant, missing tenant', async () => {
    const dir = await newDir();
    const dd = ['--data-dir', dir];
    expect((await cli(['tenant', 'create', 'acme', ...dd])).code).toBe(0);
    const before = await dirState(dir);
    const dup = await cli(['tenant', 'create', 'acme', ...dd]);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/already exists/);
    const dupJson = await cli(['tenant', 'create', 'acme', '--json', ...dd]);
    expect(dupJson.code).toBe(1);
    expect(JSON.parse(dupJson.stdout)).toMatchObject({ code: 'conflict', detail: expect.stringMatching(/already exists/) });
    expect(dupJson.stderr).toBe('');
    const missing = await cli(['tenant', 'limits', 'ghost', '--max-memory-mb', '5', ...dd]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/ghost/);
    const noKey = await cli(['key', 'create', '--tenant', 'ghost', ...dd]);
    expect(noKey.code).toBe(1);
    expect(noKey.stdout).toBe('');
    expect(await dirState(dir)).toEqual(before);
  });
});

describe('with a running core on the data dir (through /_emu)', () => {
  it('tenant create, key create, tenant limits go through the core and take effect at once', async () => {
    const dir = await newDir();
    const core = await startTestCore({ dataDir: dir });
    cores.push(core);
    const dd = ['--data-dir', dir];
    const lockBefore = await readFile(join(dir, 'emulator.json'), 'utf8');

    const created = await cli(['tenant', 'create', 'acme', '--json', ...dd]);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'acme', caps: DEFAULT_CAPS });
    // it went through /_emu: the core logged the request, and knows the tenant
    expect(core.logs.join('')).toMatch(/"method":"POST","route":"\/_emu\/tenants","status":201/);
    expect(core.emu.services.tenants.find('acme')).toBeDefined();

    const key = await cli(['key', 'create', '--tenant', 'acme', ...dd]);
    expect(key.code, key.stderr).toBe(0);
    expect(key.stdout).toMatch(/^svc_[0-9A-Za-z]{40}\n$/);
    const k = key.stdout.trim();
    const caps0 = await core.call('GET', '/v1/tenant/runtime-limits', undefined, { key: k });
    expect(caps0.status).toBe(200);
    expect(caps0.json).toEqual(DEFAULT_CAPS);

    const limits = await cli(['tenant', 'limits', 'acme', '--max-memory-mb', '512', ...dd]);
    expect(limits.code, limits.stderr).toBe(0);
    expect(limits.stdout).toMatch(/max_memory_mb\s+512/);
    const caps1 = await core.call('GET', '/v1/tenant/runtime-limits', undefined, { key: k });
    expect(caps1.json).toEqual({ ...DEFAULT_CAPS, max_memory_mb: 512 });
    // and the new cap is enforced at once
    expect((await core.call('POST', '/v1/snippets', { name: 's', runtime: 'bun' }, { key: k })).status).toBe(201);
    const over = await core.call(
      'POST',
      '/v1/snippets/s/versions',
      { code: 'export default async function handler(){return {}}', max_memory_mb: 513 },
      { key: k },
    );
    expect(over.status).toBe(422);
    expect(over.json.code).toBe('limit_exceeds_tenant_cap');

    const list = await cli(['tenant', 'list', '--json', ...dd]);
    expect(
      JSON.parse(list.stdout)
        .data.map((t: { name: string }) => t.name)
        .sort(),
    ).toEqual(['acme', 'local']);

    // the core still owns the data dir: the CLI never took the lock
    expect(await readFile(join(dir, 'emulator.json'), 'utf8')).toBe(lockBefore);
  });

  it('bad input and failures through the core: same exit codes, nothing changes', async () => {
    const dir = await newDir();
    const core = await startTestCore({ dataDir: dir });
    cores.push(core);
    const dd = ['--data-dir', dir];
    expect((await cli(['tenant', 'create', 'acme', ...dd])).code).toBe(0);
    const tenants = async () => (await core.call('GET', '/_emu/tenants', undefined, { key: core.admin })).json.data;
    const before = await tenants();

    for (const argv of [
      ['tenant', 'create', 'Bad_Name'],
      ['tenant', 'limits', 'acme', '--max-memory-mb', '0'],
      ['tenant', 'limits', 'acme', '--max-memory-mb', 'abc'],
      ['frobnicate'],
    ]) {
      const r = await cli([...argv, ...dd]);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr.length).toBeGreaterThan(0);
    }
    const dup = await cli(['tenant', 'create', 'acme', ...dd]);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/already exists/);
    const ghost = await cli(['key', 'create', '--tenant', 'ghost', ...dd]);
    expect(ghost.code).toBe(1);
    expect(ghost.stdout).toBe('');
    expect(await tenants()).toEqual(before);
  });
});

describe('two cores, one data dir', () => {
  it('a second startEmulator on a data dir in use rejects with DataDirInUseError naming the pid and --data-dir; the first keeps running', async () => {
    const dir = await newDir();
    const first = await startTestCore({ dataDir: dir });
    cores.push(first);
    const lockBefore = await readFile(join(dir, 'emulator.json'), 'utf8');

    const err = await startEmulator({ dataDir: dir, port: 0 }).then(
      async (emu) => {
        await emu.stop();
        return null;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DataDirInUseError);
    const msg = (err as Error).message;
    expect(msg).toContain(`pid ${process.pid}`);
    expect(msg).toContain('--data-dir');
    expect(msg).toContain(dir);

    // the refused start left the first core's lock and service alone
    expect(await readFile(join(dir, 'emulator.json'), 'utf8')).toBe(lockBefore);
    expect((await first.call('GET', '/v1/snippets')).status).toBe(200);

    // `serve` on it fails the same way, exit 1, a clear message
    const serve = await cli(['serve', '--port', '0', '--data-dir', dir]);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain(`pid ${process.pid}`);
    expect(serve.stderr).toContain('--data-dir');
    expect(serve.stderr).not.toMatch(/at .*\.ts:\d+/);
    expect(await readFile(join(dir, 'emulator.json'), 'utf8')).toBe(lockBefore);
  });
});

describe('serve', () => {
  it('prints the URL with ?token=, the local API key; serves until the signal, then closes the port and removes emulator.json', async () => {
    const dir = await newDir();
    let signal!: (s: string) => void;
    const { io, out } = captureIO(dir, () => new Promise<string>((res) => (signal = res)));
    const done = main(['serve', '--port', '0', '--spares', 'plain', '--data-dir', dir], io);

    const deadline = Date.now() + 15_000;
    while (!out.stdout.includes('Press Ctrl+C') && Date.now() < deadline) {
      const early = await Promise.race([done.then((c) => c), new Promise((r) => setTimeout(() => r(null), 20))]);
      if (early !== null) throw new Error(`serve exited with ${early}: ${out.stderr}`);
    }
    expect(out.stdout).toContain('Press Ctrl+C');
    const gui = /(http:\/\/127\.0\.0\.1:(\d+))\/\?token=(emu_[0-9A-Za-z]{40})/.exec(out.stdout);
    expect(gui, out.stdout).not.toBeNull();
    const [, url, port, token] = gui!;
    const key = /\b(svc_[0-9A-Za-z]{40})\b/.exec(out.stdout)?.[1];
    expect(key, out.stdout).toBeDefined();
    expect(out.stdout).toContain(`${url}/v1`);

    const lock = JSON.parse(await readFile(join(dir, 'emulator.json'), 'utf8'));
    expect(lock).toMatchObject({ port: Number(port), pid: process.pid, admin_token: token });

    const health = await request(url!, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect((await request(url!, 'GET', '/v1/snippets', undefined, { key })).status).toBe(200);
    expect((await request(url!, 'GET', '/_emu/info', undefined, { key: token })).status).toBe(200);
    const page = await request(url!, 'GET', `/?token=${token}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);

    signal('SIGTERM');
    expect(await done).toBe(0);
    expect(out.stderr).toContain('SIGTERM');
    expect(existsSync(join(dir, 'emulator.json'))).toBe(false);
    const after = await fetch(`${url}/healthz`).then(
      (r) => `answered ${r.status}`,
      (e: Error & { cause?: { code?: string } }) => e.cause?.code ?? String(e),
    );
    expect(after).toBe('ECONNREFUSED');

    // a second serve on the same data dir shows the same key again, not a new one
    const again = captureIO(dir, () => Promise.resolve('SIGINT'));
    expect(await main(['serve', '--port', '0', '--spares', 'plain', '--json', '--data-dir', dir], again.io)).toBe(0);
    const j = JSON.parse(again.out.stdout.trim().split('\n')[0]!);
    expect(j).toMatchObject({ api_key: key, tenant: 'local', first_start: false });
    expect(j.gui_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=emu_[0-9A-Za-z]{40}$/);
    expect(j.gui_url.startsWith(j.url)).toBe(true);
    expect(existsSync(join(dir, 'emulator.json'))).toBe(false);
  }, 30_000);

  it('a relative --data-dir resolves against io.cwd', async () => {
    const cwd = await newDir();
    await mkdir(join(cwd, 'state'));
    await mkdir(join(cwd, '.svc-emu'));
    const r = await cli(['tenant', 'create', 'rel', '--data-dir', 'state'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(cwd, 'state', 'db.json'))).toBe(true);
    const def = await cli(['tenant', 'create', 'def'], cwd);
    expect(def.code, def.stderr).toBe(0);
    expect(existsSync(join(cwd, '.svc-emu', 'db.json'))).toBe(true);
  });

  it('an operator command on a data dir that does not exist fails (1) without creating it', async () => {
    const cwd = await newDir();
    const r = await cli(['tenant', 'create', 'acme', '--data-dir', 'typo'], cwd);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('does not exist');
    expect(r.stderr).toContain('--data-dir');
    expect(existsSync(join(cwd, 'typo'))).toBe(false);
  });
});
