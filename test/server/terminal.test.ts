// The Terminal page's channel: real shells on real ptys (@lydell/node-pty), driven over HTTP on a test
// core: open, type, read the SSE output (scrollback first, then live), resize, exit, kill, the limits,
// the disabled core, bad input, and every shell killed when the core stops.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, realpath, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseSse } from '../../contract/sse';
import { startTestCore, tempDir, type Res, type TestCore } from '../helpers/core';
import { isLoopbackHost, terminalAccess } from '../../server/terminal/setup';

let core: TestCore;
let workspace: string;
const admin = () => ({ key: core.admin });

const limactlOnPath = (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, 'limactl')));

function expectProblem(r: Res, status: number, code: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get('content-type')).toContain('application/problem+json');
  expect(r.json.code, r.text).toBe(code);
}

/** Is `pid` a live process? (A zombie waiting for a parent that never reaps counts as dead.) */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** The direct children of `pid` (Linux /proc). */
function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

interface TermEvent {
  id: number | null;
  event: string;
  data: any;
}

/** One reader of a terminal's SSE output: every event parsed, the output text accumulated. */
class Reader {
  readonly events: TermEvent[] = [];
  text = '';
  ended = false;
  private readonly ac = new AbortController();
  private constructor(readonly res: Response) {}

  static async open(c: TestCore, id: string): Promise<Reader> {
    const ac = new AbortController();
    const res = await c.client.fetchPath('GET', `/_emu/terminals/${id}/output`, { auth: 'admin', signal: ac.signal });
    expect(res.status, await (res.ok ? Promise.resolve('') : res.text())).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const r = new Reader(res);
    r.ac.signal.addEventListener('abort', () => ac.abort());
    void r.pump();
    return r;
  }

  private async pump(): Promise<void> {
    try {
      for await (const frame of parseSse(this.res.body!)) {
        const e = { id: frame.id === undefined ? null : Number(frame.id), event: frame.event, data: JSON.parse(frame.data) };
        this.events.push(e);
        if (e.event === 'output') this.text += e.data.data;
      }
    } catch {
      /* aborted */
    }
    this.ended = true;
  }

  /** Waits until the output matches `re`; on a timeout says what arrived instead. */
  async until(re: RegExp, timeout = 10_000): Promise<RegExpMatchArray> {
    let m: RegExpMatchArray | null = null;
    await vi.waitFor(
      () => {
        m = re.exec(this.text);
        if (!m) throw new Error(`no ${re} in the output so far: ${JSON.stringify(this.text.slice(-1500))}`);
      },
      { timeout, interval: 20 },
    );
    return m!;
  }

  async exit(timeout = 10_000): Promise<TermEvent> {
    await vi.waitFor(
      () => {
        if (!this.events.some((e) => e.event === 'exit'))
          throw new Error(`no exit event yet; output: ${JSON.stringify(this.text.slice(-500))}`);
      },
      { timeout, interval: 20 },
    );
    return this.events.find((e) => e.event === 'exit')!;
  }

  close(): void {
    this.ac.abort();
  }
}

async function open(c: TestCore = core, body: Record<string, unknown> = {}) {
  const r = await c.call('POST', '/_emu/terminals', body, { key: c.admin });
  expect(r.status, r.text).toBe(201);
  return r.json as { id: string; pid: number; cwd: string; shell: string; cols: number; rows: number; target: string; status: string };
}
const type = async (id: string, data: string, c: TestCore = core) => {
  const r = await c.call('POST', `/_emu/terminals/${id}/input`, { data }, { key: c.admin });
  expect(r.status, r.text).toBe(204);
};

// The shells get a HOME of their own: the test neither depends on this machine's ~/.bashrc (nor its
// start-up time) nor leaves it anything (a tool's lock file from a shell killed mid-start-up).
const realHome = process.env.HOME;
let home: string;

beforeAll(async () => {
  home = await tempDir('svc-emu-term-home-');
  process.env.HOME = home;
  workspace = await realpath(await tempDir('svc-emu-term-ws-'));
  await mkdir(join(workspace, 'snippets'));
  core = await startTestCore({ workspace });
}, 30_000);

