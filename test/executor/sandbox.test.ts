/**
 * The parity sandbox (bubblewrap) seen from inside real Bun and CPython snippets (issue 3, "Tests"): no view
 * of the data dir, no way to the core's port, only its own processes, not uid 0, a fork bomb stops at
 * pids max (and the core survives), the bundle is read-only and /tmp is writable.
 * Skips LOUDLY where GET /_emu/executor says the sandbox is not `bwrap`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { RUNTIMES, emuInvocation, executorInfo, invocationId, invoke, loudSkip, ok, snippet, type Code, type Runtime } from './_helpers';
import { CA_BUNDLE_IN_SANDBOX } from '../../executor/local-host';

let core: TestCore;
let noSandbox: string | null = null;
const probes = {} as Record<Runtime, string>;

const PROBE: Code = {
  bun: `import fs from "node:fs";
import net from "node:net";
import os from "node:os";

const err = (e) => ({ ok: false, error: String(e?.code ?? e?.message ?? e) });

export default async function handler(input) {
  switch (input.op) {
    case "read":
      try { return { ok: true, content: fs.readFileSync(input.path, "utf8").slice(0, 200) }; } catch (e) { return err(e); }
    case "list":
      try { return { ok: true, entries: fs.readdirSync(input.path) }; } catch (e) { return err(e); }
    case "connect":
      return await new Promise((resolve) => {
        const s = net.connect({ host: "127.0.0.1", port: input.port });
        const t = setTimeout(() => { s.destroy(); resolve({ ok: false, error: "no answer in 2 s" }); }, 2000);
        s.on("connect", () => { clearTimeout(t); s.destroy(); resolve({ ok: true }); });
        s.on("error", (e) => { clearTimeout(t); resolve(err(e)); });
      });
    case "connect_addr":
      return await new Promise((resolve) => {
        const s = net.connect({ host: input.host, port: input.port });
        const t = setTimeout(() => { s.destroy(); resolve({ ok: false, error: "no answer in 2 s" }); }, 2000);
        s.on("connect", () => { clearTimeout(t); s.destroy(); resolve({ ok: true }); });
        s.on("error", (e) => { clearTimeout(t); resolve(err(e)); });
      });
    case "fetch":
      try { const r = await fetch(input.url, { signal: AbortSignal.timeout(2000) }); return { ok: true, status: r.status }; } catch (e) { return err(e); }
    case "procs": {
      const pids = fs.readdirSync("/proc").filter((d) => /^\\d+$/.test(d)).map(Number);
      const comms = {};
      for (const p of pids) { try { comms[p] = fs.readFileSync("/proc/" + p + "/comm", "utf8").trim(); } catch {} }
      return { pids, comms };
    }
    case "uid":
      return { uid: process.getuid(), euid: process.geteuid(), gid: process.getgid() };
    case "env":
      return { env: { ...process.env } };
    case "interfaces":
      return { interfaces: Object.keys(os.networkInterfaces()).sort() };
    case "bundle":
      return { dir: import.meta.dir, cwd: process.cwd() };
    case "runtime_dir":
      return { dir: "/opt/svc/node_modules", prefix: process.execPath };
    case "write":
      try { fs.writeFileSync(input.path, "written " + input.path); return { ok: true, back: fs.readFileSync(input.path, "utf8") }; } catch (e) { return err(e); }
    case "forkbomb": {
      const kids = [];
      let error = null;
      for (let i = 0; i < 5000; i++) {
        try { kids.push(Bun.spawn(["/bin/sleep", String(input.hold_s ?? 3)], { stdio: ["ignore", "ignore", "ignore"] })); }
        catch (e) { error = String(e?.code ?? e?.message ?? e); break; }
      }
      return { forked: kids.length, error };
    }
  }
  throw new Error("unknown op " + input.op);
}
`,
  python: `import os
import socket
import sys
import time


def err(e):
    return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}


def handler(input):
    op = input["op"]
    if op == "read":
        try:
            with open(input["path"]) as f:
                return {"ok": True, "content": f.read(200)}
        except OSError as e:
            return err(e)
    if op == "list":
        try:
            return {"ok": True, "entries": os.listdir(input["path"])}
        except OSError as e:
            return err(e)
    if op == "connect":
        try:
            s = socket.create_connection(("127.0.0.1", input["port"]), timeout=2)
            s.close()
            return {"ok": True}
        except OSError as e:
            return err(e)
    if op == "connect_addr":
        try:
            s = socket.create_connection((input["host"], input["port"]), timeout=2)
            s.close()
            return {"ok": True}
        except OSError as e:
            return err(e)
    if op == "procs":
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
        comms = {}
        for p in pids:
            try:
                with open("/proc/%d/comm" % p) as f:
                    comms[p] = f.read().strip()
            except OSError:
                pass
        return {"pids": pids, "comms": comms}
    if op == "uid":
        return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid()}
    if op == "env":
        return {"env": dict(os.environ)}
    if op == "interfaces":
        return {"interfaces": sorted(name for _, name in socket.if_nameindex())}
    if op == "runtime_dir":
        return {"dir": os.path.dirname(os.__file__), "prefix": sys.prefix}
    if op == "bundle":
        return {"dir": os.path.dirname(os.path.abspath(__file__)), "cwd": os.getcwd()}
    if op == "write":
        try:
            with open(input["path"], "w") as f:
                f.write("written " + input["path"])
            with open(input["path"]) as f:
                return {"ok": True, "back": f.read()}
        except OSError as e:
            return err(e)
    if op == "forkbomb":
        forked = 0
        error = None
        for _ in range(5000):
            try:
                pid = os.fork()
            except OSError as e:
                error = "%s: %s" % (type(e).__name__, e)
                break
            if pid == 0:
                try:
                    time.sleep(input.get("hold_s", 3))
                finally:
                    os._exit(0)
            forked += 1
        return {"forked": forked, "error": error}
    raise ValueError("unknown op " + op)
`,
};

beforeAll(async () => {
  core = await startTestCore();
  const info = await executorInfo(core);
  if (info.sandbox !== 'bwrap') {
    noSandbox = `GET /_emu/executor says sandbox ${JSON.stringify(info.sandbox)} (${JSON.stringify(info.parity)})`;
    loudSkip('the sandbox tests (test/executor/sandbox.test.ts)', noSandbox);
    return;
  }
  for (const rt of RUNTIMES) probes[rt] = await snippet(core, rt, 'probe', PROBE[rt], { max_cpu_percent: 100, timeout_ms: 20_000 });
}, 60_000);
afterAll(async () => {
  await core?.stop();
});

/** Whether a host process was started (through bwrap and the rest) by this test's core, not another test's. */
function descendsFromUs(pid: number): boolean {
  for (let p = pid, hops = 0; p > 1 && hops < 16; hops++) {
    if (p === process.pid) return true;
    p = Number(/^PPid:\s*(\d+)$/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
  }
  return false;
}

describe.each(RUNTIMES)('%s inside the bubblewrap sandbox', (runtime) => {
  it("cannot read the core's data dir", async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const file = join(core.dataDir, 'emulator.json');
    expect(statSync(file).isFile(), 'the file exists on the host').toBe(true);
    const read = await ok(core, probes[runtime], { op: 'read', path: file });
    expect(read.ok, JSON.stringify(read)).toBe(false);
    const list = await ok(core, probes[runtime], { op: 'list', path: core.dataDir });
    expect(list.ok, JSON.stringify(list)).toBe(false);
    // Nor the materialised bundles under it (its own bundle is visible only at its sandbox path).
    const bundles = await ok(core, probes[runtime], { op: 'list', path: join(core.dataDir, 'sandboxes', 'bundles') });
    expect(bundles.ok, JSON.stringify(bundles)).toBe(false);
  });

  it("cannot connect to the core's own port on 127.0.0.1 directly; HTTP goes through the egress proxy, and is logged", async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const port = Number(new URL(core.url).port);
    expect(port).toBeGreaterThan(0);
    const c = await ok(core, probes[runtime], { op: 'connect', port });
    expect(c.ok, JSON.stringify(c)).toBe(false);
    if (runtime === 'bun') {
      // The local egress profile lets HTTP reach anything the host can, through the proxy only.
      const f = await ok(core, probes[runtime], { op: 'fetch', url: `${core.url}/healthz` });
      expect(f.ok, JSON.stringify(f)).toBe(true);
      const log = await core.call('GET', '/_emu/egress', undefined, { key: core.admin });
      expect(log.json.data[0]).toMatchObject({ source: 'snippet', method: 'GET', host: '127.0.0.1', port, path: '/healthz', status: 200 });
    }
  });

  it('has only loopback networking: no other interface, no route out', async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const i = await ok(core, probes[runtime], { op: 'interfaces' });
    expect(i.interfaces).toEqual(['lo']);
    // Any address outside: no route (refused at once, no DNS involved).
    const out = await ok(core, probes[runtime], { op: 'connect_addr', host: '192.0.2.1', port: 80 });
    expect(out.ok, JSON.stringify(out)).toBe(false);
  });

  it("runs with a clean environment: nothing of the core's own environment leaks in", async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const { env } = (await ok(core, probes[runtime], { op: 'env' })) as { env: Record<string, string> };
    // What a sandbox may have: the runner's fixed environment, what bwrap adds, and the invocation's SVC_* and secrets.
    const fixed = new Set([
      'PATH',
      'HOME',
      'TMPDIR',
      'LANG',
      'PYTHONUNBUFFERED',
      'PYTHONDONTWRITEBYTECODE',
      'NO_COLOR',
      'BUN_RUNTIME_TRANSPILER_CACHE_PATH',
      'PWD',
    ]);
    // The sandbox's own trust store (docs/security.md, the egress CA; executor/local-host.ts): the bundle bound in,
    // never the core's value (hosts often set these variables themselves).
    const trust = ['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS'];
    for (const k of trust) if (env[k] !== undefined) expect(env[k], k).toBe(CA_BUNDLE_IN_SANDBOX);
    const leaked = Object.keys(env).filter(
      (k) => !fixed.has(k) && !trust.includes(k) && !k.startsWith('SVC_') && process.env[k] !== undefined,
    );
    expect(leaked, 'variables of the core process visible to the snippet').toEqual([]);
    if (process.env.HOME && process.env.HOME !== '/tmp') expect(env.HOME, "not the core user's home").not.toBe(process.env.HOME);
    expect(Object.values(env).join('\n')).not.toContain(core.dataDir);
  });

  it('sees only its own processes in /proc', async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const p = await ok(core, probes[runtime], { op: 'procs' });
    expect(p.pids.length, JSON.stringify(p.comms)).toBeGreaterThanOrEqual(1);
    expect(p.pids.length, `processes visible: ${JSON.stringify(p.comms)}`).toBeLessThanOrEqual(4);
    const comms = Object.values(p.comms as Record<string, string>);
    expect(comms, 'no node (the core) in view').not.toContain('node');
    expect(comms, 'no vitest worker in view').not.toContain('vitest');
    const hostPids = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).length;
    expect(hostPids, 'the host has more processes than the sandbox sees').toBeGreaterThan(p.pids.length + 3);
  });

  it('is not uid 0, as the host sees it: no capabilities, no_new_privs, a seccomp filter', async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const u = await ok(core, probes[runtime], { op: 'uid' });
    expect(u.uid).not.toBe(0);
    expect(u.euid).not.toBe(0);
    expect(u.gid).not.toBe(0);
    // Inside, a user namespace can say 1000 while the host says 0 (the bug this guards): ask the host's /proc.
    const runner = runtime === 'bun' ? '/executor/runtimes/bun/runner.ts' : '/executor/runtimes/python/svc_runner.py';
    const runners = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((pid) => {
        try {
          return (
            readFileSync(`/proc/${pid}/cmdline`, 'utf8')
              .split('\0')
              .some((a) => a.endsWith(runner)) && descendsFromUs(Number(pid))
          );
        } catch {
          return false; // gone meanwhile
        }
      });
    const statuses = runners
      .map((pid) => {
        try {
          return readFileSync(`/proc/${pid}/status`, 'utf8');
        } catch {
          return null;
        }
      })
      .filter((x): x is string => x !== null && /^Name:\s*(bun|python)/m.test(x));
    expect(statuses.length, 'the warm runner is found on the host').toBeGreaterThan(0);
    for (const st of statuses) {
      const field = (n: string) => new RegExp(`^${n}:\\s*(.*)$`, 'm').exec(st)?.[1] ?? '';
      expect(field('Uid').split(/\s+/).map(Number), st).not.toContain(0);
      expect(field('Gid').split(/\s+/).map(Number), st).not.toContain(0);
      expect(field('CapEff')).toMatch(/^0+$/);
      expect(field('CapPrm')).toMatch(/^0+$/);
      expect(field('NoNewPrivs')).toBe('1');
      expect(field('Seccomp')).toBe('2');
    }
  });

  it('its bundle dir and the shared runtime are read-only; /tmp is writable', async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const b = await ok(core, probes[runtime], { op: 'bundle' });
    expect(b.dir, 'the bundle is not read from the data dir path').not.toContain(core.dataDir);
    const inBundle = await ok(core, probes[runtime], { op: 'write', path: `${b.dir}/written-by-snippet.txt` });
    expect(inBundle.ok, JSON.stringify(inBundle)).toBe(false);
    expect(inBundle.error).toMatch(/EROFS|Read-only|EACCES|Permission denied/i);
    const over = await ok(core, probes[runtime], { op: 'write', path: `${b.dir}/${runtime === 'bun' ? 'index.ts' : 'main.py'}` });
    expect(over.ok, `overwriting its own code: ${JSON.stringify(over)}`).toBe(false);
    const rt = await ok(core, probes[runtime], { op: 'runtime_dir' });
    const inRuntime = await ok(core, probes[runtime], { op: 'write', path: `${rt.dir}/written-by-snippet.txt` });
    expect(inRuntime.ok, `the shared runtime (${rt.dir}) is read-only: ${JSON.stringify(inRuntime)}`).toBe(false);
    const tmp = await ok(core, probes[runtime], { op: 'write', path: `/tmp/written-${runtime}.txt` });
    expect(tmp, JSON.stringify(tmp)).toEqual({ ok: true, back: `written /tmp/written-${runtime}.txt` });
  });

  it('a fork bomb stops at pids max; the core survives and the next invocation works', async ({ skip }) => {
    if (noSandbox) return skip(noSandbox);
    const name = await snippet(core, runtime, 'forkbomb', PROBE[runtime], { max_cpu_percent: 100, timeout_ms: 20_000 });
    const r = await invoke(core, name, { op: 'forkbomb', hold_s: 3 });
    // Any outcome, but it ends (well before the 20 s timeout) …
    expect(r.status, r.text.slice(0, 500)).toBeGreaterThan(0);
    expect(r.ms, 'the fork bomb run ended on its own').toBeLessThan(15_000);
    if (r.status === 200) {
      expect(r.json.forked, JSON.stringify(r.json)).toBeLessThan(5000);
      expect(r.json.forked, 'stopped at pids max (256 by default), not at the loop bound').toBeLessThanOrEqual(256);
      expect(r.json.error, JSON.stringify(r.json)).toBeTruthy();
    }
    // … the core survives …
    const h = await core.call('GET', '/healthz');
    expect(h.status).toBe(200);
    // … and the next invocations work, of another snippet and of this one.
    expect(await ok(core, probes[runtime], { op: 'uid' })).toMatchObject({ uid: expect.any(Number) });
    const again = await invoke(core, name, { op: 'uid' });
    expect(again.status, again.text).toBe(200);
    // A run that met the process cap leaves no sandbox to reuse: its runner may have lost threads of its own.
    if (r.status === 200) expect((await emuInvocation(core, invocationId(again))).warm, 'the sandbox after the fork bomb').toBe(false);
  }, 40_000);
});
