import { describe, expect, it } from 'vitest';
import type { EmuEvent } from '../../contract/schemas/events';
import { EventBus } from '../../server/events/bus';
import { jsonLogger } from '../../server/logger';
import {
  clock,
  codeFrame,
  followTerminalLines,
  prettyLogger,
  terminalLine,
  terminalLogging,
  useColour,
  withoutLocation,
} from '../../server/terminal-lines';

const ev = (type: EmuEvent['type'], data: unknown): EmuEvent => ({ id: 'b00-1', type, at: '2026-11-27T10:00:00.000Z', data }) as EmuEvent;
const folder = (over: Record<string, unknown>) => ({
  folder: 'snippets/hello',
  snippet: 'hello',
  state: 'loaded',
  runtime: 'bun',
  version: 3,
  deployed: ['dev'],
  error: null,
  notes: [],
  skipped: [],
  updated_at: '2026-11-27T10:00:00.000Z',
  ...over,
});
const inv = (over: Record<string, unknown>) => ({
  id: 'inv_abc',
  tenant_id: 'ten_1',
  snippet: 'hello',
  version: 2,
  env: 'prod',
  mode: 'sync',
  status: 'failed',
  outcome: 'handler_error',
  error: { code: 'handler_error', message: 'boom\n    at handler (index.ts:1:1)' },
  duration_ms: 12.4,
  ...over,
});
const ESC = '\x1b[';
const plain = { colour: false };