// A failed test leaves no terminal behind to skew the next one (the 8-terminal limit).
afterEach(async () => {
  const list = await core.call('GET', '/_emu/terminals', undefined, admin());
  for (const t of list.json.data as { id: string }[]) await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
});

afterAll(async () => {
  await core?.stop();
  process.env.HOME = realHome;
  await rm(workspace, { recursive: true, force: true });
  await rm(home, { recursive: true, force: true });
});

describe('a workspace shell over HTTP', () => {
  it('runs what is typed, in the workspace, with SVC_EMU_URL and SVC_EMU_DATA_DIR pointing at this core', async () => {
    const t = await open(core, { cols: 100, rows: 30 });
    expect(t).toMatchObject({ target: 'workspace', cwd: workspace, cols: 100, rows: 30, status: 'running', exit_code: null, signal: null });
    expect(t.id).toMatch(/^term_/);
    expect(t.shell).toMatch(/^\/.*sh$/);
    expect(alive(t.pid)).toBe(true);
    const out = await Reader.open(core, t.id);
    // The typed line is echoed as `$((6*7))-marker`: only the shell's arithmetic makes `42-marker`.
    await type(t.id, 'echo $((6*7))-marker\n');
    await out.until(/42-marker/);
    await type(t.id, 'echo "cwd=$(pwd)"; echo "url=$SVC_EMU_URL"; echo "data=$SVC_EMU_DATA_DIR"; echo "term=$TERM"\n');
    // Anchored at a line start: the echoed command line holds `cwd=$(pwd)`, `term=$TERM"` and so on.
    expect((await out.until(/[\r\n]cwd=(\S+)\r?\n/))[1]).toBe(workspace);
    expect((await out.until(/[\r\n]url=(\S+)\r?\n/))[1]).toBe(core.url);
    expect((await out.until(/[\r\n]data=(\S+)\r?\n/))[1]).toBe(await realpath(core.dataDir));
    expect((await out.until(/[\r\n]term=(\S+)\r?\n/))[1]).toBe('xterm-256color');

    // Listed, and readable one by one.
    const list = await core.call('GET', '/_emu/terminals', undefined, admin());
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(t.id);
    expect(list.json.max_live).toBe(8);
    expect(list.json.targets.workspace).toEqual({ available: true, reason: null });
    expect((await core.call('GET', `/_emu/terminals/${t.id}`, undefined, admin())).json).toMatchObject({
      id: t.id,
      pid: t.pid,
      status: 'running',
    });
    out.close();
    expect((await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin())).status).toBe(204);
  });

  it('a resize reaches the pty (stty size prints the new rows and columns)', async () => {
    const t = await open();
    const out = await Reader.open(core, t.id);
    await type(t.id, 'stty size | sed "s/^/size=/"\n');
    expect((await out.until(/size=(\d+ \d+)/))[1]).toBe('24 80'); // the defaults
    const r = await core.call('POST', `/_emu/terminals/${t.id}/resize`, { cols: 123, rows: 41 }, admin());
    expect(r.status, r.text).toBe(204);
    await type(t.id, 'stty size | sed "s/^/resized=/"\n');
    expect((await out.until(/resized=(\d+ \d+)/))[1]).toBe('41 123');
    expect((await core.call('GET', `/_emu/terminals/${t.id}`, undefined, admin())).json).toMatchObject({ cols: 123, rows: 41 });
    out.close();
    await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
  });

  it('a second reader gets the scrollback first, then the live output, like the first', async () => {
    const t = await open();
    const first = await Reader.open(core, t.id);
    await type(t.id, 'echo $((6*7))-before\n');
    await first.until(/42-before/);
    const second = await Reader.open(core, t.id);
    await second.until(/42-before/);
    expect(second.events[0]!.event).toBe('output'); // the replay comes as the first event
    expect(second.events[0]!.data.data).toContain('42-before');
    await type(t.id, 'echo $((7*8))-after\n');
    await first.until(/56-after/);
    await second.until(/56-after/);
    // Both saw the same text from the moment the second joined.
    expect(first.text.endsWith(second.text.slice(second.text.indexOf('42-before')))).toBe(true);
    first.close();
    second.close();
    await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
  });

  it('multi-byte characters split across pty reads arrive whole (a streaming UTF-8 decoder)', async () => {
    const t = await open();
    const out = await Reader.open(core, t.id);
    // 30 000 × '€' (3 bytes each) with a marker after: far more than one pty read, so reads end mid-character.
    await type(t.id, `printf 'E%.0s' $(seq 1 30000) | sed 's/E/\\xe2\\x82\\xac/g'; echo; echo done-$((1+1))\n`);
    await out.until(/done-2/, 20_000);
    expect(out.text).not.toContain('\uFFFD');
    expect(out.text.split('€').length - 1).toBeGreaterThanOrEqual(30_000);
    out.close();
    await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
  });

  it('`exit` ends it: an exit event with code 0; it stays listed as exited until deleted', async () => {
    const t = await open();
    const out = await Reader.open(core, t.id);
    await type(t.id, 'echo $((6*7))-bye; exit\n');
    await out.until(/42-bye/);
    const exit = await out.exit();
    expect(exit.data).toEqual({ exit_code: 0, signal: null });
    await vi.waitFor(() => expect(out.ended).toBe(true)); // the stream ends with the exit
    const view = (await core.call('GET', `/_emu/terminals/${t.id}`, undefined, admin())).json;
    expect(view).toMatchObject({ status: 'exited', exit_code: 0, signal: null });
    expect(view.exited_at).toEqual(expect.any(String));
    expect(alive(t.pid)).toBe(false);

    // A late reader gets the scrollback and the exit at once.
    const late = await Reader.open(core, t.id);
    await late.until(/42-bye/);
    expect((await late.exit()).data).toEqual({ exit_code: 0, signal: null });
    await vi.waitFor(() => expect(late.ended).toBe(true));

    expectProblem(await core.call('POST', `/_emu/terminals/${t.id}/input`, { data: 'ls\n' }, admin()), 409, 'terminal_exited');
    expectProblem(await core.call('POST', `/_emu/terminals/${t.id}/resize`, { cols: 10, rows: 10 }, admin()), 409, 'terminal_exited');
    expect((await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin())).status).toBe(204);
    expectProblem(await core.call('GET', `/_emu/terminals/${t.id}`, undefined, admin()), 404, 'not_found');
    expect((await core.call('GET', '/_emu/terminals', undefined, admin())).json.data.map((x: { id: string }) => x.id)).not.toContain(t.id);
  });

  it('DELETE kills a shell that is running `sleep 100`, and the sleep with it', async () => {
    const t = await open();
    const out = await Reader.open(core, t.id);
    await type(t.id, 'sleep 100\n');
    let sleep = 0;
    await vi.waitFor(
      () => {
        sleep = children(t.pid).find((c) => comm(c) === 'sleep') ?? 0;
        expect(sleep, `children of ${t.pid}: ${children(t.pid).map(comm)}`).toBeGreaterThan(0);
      },
      { timeout: 10_000, interval: 20 },
    );
    const started = Date.now();
    const del = await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
    expect(del.status, del.text).toBe(204);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(alive(t.pid)).toBe(false);
    await vi.waitFor(() => expect(alive(sleep), `sleep ${sleep} still alive`).toBe(false), { timeout: 5000, interval: 20 });
    const exit = await out.exit();
    expect(exit.data).toEqual({ exit_code: null, signal: expect.stringMatching(/^SIG(HUP|KILL)$/) }); // the hang-up (or the kill after it)
    expectProblem(await core.call('GET', `/_emu/terminals/${t.id}`, undefined, admin()), 404, 'not_found');
  });
});

