import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bwrapArgv, bwrapAvailable, writeSandboxIdentity } from '../../executor/sandbox/bwrap';
import type { HostPath } from '../../executor/sandbox/bwrap';
import { loudSkip, median, pythonBinds, pythonPath, run } from './host';

describe('bwrapArgv (pure)', () => {
  const layout: Record<string, HostPath> = {
    '/usr': { kind: 'dir' },
    '/bin': { kind: 'symlink', target: 'usr/bin' },
    '/sbin': { kind: 'symlink', target: 'usr/sbin' },
    '/lib': { kind: 'symlink', target: 'usr/lib' },
    '/lib64': { kind: 'dir' }, // a split-usr host: bound, not linked
    '/etc/ssl': { kind: 'dir' },
    '/etc/resolv.conf': { kind: 'file' },
  };
  const inspect = (p: string): HostPath => layout[p] ?? { kind: 'missing' };
  const argv = bwrapArgv({
    bwrap: '/usr/bin/bwrap',
    runtimeBinds: [{ src: '/opt/rt/bun', dest: '/opt/rt/bun' }],
    bundleDir: '/data/bundles/v3',
    tmpSizeMb: 64,
    env: { PATH: '/usr/bin', HOME: '/tmp' },
    unixSocketBinds: [{ src: '/data/run/egress.sock', dest: '/run/svc/egress.sock' }],
    inspect,
  });
  const pairs = (flag: string) => argv.flatMap((a, i) => (a === flag ? [[argv[i + 1], argv[i + 2]]] : []));

  it('unshares everything including the user namespace, runs as 1000:1000, dies with its parent', () => {
    expect(argv[0]).toBe('/usr/bin/bwrap');
    expect(argv.slice(1, 4)).toEqual(['--unshare-all', '--unshare-user', '--disable-userns']);
    expect(argv.join(' ')).toContain('--uid 1000 --gid 1000');
    expect(argv).toContain('--die-with-parent');
    expect(argv).toContain('--new-session');
    expect(argv).not.toContain('--share-net');
    expect(argv.at(-1)).toBe('--');
  });

  it('clears the environment and sets exactly the given variables', () => {
    const i = argv.indexOf('--clearenv');
    expect(i).toBeGreaterThan(0);
    expect(pairs('--setenv')).toEqual([
      ['PATH', '/usr/bin'],
      ['HOME', '/tmp'],
    ]);
    expect(argv.indexOf('--setenv')).toBeGreaterThan(i);
  });

  it('binds system dirs read-only and recreates merged-usr symlinks', () => {
    expect(pairs('--ro-bind')).toContainEqual(['/usr', '/usr']);
    expect(pairs('--ro-bind')).toContainEqual(['/lib64', '/lib64']);
    expect(pairs('--symlink')).toEqual([
      ['usr/bin', '/bin'],
      ['usr/sbin', '/sbin'],
      ['usr/lib', '/lib'],
    ]);
    expect(pairs('--ro-bind-try')).toEqual([
      ['/etc/ssl', '/etc/ssl'],
      ['/etc/resolv.conf', '/etc/resolv.conf'],
    ]);
    expect(pairs('--bind')).toEqual([['/data/run/egress.sock', '/run/svc/egress.sock']]);
  });

  it('sized private /tmp, fresh /proc and /dev, runtime and bundle read-only, chdir into the bundle', () => {
    expect(argv.join(' ')).toContain(`--size ${64 * 1024 * 1024} --perms 1777 --tmpfs /tmp`);
    expect(argv.join(' ')).toContain('--proc /proc --dev /dev');
    expect(pairs('--ro-bind')).toContainEqual(['/opt/rt/bun', '/opt/rt/bun']);
    expect(pairs('--ro-bind')).toContainEqual(['/data/bundles/v3', '/opt/svc/app']);
    expect(pairs('--chdir')[0]?.[0]).toBe('/opt/svc/app');
    // the socket bind comes after the /run tmpfs it lands in
    expect(argv.indexOf('/run/svc/egress.sock')).toBeGreaterThan(
      argv
        .join(' ')
        .split(' ')
        .findIndex((x, i) => x === '/run' && argv[i - 1] === '--tmpfs'),
    );
  });

  it('refuses uid 0, relative paths, bad env names and sockets outside tmpfs', () => {
    const base = { runtimeBinds: [], bundleDir: '/b', tmpSizeMb: 8, env: {}, inspect };
    expect(() => bwrapArgv({ ...base, uid: 0 })).toThrow(/uid/);
    expect(() => bwrapArgv({ ...base, bundleDir: 'rel' })).toThrow(/absolute/);
    expect(() => bwrapArgv({ ...base, env: { 'A=B': 'x' } })).toThrow(/env/);
    expect(() => bwrapArgv({ ...base, unixSocketBinds: [{ src: '/s', dest: '/opt/s' }] })).toThrow(/under \/run/);
  });
});

