/**
 * `svc-emu invoke NAME --debug [--debug-port N]` (issue 19): the CLI starts a debug run with the admin token it
 * has, follows the run's session on the live feed and says on stderr where and how to attach as soon as the
 * debugger listens, then prints the run's result as usual. Also: its flags in --help and shell completion, its
 * usage errors, and the example workspace's VS Code launch configurations agreeing with the ports and paths the
 * CLI and the executor use. In-process `main(argv, io)` against a real core; real Bun and Python runners; a real
 * WebSocket to Bun's inspector.
 */
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli, startCli, until } from '../helpers/cli';
import { InspectorSession } from '../helpers/inspector-client';
import { VSCODE_DEBUG_PORTS } from '../../server/cli/debug';
import { DEFAULT_BUNDLE_DEST } from '../../executor/sandbox/bwrap';

const dirs: string[] = [];

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
const savedEnv = { ...process.env };
let core: TestCore;
let dd: string[];

const GATED = `import { store } from "@svc/store";
export default async function handler(input) {
  while (!(await store.get("go"))) await new Promise((r) => setTimeout(r, 20));
  return { hello: input.name ?? "nobody" };
}
`;

beforeAll(async () => {
  const runtime = await tempDir('svc-emu-cores-');
  dirs.push(runtime);
  process.env.SVC_EMU_RUNTIME_DIR = runtime;
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN']) delete process.env[k];
  core = await startTestCore({ config: { coresDir: runtime } });
  dd = ['--data-dir', core.dataDir];
  for (const [name, runtime, code] of [
    ['gated', 'bun', GATED],
    ['py', 'python', 'def handler(input):\n    return {"ok": True}\n'],
  ] as const) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
    expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code, timeout_ms: 1000 })).status).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  await core?.stop();
  process.env = savedEnv;
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('flags', () => {
  it('--help and shell completion know --debug and --debug-port', async () => {
    const help = await runCli(['--help']);
    expect(help.stdout).toMatch(/svc-emu invoke NAME[\s\S]*\[--debug \[--debug-port N\]\]/);
    const bash = await runCli(['completion', 'bash']);
    expect(bash.stdout).toContain('--debug');
    expect(bash.stdout).toContain('--debug-port');
    expect(bash.stdout).toContain(`${VSCODE_DEBUG_PORTS.bun} ${VSCODE_DEBUG_PORTS.python}`);
  });

  it('usage errors say what to fix, before anything runs', async () => {
    const count = async () => (await core.call('GET', '/v1/invocations?snippet=gated&limit=100')).json.data.length as number;
    const before = await count();
    const noDebug = await runCli(['invoke', 'gated', '--debug-port', '9229', ...dd]);
    expect(noDebug.code).toBe(2);
    expect(noDebug.stderr).toContain('--debug-port N needs --debug');
    const low = await runCli(['invoke', 'gated', '--debug', '--debug-port', '80', ...dd]);
    expect(low.code).toBe(2);
    expect(low.stderr).toMatch(/--debug-port: a port from 1024 to 65535 .*not '80'/);
    expect(await count()).toBe(before);
  });
});

describe('invoke --debug', () => {
  it('Bun: prints where to attach as soon as the inspector listens, then the result; the session follows the debugger', async () => {
    const run = startCli(['invoke', 'gated', '--debug', '--data', '{"name":"Ada"}', ...dd]);
    const url = await until(() => /waits for a debugger at (ws:\/\/127\.0\.0\.1:\d+\/\S*)/.exec(run.out.stderr)?.[1], 'the attach URL');
    const port = Number(new URL(url).port);
    expect(run.out.stderr).toContain(`open https://debug.bun.sh/#127.0.0.1:${port}/`);
    expect(run.out.stderr).toContain(`'svc-emu: attach Bun'`);
    expect(run.out.stderr).toContain(`--debug-port ${VSCODE_DEBUG_PORTS.bun}`);
    expect(run.out.stderr).toContain('timeout clock is paused; a debug run has no CPU cap; memory stays enforced');

    const ws = await InspectorSession.connect(url);
    await ws.call('Inspector.enable');
    await ws.call('Inspector.initialized');
    await until(() => run.out.stderr.includes('debugger attached to'), 'the attached line');
    await ws.close();
    await until(() => run.out.stderr.includes('debugger detached from'), 'the detached line');
    expect((await core.call('PUT', '/v1/store/go', { value: true })).status).toBe(201);

    const code = await run.done;
    expect(code, run.out.stderr).toBe(0);
    expect(JSON.parse(run.out.stdout)).toEqual({ hello: 'Ada' });
    expect(run.out.stderr).toMatch(/invocation inv_\w+ — gated v1/);
    const id = /invocation (inv_\w+)/.exec(run.out.stderr)![1]!;
    const rec = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: core.admin });
    expect(rec.json.debug).toMatchObject({ protocol: 'inspector', attached: true });
  }, 60_000);

  it('Python, at the VS Code configuration’s port: the debugpy host, port and path mapping; --json prints the session as JSON', async () => {
    // 5678 is the launch configuration's port; when another process of this machine holds it, a free one stands in.
    const port = (await portFree(VSCODE_DEBUG_PORTS.python)) ? VSCODE_DEBUG_PORTS.python : await freePort();
    const run = startCli(['invoke', 'py', '--debug', '--debug-port', String(port), ...dd]);
    const waiting = await until(() => /attach to host 127\.0\.0\.1 port (\d+)/.exec(run.out.stderr)?.[1], 'the Python attach hint', 40_000);
    expect(Number(waiting)).toBe(port);
    if (port === VSCODE_DEBUG_PORTS.python) {
      expect(run.out.stderr).toContain(`'svc-emu: attach Python' configuration, or any debugpy (DAP) client`);
    } else {
      expect(run.out.stderr).toContain(`(run with --debug-port ${VSCODE_DEBUG_PORTS.python}, the port it names)`);
    }
    expect(run.out.stderr).toMatch(/path mapping: local snippets\/py → remote \/\S+/);
    const id = /debug run (inv_\w+)/.exec(run.out.stderr)![1]!;
    expect((await core.call('POST', `/v1/invocations/${id}/cancel`)).status).toBe(202);
    expect(await run.done).toBe(1);
    expect(run.out.stderr).toMatch(/py failed: cancelled/);

    const json = startCli(['invoke', 'py', '--debug', '--json', ...dd]);
    const line = await until(
      () => json.out.stderr.split('\n').find((l) => l.startsWith('{"event":"debug.session"')),
      'the session as JSON',
      40_000,
    );
    const session = JSON.parse(line).session;
    expect(session).toMatchObject({ protocol: 'dap', state: 'waiting', snippet: 'py' });
    expect((await core.call('POST', `/v1/invocations/${session.invocation_id}/cancel`)).status).toBe(202);
    expect(await json.done).toBe(1);
    expect(JSON.parse(json.out.stdout)).toMatchObject({ id: session.invocation_id, outcome: 'cancelled' });
  }, 90_000);
});