describe('refusals', () => {
  it.skipIf(limactlOnPath)('a vm terminal is refused here (no limactl), saying why', async () => {
    const r = await core.call('POST', '/_emu/terminals', { target: 'vm' }, admin());
    expectProblem(r, 409, 'terminal_target_unavailable');
    expect(r.json.detail).toContain('limactl is not on PATH');
    if (process.platform === 'linux') expect(r.json.detail).toContain('limits are enforced on this host; the VM is only used on macOS');
    const list = (await core.call('GET', '/_emu/terminals', undefined, admin())).json;
    expect(list.targets.vm.available).toBe(false);
    expect(r.json.detail).toContain(list.targets.vm.reason);
  });

  it('with limactl on PATH, a vm terminal runs `limactl shell svc-emu` on the pty', async () => {
    // A stand-in limactl that says how it was called, then is a shell (the VM's, as far as the test knows).
    const bin = await tempDir('svc-emu-term-bin-');
    await writeFile(join(bin, 'limactl'), '#!/bin/sh\necho "fake-limactl: $*"\nexec /bin/sh\n', { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      expect((await core.call('GET', '/_emu/terminals', undefined, admin())).json.targets.vm).toEqual({ available: true, reason: null });
      const t = await open(core, { target: 'vm' });
      expect(t).toMatchObject({ target: 'vm', shell: 'limactl shell svc-emu', cwd: workspace });
      const out = await Reader.open(core, t.id);
      await out.until(/fake-limactl: shell svc-emu/);
      await type(t.id, 'echo $((6*7))-vm\n');
      await out.until(/42-vm/);
      out.close();
    } finally {
      process.env.PATH = path;
      await rm(bin, { recursive: true, force: true });
    }
  });

  it('bad input is a problem with a stable code, never a crash', async () => {
    const t = await open();
    const bad: [string, string, unknown, number, string, string?][] = [
      ['POST', '/_emu/terminals', { target: 'mars' }, 422, 'validation_failed', 'body.target'],
      ['POST', '/_emu/terminals', { cols: 0 }, 422, 'validation_failed', 'body.cols'],
      ['POST', '/_emu/terminals', { rows: 1001 }, 422, 'validation_failed', 'body.rows'],
      ['POST', '/_emu/terminals', { shell: '/bin/zsh' }, 422, 'validation_failed'],
      ['POST', `/_emu/terminals/${t.id}/input`, { data: 5 }, 422, 'validation_failed', 'body.data'],
      ['POST', `/_emu/terminals/${t.id}/input`, {}, 422, 'validation_failed', 'body.data'],
      ['POST', `/_emu/terminals/${t.id}/input`, { data: 'x'.repeat(64 * 1024 + 1) }, 422, 'validation_failed', 'body.data'],
      ['POST', `/_emu/terminals/${t.id}/resize`, { cols: 80 }, 422, 'validation_failed', 'body.rows'],
      ['POST', `/_emu/terminals/${t.id}/resize`, { cols: 1.5, rows: 10 }, 422, 'validation_failed', 'body.cols'],
      ['POST', `/_emu/terminals/${t.id}/resize`, { cols: 'wide', rows: 10 }, 422, 'validation_failed', 'body.cols'],
      ['POST', '/_emu/terminals/term_nope/input', { data: 'ls\n' }, 404, 'not_found'],
      ['POST', '/_emu/terminals/term_nope/resize', { cols: 80, rows: 24 }, 404, 'not_found'],
      ['GET', '/_emu/terminals/term_nope/output', undefined, 404, 'not_found'],
      ['GET', '/_emu/terminals/term_nope', undefined, 404, 'not_found'],
      ['DELETE', '/_emu/terminals/term_nope', undefined, 404, 'not_found'],
    ];
    for (const [method, path, body, status, code, location] of bad) {
      const r = await core.call(method, path, body, admin());
      expectProblem(r, status, code);
      if (location)
        expect(
          r.json.errors.map((e: { location: string }) => e.location),
          `${method} ${path}`,
        ).toContain(location);
    }
    // Not JSON, and no token.
    expectProblem(
      await core.call('POST', `/_emu/terminals/${t.id}/input`, undefined, {
        ...admin(),
        raw: 'ls',
        headers: { 'content-type': 'text/plain' },
      }),
      415,
      'unsupported_media_type',
    );
    expectProblem(
      await core.call('POST', `/_emu/terminals/${t.id}/input`, undefined, {
        ...admin(),
        raw: '{"data":',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'malformed_json',
    );
    expectProblem(await core.call('GET', '/_emu/terminals'), 401, 'unauthenticated');
    expectProblem(await core.call('POST', '/_emu/terminals', {}, { key: core.key }), 401, 'unauthenticated'); // a tenant key is not the admin token
    // The shell is unharmed.
    const out = await Reader.open(core, t.id);
    await type(t.id, 'echo $((6*7))-still-here\n');
    await out.until(/42-still-here/);
    out.close();
    await core.call('DELETE', `/_emu/terminals/${t.id}`, undefined, admin());
  });

  it('at most 8 run at once: the ninth is refused until one is closed', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await open()).id);
    const ninth = await core.call('POST', '/_emu/terminals', {}, admin());
    expectProblem(ninth, 409, 'too_many_terminals');
    expect(ninth.json.detail).toContain('8 terminals');
    expect((await core.call('DELETE', `/_emu/terminals/${ids.pop()}`, undefined, admin())).status).toBe(204);
    ids.push((await open()).id);
    for (const id of ids) expect((await core.call('DELETE', `/_emu/terminals/${id}`, undefined, admin())).status).toBe(204);
  });
});