// ---- real bubblewrap --------------------------------------------------------------------------------

const probe = await bwrapAvailable();
const PY = pythonPath();
if (!probe.ok) loudSkip('bubblewrap parity sandbox tests', probe.reason ?? 'unavailable');

describe.skipIf(!probe.ok || !PY)(`bubblewrap ${probe.version ?? ''} sandbox on this host (real)`, () => {
  const py = PY ?? 'python3';
  const work = mkdtempSync(join(tmpdir(), 'svc-emu-bwrap-'));
  const bundle = join(work, 'bundle');
  const dataDir = join(work, 'data');
  mkdirSync(bundle);
  mkdirSync(dataDir);
  writeFileSync(join(bundle, 'handler.py'), 'def handler(x): return x\n');
  writeFileSync(join(dataDir, 'db.json'), '{"secret":true}');
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
    rmSync(work, { recursive: true, force: true });
  });

  const ENV = { PATH: '/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8', SVC_MARK: 'only-me' };
  const sandbox = (inner: string[], extra: Partial<Parameters<typeof bwrapArgv>[0]> = {}) => [
    ...bwrapArgv({ runtimeBinds: pythonBinds(py), bundleDir: bundle, tmpSizeMb: 16, env: ENV, features: probe.features, ...extra }),
    ...inner,
  ];
  const sh = async (script: string, extra: Partial<Parameters<typeof bwrapArgv>[0]> = {}) => run(sandbox(['/bin/sh', '-c', script], extra));

  it('is not uid 0', async () => {
    const r = await sh('id -u; id -g');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(0, 2)).toEqual(['1000', '1000']);
  });

  it('sees only its own processes (own PID namespace)', async () => {
    const r = await run(sandbox([py, '-c', 'import os; print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))']));
    expect(r.code, r.stderr).toBe(0);
    const pids = JSON.parse(r.stdout) as number[];
    expect(pids.length).toBeLessThanOrEqual(3); // bwrap's init, python (and maybe a transient one)
    expect(pids).toContain(1);
    expect(pids).not.toContain(process.pid);
  });

  it('cannot see the data dir or other host files', async () => {
    const r = await sh(
      `test -e ${dataDir}/db.json && echo VISIBLE; test -e ${work} && echo WORK; ls /root /home /work 2>&1 | head -3; echo done`,
    );
    expect(r.stdout).not.toContain('VISIBLE');
    expect(r.stdout).not.toContain('WORK');
    expect(r.stdout).toContain('done');
    expect(r.stdout).toMatch(/No such file/);
  });

  it('has a private, writable, sized /tmp', async () => {
    const marker = join(tmpdir(), `svc-emu-host-marker-${process.pid}`);
    writeFileSync(marker, 'host');
    const name = `inside-${process.pid}`;
    const r = await sh(`echo hi > /tmp/${name} && cat /tmp/${name}; test -e ${marker} && echo HOSTTMP; df -k /tmp | tail -1`);
    rmSync(marker);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^hi\n/);
    expect(r.stdout).not.toContain('HOSTTMP');
    expect(existsSync(join(tmpdir(), name))).toBe(false);
    expect(r.stdout).toMatch(/\s16384\s/); // 16 MiB tmpfs
  });

  it('has the bundle read-only at /opt/svc/app (and starts there)', async () => {
    const r = await sh('pwd; cat handler.py; touch /opt/svc/app/new 2>&1; touch /usr/x 2>&1; true');
    expect(r.stdout).toContain('/opt/svc/app\ndef handler');
    expect(r.stdout).toMatch(/Read-only file system[\s\S]*Read-only file system/);
    expect(existsSync(join(bundle, 'new'))).toBe(false);
  });

  it("cannot connect to a TCP server on the host's loopback (own network namespace, only lo)", async () => {
    let accepted = 0;
    const server = createServer((s) => {
      accepted++;
      s.destroy();
    });
    servers.push(server);
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as AddressInfo).port;
    // control: from the host it connects
    const host = await run([py, '-c', `import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=2); print("ok")`]);
    expect(host.stdout.trim()).toBe('ok');
    accepted = 0;
    const r = await run(
      sandbox([py, '-c', `import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=2); print("CONNECTED")`]),
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout).not.toContain('CONNECTED');
    expect(r.stderr).toMatch(/ConnectionRefusedError|Network is unreachable/);
    expect(accepted).toBe(0);
    const ifaces = await sh('ls /sys/class/net 2>/dev/null || cat /proc/net/dev');
    expect(ifaces.stdout).toContain('lo');
    expect(ifaces.stdout).not.toMatch(/eth0|ens|enp|wlan/);
  });

  it('reaches a host unix socket bound in under /run (the egress route)', async () => {
    const sock = join(work, 'egress.sock');
    const server = createServer((s) => s.end('hello from host\n'));
    servers.push(server);
    await new Promise<void>((res) => server.listen(sock, res));
    const r = await run(
      sandbox(
        [
          py,
          '-c',
          'import socket; s=socket.socket(socket.AF_UNIX); s.connect("/run/svc/egress.sock"); print(s.recv(100).decode().strip())',
        ],
        {
          unixSocketBinds: [{ src: sock, dest: '/run/svc/egress.sock' }],
        },
      ),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('hello from host');
  });

  it('has exactly the environment it was given', async () => {
    const r = await run(sandbox(['/usr/bin/env']), { env: { ...process.env, LEAK_ME: 'secret' } });
    expect(r.code, r.stderr).toBe(0);
    const vars = Object.fromEntries(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    // bwrap adds PWD (the --chdir directory) and nothing else
    expect(vars).toEqual({ ...ENV, PWD: '/opt/svc/app' });
  });

  it('names the sandbox user through a synthetic passwd', async () => {
    const binds = await writeSandboxIdentity(join(work, 'etc'));
    const r = await run(
      sandbox([py, '-c', 'import getpass, pwd, os; print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir)'], {
        extraRoBinds: binds,
        env: { PATH: '/usr/bin' },
      }),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('svc /tmp');
    expect(readFileSync(binds[0]!.src, 'utf8')).not.toContain(':0:0:root:/root:/bin/bash');
  });

  it('dies with its parent (no runner outlives the process that started it)', async () => {
    // a shell starts the sandbox and is then SIGKILLed: the sandboxed sleep must go too
    const marker = `sleep 30.${process.pid}`;
    const argv = sandbox(['/bin/sh', '-c', `exec ${marker}`]);
    const parent = spawn('/bin/sh', ['-c', `${argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')} & wait`], { stdio: 'ignore' });
    const findSleep = async () => {
      for (const e of readdirSync('/proc')) {
        if (!/^\d+$/.test(e)) continue;
        try {
          if (readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() !== marker) continue;
          const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
          if (!/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))) return e;
        } catch {
          // gone
        }
      }
      return '';
    };
    let found = '';
    for (let i = 0; i < 100 && !found; i++) {
      await new Promise((r) => setTimeout(r, 20));
      found = await findSleep();
    }
    expect(found).not.toBe('');
    parent.kill('SIGKILL');
    let left = found;
    for (let i = 0; i < 100 && left; i++) {
      await new Promise((r) => setTimeout(r, 20));
      left = await findSleep();
    }
    expect(left).toBe('');
  });

  it('spawn overhead, measured', async () => {
    const direct: number[] = [];
    const boxed: number[] = [];
    const pyDirect: number[] = [];
    const pyBoxed: number[] = [];
    for (let i = 0; i < 15; i++) {
      direct.push((await run(['/bin/true'])).wallMs);
      boxed.push((await run(sandbox(['/bin/true']))).wallMs);
      pyDirect.push((await run([py, '-c', 'pass'])).wallMs);
      pyBoxed.push((await run(sandbox([py, '-c', 'pass']))).wallMs);
    }
    const t = (xs: number[]) => median(xs).toFixed(1);
    console.warn(
      `\n[limits] bwrap spawn overhead (median of 15, spawn to exit): /bin/true ${t(direct)} ms → in bwrap ${t(boxed)} ms ` +
        `(+${(median(boxed) - median(direct)).toFixed(1)} ms); python3 -c pass ${t(pyDirect)} ms → in bwrap ${t(pyBoxed)} ms ` +
        `(+${(median(pyBoxed) - median(pyDirect)).toFixed(1)} ms)\n`,
    );
    expect(median(boxed) - median(direct)).toBeLessThan(100);
  }, 60_000);
});