describe('terminal lines', () => {
  it('compiled: snippet, version, runtime and how long it took', () => {
    const line = terminalLine(ev('workspace.folder', folder({ load_ms: 12.34 })), plain)!;
    expect(line).toMatchObject({ level: 'info', msg: 'compiled', fields: { snippet: 'hello', version: 3, runtime: 'bun', ms: 12.34 } });
    expect(line.text).toBe('✓ compiled  hello v3 (bun, 12 ms)  → dev');
    expect(terminalLine(ev('workspace.folder', folder({ state: 'unchanged' })), plain)).toBeNull();
  });

  it('deployed: env → version', () => {
    const line = terminalLine(
      ev('deployment.changed', { snippet_id: 'snp_1', snippet: 'hello', tenant_id: 't', env: 'dev', version: 3 }),
      plain,
    )!;
    expect(line.text).toBe('→ deployed  hello  dev → v3');
  });

  it('a compile error names file:line:col and shows the offending line with a caret under the column', () => {
    const src = 'def handler(input):\n    x = 1\n    return {"ok": 2\n\n';
    const status = folder({
      snippet: 'broken',
      folder: 'snippets/broken',
      state: 'error',
      runtime: 'python',
      version: 1,
      error: { message: "'{' was never closed", file: 'main.py', line: 3, column: 12 },
    });
    const asked: string[] = [];
    const line = terminalLine(ev('workspace.folder', status), {
      colour: false,
      readSource: (f, file) => (asked.push(`${f}/${file}`), src),
    })!;
    expect(asked).toEqual(['snippets/broken/main.py']);
    expect(line.level).toBe('error');
    expect(line.fields).toMatchObject({ file: 'main.py', line: 3, column: 12, serving: 1 });
    expect(line.text.split('\n')).toEqual([
      "✗ compile error  snippets/broken/main.py:3:12  '{' was never closed  (v1 keeps serving)",
      '   2 |     x = 1',
      '>  3 |     return {"ok": 2',
      '     |            ^',
      '   4 | ',
    ]);
    // The caret is under column 12 of line 3: the `{`.
    expect('    return {"ok": 2'[11]).toBe('{');
  });

  it('a message that repeats its location (Python: "main.py:2:12: SyntaxError: …") says it once', () => {
    const line = terminalLine(
      ev(
        'workspace.folder',
        folder({
          state: 'error',
          version: null,
          error: { message: "main.py:2:12: SyntaxError: '{' was never closed", file: 'main.py', line: 2, column: 12 },
        }),
      ),
      plain,
    )!;
    expect(line.text).toBe("✗ compile error  snippets/hello/main.py:2:12  SyntaxError: '{' was never closed  (nothing serving yet)");
    expect(withoutLocation('index.ts: no handler', 'main.py')).toBe('index.ts: no handler');
  });

  it('a code frame keeps tabs under tabs, and finds the first non-blank character without a column', () => {
    expect(codeFrame('a\n\tb = (\nc', 2, 4).split('\n')[2]).toBe('     | \t  ^');
    expect(codeFrame('  oops', 1, undefined).split('\n')).toEqual(['>  1 |   oops', '     |   ^']);
    expect(codeFrame('one line', 5, 1)).toBe('');
  });

  it('a compile error without a file (a version that failed to start) is one line', () => {
    const line = terminalLine(
      ev('workspace.folder', folder({ state: 'error', error: { message: 'version 3 is deployed but failed to start: x' } })),
      { colour: false, readSource: () => 'never read' },
    )!;
    expect(line.text).toBe('✗ compile error  snippets/hello  version 3 is deployed but failed to start: x  (v3 keeps serving)');
  });

  it('run failed: snippet, outcome, the first line of the message, invocation id; successes only at debug', () => {
    const failed = terminalLine(ev('invocation.finished', inv({})), plain)!;
    expect(failed).toMatchObject({ level: 'warn', msg: 'run_failed', fields: { invocation_id: 'inv_abc', outcome: 'handler_error' } });
    expect(failed.text).toBe('✗ run failed  hello v2 (prod)  handler_error: boom after 12 ms  inv_abc');
    const ok = terminalLine(ev('invocation.finished', inv({ status: 'succeeded', outcome: 'success', error: null })), plain)!;
    expect(ok.level).toBe('debug');
    expect(terminalLine(ev('invocation.started', inv({ status: 'running', outcome: null })), plain)).toBeNull();
  });

  it('callback failed: url, status, attempt; delivered says nothing', () => {
    const data = { invocation_id: 'inv_abc', url: 'http://127.0.0.1:9/hook', attempt: 2, status_code: 500, error: null, state: 'pending' };
    const retry = terminalLine(ev('callback.attempt', data), plain)!;
    expect(retry.level).toBe('warn');
    expect(retry.text).toBe('! callback failed  http://127.0.0.1:9/hook  answered 500 (attempt 2, will retry)  inv_abc');
    const gaveUp = terminalLine(
      ev('callback.attempt', { ...data, status_code: null, error: 'connection refused', state: 'failed' }),
      plain,
    )!;
    expect(gaveUp.level).toBe('error');
    expect(gaveUp.text).toContain('connection refused (attempt 2, gave up)');
    expect(terminalLine(ev('callback.attempt', { ...data, status_code: 200, state: 'delivered' }), plain)).toBeNull();
  });

  it('colour on a TTY unless NO_COLOR; FORCE_COLOR forces it; none otherwise', () => {
    expect(useColour({}, true)).toBe(true);
    expect(useColour({}, false)).toBe(false);
    expect(useColour({ NO_COLOR: '1' }, true)).toBe(false);
    expect(useColour({ FORCE_COLOR: '1' }, false)).toBe(true);
    expect(useColour({ FORCE_COLOR: '0' }, true)).toBe(false);
    expect(useColour({ NO_COLOR: '1', FORCE_COLOR: '1' }, true)).toBe(false);
    const coloured = terminalLine(ev('deployment.changed', { snippet_id: 's', snippet: 'x', tenant_id: 't', env: 'dev', version: 1 }), {
      colour: true,
    })!;
    expect(coloured.text).toContain(ESC);
  });

  it('follows a bus: time-prefixed human lines at the level asked for, JSON lines in json format, and unsubscribes', () => {
    const at = new Date(2026, 10, 27, 10, 1, 2);
    const bus = new EventBus(() => at);
    const lines: string[] = [];
    // An event from before the subscription (the workspace's first compiles at start) is replayed.
    bus.publish('deployment.changed', { snippet_id: 's', snippet: 'early', tenant_id: 't', env: 'dev', version: 1 });
    const stop = followTerminalLines(bus, {
      format: 'pretty',
      level: 'info',
      colour: false,
      write: (t) => lines.push(t),
      replayFrom: `${bus.boot}-0`,
    });
    bus.publish('invocation.finished', inv({ status: 'succeeded', outcome: 'success', error: null }) as never);
    bus.publish('deployment.changed', { snippet_id: 's', snippet: 'hello', tenant_id: 't', env: 'prod', version: 2 });
    // Each line carries its event's own time (a replayed one too), as HH:MM:SS local time.
    expect(lines).toEqual([`${clock(at)} → deployed  early  dev → v1\n`, `${clock(at)} → deployed  hello  prod → v2\n`]);
    stop();
    expect(bus.listenerCount).toBe(0);

    const json: string[] = [];
    const stopJson = followTerminalLines(bus, {
      format: 'json',
      level: 'debug',
      colour: true,
      write: () => {},
      jsonLog: jsonLogger((l) => json.push(l), { level: 'debug' }),
    });
    bus.publish('invocation.finished', inv({}) as never);
    stopJson();
    const parsed = JSON.parse(json[0]!);
    expect(parsed).toMatchObject({ level: 'warn', msg: 'run_failed', invocation_id: 'inv_abc', outcome: 'handler_error' });
    expect(json[0]).not.toContain(ESC);
  });

  it('the pretty logger: requests only at debug, the core’s info messages only at debug, warnings always', () => {
    const out: string[] = [];
    const now = () => new Date(2026, 10, 27, 10, 1, 2);
    const info = prettyLogger({ level: 'info', colour: false, write: (t) => out.push(t), now });
    info.log('debug', 'request', { method: 'GET', route: '/v1/snippets', status: 200, ms: 1.5 });
    info.log('info', 'emulator started', { url: 'x' });
    info.log('warn', 'store sweep failed', { error: 'disk full' });
    expect(out).toEqual(['10:01:02 warn  store sweep failed  error=disk full\n']);
    const debug = prettyLogger({ level: 'debug', colour: false, write: (t) => out.push(t), now });
    debug.log('debug', 'request', { method: 'GET', route: '/v1/snippets', status: 200, ms: 1.5 });
    expect(out.at(-1)).toBe('10:01:02 GET /v1/snippets 200 1.5 ms\n');
    // redacted like the JSON logs
    debug.log('warn', 'oops', { key: 'svc_0123456789abcdefghij' });
    expect(out.at(-1)).not.toContain('0123456789abcdefghij');
  });

  it('terminalLogging (serve and the desktop app): checks its flags, picks the logger, follows a bus from its first event', () => {
    const base = { env: {}, isTTY: false, write: () => {} };
    expect(() => terminalLogging({ ...base, level: 'loud' })).toThrow("--log-level: error, warn, info, debug, not 'loud'");
    expect(() => terminalLogging({ ...base, format: 'xml' })).toThrow("--log-format: pretty or json, not 'xml'");
    expect(terminalLogging({ ...base, env: { FORCE_COLOR: '1' }, format: 'json' }).colour).toBe(false); // JSON is never coloured

    const out: string[] = [];
    const t = terminalLogging({ ...base, format: 'json', write: (l) => out.push(l) });
    t.logger.log('debug', 'request', {});
    t.logger.log('warn', 'store sweep failed', {});
    const bus = new EventBus(() => new Date());
    bus.publish('deployment.changed', { snippet_id: 's', snippet: 'early', tenant_id: 't', env: 'dev', version: 1 });
    const stop = t.follow(bus, null);
    stop();
    expect(out.map((l) => JSON.parse(l).msg)).toEqual(['store sweep failed', 'deployed']);
    expect(bus.listenerCount).toBe(0);
  });

  it('a workspace save is one line (compiled, naming where it went); an API deploy is its own line', () => {
    const bus = new EventBus(() => new Date());
    const lines: string[] = [];
    const stop = followTerminalLines(bus, { format: 'pretty', level: 'info', colour: false, write: (t) => lines.push(t.slice(9)) });
    const ref = { snippet_id: 'snp_1', snippet: 'hello', tenant_id: 't' };
    bus.publish('version.created', { ...ref, version: 3, source: 'workspace' });
    bus.publish('deployment.changed', { ...ref, env: 'dev', version: 3 });
    bus.publish('workspace.folder', folder({ load_ms: 9, deployed: ['dev'] }) as never);
    bus.publish('deployment.changed', { ...ref, env: 'prod', version: 3 }); // later, through the API
    stop();
    expect(lines).toEqual(['✓ compiled  hello v3 (bun, 9 ms)  → dev\n', '→ deployed  hello  prod → v3\n']);
  });
});
