/**
 * The code checkers (executor/validate.ts: Bun's transpiler, CPython's `compile`) read every tenant's code when a
 * version is created. They never run it, but a parser is attack surface too, so they run in a sandbox like a
 * runner's (LocalSandboxHost.checkerSandbox in executor/local-host.ts). Judged from this host's /proc, with the
 * core as root and as an unprivileged uid (test/security/core-as.ts): the checker is never host uid 0 and never
 * the core's capabilities, it has no_new_privs and the seccomp filter, and it sees none of the host's files.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { descendsFrom, sandboxedCoreAs, type CoreAs } from './core-as';
import { DEFAULT_SANDBOX_UID } from '../../executor/sandbox/profile';

const NON_ROOT_UID = 4244;

const CODE = {
  bun: { file: 'index.ts', good: 'export default async () => ({ ok: 1 })\n', bad: 'export default async () => ({ ok: \n' },
  python: { file: 'main.py', good: 'def handler(input):\n    return {"ok": 1}\n', bad: 'def handler(input):\n    return (\n' },
} as const;

async function call(core: CoreAs, method: string, path: string, body?: unknown) {
  const res = await fetch(`${core.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${core.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

/** The checker of `runtime` under `core`: the process whose argv[0] is the runtime itself (not bwrap or setpriv). */
function checkerOf(core: number, runtime: 'bun' | 'python'): number[] {
  const script = runtime === 'bun' ? '/runtimes/bun/check.ts' : '/runtimes/python/check.py';
  const isRuntime = runtime === 'bun' ? (a0: string) => a0.endsWith('/bun') : (a0: string) => /\/python3?(\.\d+)?$/.test(a0);
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (isRuntime(argv[0]!) && argv.some((a) => a.endsWith(script)) && descendsFrom(Number(d), core)) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const field = (status: string, name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(status)?.[1]?.trim() ?? null;

const cores: CoreAs[] = [];
afterAll(async () => {
  await Promise.all(cores.map((c) => c.stop()));
});

describe.each([
  { mode: 'root', uid: null as number | null },
  { mode: 'an unprivileged uid', uid: NON_ROOT_UID },
])('code checkers with the core as $mode', ({ uid }) => {
  it('Bun and Python: problems found with file and line, the checker sandboxed and never host uid 0', async (ctx) => {
    const core = await sandboxedCoreAs(ctx, uid, cores);

    for (const runtime of ['bun', 'python'] as const) {
      const { file, good, bad } = CODE[runtime];
      const name = `check-as-${runtime}`;
      expect((await call(core, 'POST', '/v1/snippets', { name, runtime })).status).toBe(201);
      const refused = await call(core, 'POST', `/v1/snippets/${name}/versions`, { files: { [file]: bad } });
      expect(refused.status, JSON.stringify(refused.json)).toBe(422);
      expect(JSON.stringify(refused.json)).toContain(file);
      expect((await call(core, 'POST', `/v1/snippets/${name}/versions`, { files: { [file]: good } })).status).toBe(201);

      const pids = checkerOf(core.pid, runtime);
      expect(pids, `${runtime} checker under the core`).toHaveLength(1);
      const status = readFileSync(`/proc/${pids[0]}/status`, 'utf8');
      const want = uid ?? DEFAULT_SANDBOX_UID;
      expect(field(status, 'Uid')!.split(/\s+/).map(Number), status).toEqual([want, want, want, want]);
      expect(field(status, 'Gid')!.split(/\s+/).map(Number)).not.toContain(0);
      expect(field(status, 'CapEff')).toBe('0000000000000000');
      expect(field(status, 'CapPrm')).toBe('0000000000000000');
      expect(field(status, 'NoNewPrivs')).toBe('1');
      expect(field(status, 'Seccomp')).toBe('2');
      // Its own view of the filesystem (seen through its /proc root): no data dir (its files, the admin token), no host secrets.
      const root = `/proc/${pids[0]}/root`;
      expect(existsSync(`${root}/usr/bin`), 'the checker root is readable from here').toBe(true);
      expect(existsSync(`${root}${core.dataDir}`)).toBe(false);
      expect(existsSync(`${root}/etc/shadow`)).toBe(false);
      expect(readlinkSync(`/proc/${pids[0]}/ns/mnt`)).not.toBe(readlinkSync(`/proc/${core.pid}/ns/mnt`));
      expect(readlinkSync(`/proc/${pids[0]}/ns/net`)).not.toBe(readlinkSync(`/proc/${core.pid}/ns/net`));
    }
  });
});