describe('bwrapAvailable', () => {
  it('reports a missing binary with a reason', async () => {
    const p = await bwrapAvailable('/nonexistent/bwrap');
    expect(p.ok).toBe(false);
    expect(p.reason).toMatch(/not found/);
  });
  it('probes this host', () => {
    console.warn(`[limits] bubblewrap here: ${probe.ok ? `ok, ${probe.version}` : `unavailable: ${probe.reason}`}`);
    expect(typeof probe.ok).toBe('boolean');
  });
});

describe('bwrap feature detection', () => {
  it('leaves out options an older bubblewrap lacks (0.6: no --disable-userns)', async () => {
    const calls: string[][] = [];
    const exec = async (file: string, args: string[]) => {
      calls.push([file, ...args]);
      if (args[0] === '--version') return { code: 0, stdout: 'bubblewrap 0.6.1\n', stderr: '' };
      if (args[0] === '--help') return { code: 0, stdout: '    --size BYTES   Set size\n    --perms OCTAL  Set permissions\n', stderr: '' };
      return { code: 0, stdout: '', stderr: '' };
    };
    const p = await bwrapAvailable('bwrap', exec);
    expect(p).toMatchObject({ ok: true, version: '0.6.1', features: { disableUserns: false, size: true, perms: true } });
    expect(calls[2]).not.toContain('--disable-userns');
    const argv = bwrapArgv({
      runtimeBinds: [],
      bundleDir: '/b',
      tmpSizeMb: 8,
      env: {},
      features: p.features,
      inspect: () => ({ kind: 'missing' }),
    });
    expect(argv).not.toContain('--disable-userns');
    expect(argv).toContain('--size');
    const bare = bwrapArgv({
      runtimeBinds: [],
      bundleDir: '/b',
      tmpSizeMb: 8,
      env: {},
      features: { disableUserns: false, size: false, perms: false },
      inspect: () => ({ kind: 'missing' }),
    });
    expect(bare.join(' ')).toContain('--tmpfs /tmp');
    expect(bare).not.toContain('--size');
    expect(bare).not.toContain('--perms');
  });
});
