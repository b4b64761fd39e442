// Issue 17: the terminal of `svc-emu serve` (and so of `npm start`) prints one human line per event that
// matters — compiled, deployed, a compile error with file:line:col and a code frame, a failed run, a failed
// callback — and request logs only with --log-level debug; --log-format json gives JSON lines for everything.
// A real core in this process, a real workspace, real Bun and Python.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIO } from '../../server/cli/main';
import { request, tempDir } from '../helpers/core';

const dirs: string[] = [];
const envBefore = { NO_COLOR: process.env.NO_COLOR, FORCE_COLOR: process.env.FORCE_COLOR };
beforeAll(() => {
  delete process.env.FORCE_COLOR;
  delete process.env.NO_COLOR;
});
afterAll(async () => {
  for (const [k, v] of Object.entries(envBefore)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Served {
  out: { stdout: string; stderr: string };
  url: string;
  key: string;
  ws: string;
  stop(): Promise<number>;
}
let running: Served | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});

/** Polls a condition with a deadline (no fixed sleep decides anything). */
async function until<T>(what: string, fn: () => T | undefined | false, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function serve(args: string[], files: Record<string, string>): Promise<Served> {
  const root = await tempDir('svc-emu-terminal-');
  dirs.push(root);
  const ws = join(root, 'ws');
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(ws, 'snippets', path, '..'), { recursive: true });
    await writeFile(join(ws, 'snippets', path), text);
  }
  let signal!: (s: string) => void;
  const stopped = new Promise<string>((res) => (signal = res));
  const out = { stdout: '', stderr: '' };
  const cli: CliIO = {
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    cwd: root,
    untilSignal: () => stopped,
  };
  const done = main(['serve', '--port', '0', '--spares', 'none', '--data-dir', join(root, 'data'), '--workspace', ws, ...args], cli);
  let exited: number | null = null;
  void done.then((c) => (exited = c));
  const json = args.includes('--json');
  await until('the banner', () => {
    if (exited !== null) throw new Error(`serve exited with ${String(exited)}: ${out.stderr}`);
    return json ? out.stdout.includes('\n') : out.stdout.includes('Press Ctrl+C');
  });
  const banner = json ? (JSON.parse(out.stdout.split('\n')[0]!) as { url: string; api_key: string }) : null;
  const url = banner?.url ?? /API\s+(\S+)\/v1/.exec(out.stdout)![1]!;
  const key = banner?.api_key ?? /API key\s+(svc_\S+)/.exec(out.stdout)![1]!;
  const served: Served = {
    out,
    url,
    key,
    ws,
    stop: async () => {
      signal('SIGTERM');
      return done;
    },
  };
  running = served;
  return served;
}

const GOOD_BUN = 'export default async function handler(input) {\n  return { ok: true };\n}\n';
const THROWS = 'export default async function handler() {\n  throw new Error("kaboom");\n}\n';
const BROKEN_PY = 'def handler(input):\n    total = 1\n    return {"ok": total\n';