describe('invoke --debug --async', () => {
  it('prints the 202, says where to attach when a worker starts it, and waits until it has finished', async () => {
    const run = startCli(['invoke', 'py', '--debug', '--async', ...dd]);
    const id = await until(() => /debug run (inv_\w+) \(py v1\) waits for a debugger/.exec(run.out.stderr)?.[1], 'the attach hint', 40_000);
    expect(JSON.parse(run.out.stdout)).toMatchObject({ invocation_id: id, status: 'queued' });
    await until(() => run.out.stderr.includes(`waiting for ${id} to finish`), 'the waiting line');
    expect((await core.call('POST', `/v1/invocations/${id}/cancel`)).status).toBe(202);
    expect(await run.done).toBe(0); // the 202 was the answer; the run's outcome is on its record
    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.json.outcome).toBe('cancelled');
  }, 60_000);
});

describe('invoke --replay ID --debug', () => {
  it('runs an invocation again as a debug run', async () => {
    const first = await runCli(['invoke', 'py', '--json', ...dd]);
    expect(first.code, first.stdout).toBe(0);
    const id = JSON.parse(first.stdout).id as string;
    const run = startCli(['invoke', '--replay', id, '--debug', ...dd]);
    const again = await until(
      () => /debug run (inv_\w+) \(py v1\) waits for a debugger at tcp:\/\/127\.0\.0\.1:\d+/.exec(run.out.stderr)?.[1],
      'the replay’s attach hint',
      40_000,
    );
    expect(again).not.toBe(id);
    expect(run.out.stderr).toContain(`replaying ${id}`);
    expect((await core.call('POST', `/v1/invocations/${again}/cancel`)).status).toBe(202);
    expect(await run.done).toBe(1);
    const rec = await core.call('GET', `/_emu/invocations/${again}`, undefined, { key: core.admin });
    expect(rec.json.debug).toMatchObject({ protocol: 'dap', attached: false });
  }, 60_000);
});

describe('the example workspace’s VS Code launch configurations', () => {
  it('name the ports the CLI tells people to use, the inspector URL the executor serves, and the bundle path of the sandbox', async () => {
    const text = await readFile(join(PROJECT_ROOT, 'fixtures', 'workspace', '.vscode', 'launch.json'), 'utf8');
    const launch = JSON.parse(text) as { configurations: Record<string, any>[]; inputs: Record<string, any>[] };
    const byName = Object.fromEntries(launch.configurations.map((c) => [c.name, c]));
    const bun = byName['svc-emu: attach Bun']!;
    expect(bun).toMatchObject({ type: 'bun', request: 'attach', url: `ws://127.0.0.1:${VSCODE_DEBUG_PORTS.bun}/` });
    const py = byName['svc-emu: attach Python']!;
    expect(py).toMatchObject({ type: 'debugpy', request: 'attach', connect: { host: '127.0.0.1', port: VSCODE_DEBUG_PORTS.python } });
    expect(py.pathMappings).toEqual([{ localRoot: '${workspaceFolder}/snippets/${input:snippet}', remoteRoot: DEFAULT_BUNDLE_DEST }]);
    expect(launch.inputs.map((i) => i.id)).toEqual(['snippet']);
  });
});