describe('a core without terminals', () => {
  it('--no-terminal: every terminal route answers 403 terminal_disabled, naming the flag', async () => {
    const off = await startTestCore({ config: { terminal: false } });
    try {
      const routes: [string, string, unknown?][] = [
        ['GET', '/_emu/terminals'],
        ['POST', '/_emu/terminals', {}],
        ['GET', '/_emu/terminals/term_x'],
        ['GET', '/_emu/terminals/term_x/output'],
        ['POST', '/_emu/terminals/term_x/input', { data: 'ls\n' }],
        ['POST', '/_emu/terminals/term_x/resize', { cols: 80, rows: 24 }],
        ['DELETE', '/_emu/terminals/term_x'],
      ];
      for (const [method, path, body] of routes) {
        const r = await off.call(method, path, body, { key: off.admin });
        expectProblem(r, 403, 'terminal_disabled');
        expect(r.json.detail, `${method} ${path}`).toContain('--no-terminal');
      }
      expectProblem(await off.call('GET', '/_emu/terminals'), 401, 'unauthenticated'); // the token is still checked first
    } finally {
      await off.stop();
    }
  });

  it('by default terminals are on for loopback only; off elsewhere, with --terminal named', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1', '[::1]', '127.0.1.1']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '192.168.1.20', 'example.com', '10.0.0.1']) expect(isLoopbackHost(host), host).toBe(false);
    const base = { workspace: null, dataDir: '/tmp/x', url: () => 'http://x', vmName: 'svc-emu' };
    expect(terminalAccess({ ...base, enabled: undefined, host: '127.0.0.1' }).sessions).not.toBeNull();
    const remote = terminalAccess({ ...base, enabled: undefined, host: '0.0.0.0' });
    expect(remote.sessions).toBeNull();
    expect(remote.disabled).toContain('--terminal');
    expect(remote.disabled).toContain('0.0.0.0');
    expect(terminalAccess({ ...base, enabled: true, host: '0.0.0.0' }).sessions).not.toBeNull(); // asked for explicitly
  });
});

describe('stopping the core', () => {
  it('kills every terminal, and what runs in them', async () => {
    const own = await startTestCore();
    let pids: number[] = [];
    try {
      const a = await open(own);
      const b = await open(own);
      const out = await Reader.open(own, b.id);
      await type(b.id, 'sleep 100\n', own);
      let sleep = 0;
      await vi.waitFor(
        () => {
          sleep = children(b.pid).find((c) => comm(c) === 'sleep') ?? 0;
          expect(sleep, `children of ${b.pid}: ${children(b.pid).map(comm)}; output: ${JSON.stringify(out.text)}`).toBeGreaterThan(0);
        },
        { timeout: 10_000, interval: 20 },
      );
      pids = [a.pid, b.pid, sleep];
      for (const pid of pids) expect(alive(pid)).toBe(true);
      await own.stop();
      expect(pids.filter((pid) => alive(pid) && pid !== sleep)).toEqual([]); // the shells: gone when stop() resolves
      await vi.waitFor(() => expect(alive(sleep), `sleep ${sleep}`).toBe(false), { timeout: 5000, interval: 20 });
      expect(out.ended || out.events.some((e) => e.event === 'exit')).toBe(true);
    } finally {
      await own.stop();
      for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