describe('serve: the terminal lines', () => {
  it('compiled and deployed at start, a compile error with a code frame, a failed run, a failed callback; no request lines at info; no colour off a TTY', async () => {
    const s = await serve(['--callback-retry-scale', '0.001'], { 'ok/index.ts': GOOD_BUN, 'boom/index.ts': THROWS });
    const err = () => s.out.stderr;
    // The start's compiles happened before the banner: replayed from the bus.
    await until('compiled ok', () => /\d\d:\d\d:\d\d ✓ compiled {2}ok v1 \(bun, \d+(\.\d)? ms\) {2}→ dev\n/.test(err()));
    expect(err()).not.toContain('→ deployed  ok'); // said by the compiled line
    // A deploy through the API is a line of its own.
    expect((await request(s.url, 'PUT', '/v1/snippets/ok/environments/prod', { version: 1 }, { key: s.key })).status).toBe(200);
    await until('deployed ok', () => err().includes('→ deployed  ok  prod → v1'));

    // A save that does not compile: file:line:col, the line and a caret.
    await mkdir(join(s.ws, 'snippets', 'bad'), { recursive: true });
    await writeFile(join(s.ws, 'snippets', 'bad', 'main.py'), BROKEN_PY);
    const frame = await until('the compile error', () => {
      const m = /✗ compile error {2}snippets\/bad\/main\.py:(\d+)(?::(\d+))?[^\n]*\n((?: {9}.*\n)+)/.exec(err());
      return m ? { line: Number(m[1]), col: m[2], frame: m[3]! } : undefined;
    });
    expect(frame.frame).toMatch(/>\s+\d+ \|/); // the offending line is marked
    expect(frame.frame).toContain('^');
    expect(frame.frame).toMatch(/return \{"ok": total|def handler/);

    // A run that fails: snippet, outcome, message, invocation id.
    const r = await request(s.url, 'POST', '/v1/invoke/boom?env=dev', {}, { key: s.key });
    expect(r.status).toBe(500);
    const id = r.headers.get('x-invocation-id')!;
    await until('run failed', () => err().includes(`✗ run failed  boom v1 (dev)  handler_error: `) && err().includes(id));
    expect(err()).toMatch(new RegExp(`handler_error: [^\\n]*kaboom[^\\n]*${id}`));

    // A callback that is answered 500: url, status, attempt.
    const hook = `${s.url}/_emu/inbox/t?status=500`;
    const a = await request(
      s.url,
      'POST',
      '/v1/invoke/ok?env=dev',
      { callback_url: hook },
      { key: s.key, headers: { 'X-Invoke-Mode': 'async' } },
    );
    expect(a.status).toBe(202);
    await until('callback failed', () => err().includes(`! callback failed  ${hook}  answered 500 (attempt 1, will retry)`));

    // Requests are not logged at info, nor the core's own info messages; nothing is coloured off a TTY.
    expect(err()).not.toMatch(/POST \/v1\/invoke/);
    expect(err()).not.toContain('"msg"');
    expect(err()).not.toContain('\x1b[');
    expect(await s.stop()).toBe(0);
    running = null;
  }, 60_000);

  it('--log-level debug adds request lines and successful runs; FORCE_COLOR colours them', async () => {
    process.env.FORCE_COLOR = '1';
    try {
      const s = await serve(['--log-level', 'debug'], { 'ok/index.ts': GOOD_BUN });
      await until('compiled', () => s.out.stderr.includes('compiled'));
      const r = await request(s.url, 'POST', '/v1/invoke/ok?env=dev', {}, { key: s.key });
      expect(r.status).toBe(200);
      await until('the request line', () => /POST\S* \/v1\/invoke\/\{snippet\}\S* \S*200/.test(s.out.stderr));
      await until('the run line', () => s.out.stderr.includes('✓ run'));
      expect(s.out.stderr).toContain('\x1b[');
    } finally {
      delete process.env.FORCE_COLOR;
    }
  }, 60_000);

  it('--log-format json: one JSON object a line for everything, events included', async () => {
    const s = await serve(['--log-format', 'json', '--log-level', 'debug', '--json'], { 'ok/index.ts': GOOD_BUN });
    await until('compiled', () => s.out.stderr.includes('"msg":"compiled"'));
    await request(s.url, 'GET', '/v1/snippets', undefined, { key: s.key });
    await until('a request line', () => s.out.stderr.includes('"msg":"request"'));
    const lines = s.out.stderr.trim().split('\n');
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    const compiled = lines.map((l) => JSON.parse(l)).find((o) => o.msg === 'compiled');
    expect(compiled).toMatchObject({ level: 'info', snippet: 'ok', version: 1, runtime: 'bun' });
    expect(typeof compiled.ms).toBe('number');
  }, 60_000);

  it('bad values of --log-level and --log-format name the flag and the choices', async () => {
    const out = { stdout: '', stderr: '' };
    const cli: CliIO = {
      stdout: (t) => void (out.stdout += t),
      stderr: (t) => void (out.stderr += t),
      cwd: '/',
      untilSignal: () => new Promise(() => {}),
    };
    expect(await main(['serve', '--log-level', 'loud'], cli)).toBe(2);
    expect(out.stderr).toContain("--log-level: error, warn, info, debug, not 'loud'");
    expect(await main(['serve', '--log-format', 'xml'], cli)).toBe(2);
    expect(out.stderr).toContain("--log-format: pretty or json, not 'xml'");
  });
});
