/**
 * Renders the probe table (table.ts) as one Bun snippet and one Python snippet. Each runs the probes it is
 * asked for (input.only / input.skip) one after another, each within its own time limit, and returns
 * `{runtime, results: [{probe, attempted, succeeded, detail, ms}]}`.
 *
 * Python runs every probe in a forked child (a probe that changes its process, e.g. setuid or unshare,
 * cannot disturb the runner or the next probe, and a single-threaded child is what unshare(CLONE_NEWUSER)
 * needs); Bun runs them in the runner and moves the ones that change the process into a fresh helper
 * process (`inHelper`).
 */
import { BUN_HELPERS, PY_HELPERS } from './preamble';
import type { Probe } from './table';

const DEFAULT_MS = 20_000;

const indent = (body: string, pad: string) =>
  body
    .replace(/^\n+|\s+$/g, '')
    .split('\n')
    .map((l) => (l.length ? pad + l : l))
    .join('\n');

export function bunProbeSource(probes: Probe[]): string {
  const entries = probes
    .map(
      (p) =>
        `  { id: ${JSON.stringify(p.id)}, own: ${!!p.own}, ms: ${p.timeoutMs ?? DEFAULT_MS}, run: async (ctx) => {\n${indent(p.bun, '    ')}\n  } },`,
    )
    .join('\n');
  return `import * as FFI from 'bun:ffi';
${BUN_HELPERS}
const HELPER_SRC = ${JSON.stringify(BUN_HELPERS)};
const PROBES = [
${entries}
];

// Loading leaves a detached, setsid'd sleeper behind: it lives as long as the sandbox, and the test checks
// that the sandbox's destroy takes it too.
Bun.spawnSync({ cmd: ['setsid', '--fork', 'sleep', '600'], stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' });

export default async function handler(input) {
  try { fs.writeFileSync('/tmp/' + input.nonce, String(process.pid)); } catch {}
  const only = input.only ? new Set(input.only) : null;
  const skip = new Set(input.skip || []);
  const results = [];
  for (const p of PROBES) {
    if (only ? !only.has(p.id) : p.own || skip.has(p.id)) continue;
    const t0 = Date.now();
    let timer;
    let res;
    try {
      res = await Promise.race([
        Promise.resolve().then(() => p.run(input)),
        new Promise((_, rej) => { timer = setTimeout(() => rej(new Error('timed out after ' + p.ms + ' ms')), p.ms); }),
      ]);
    } catch (e) {
      res = { attempted: false, succeeded: false, detail: 'probe error: ' + String((e && e.stack) || e).slice(0, 1500) };
    } finally {
      clearTimeout(timer);
    }
    results.push({ probe: p.id, attempted: !!res.attempted, succeeded: !!res.succeeded, detail: String(res.detail), ms: Date.now() - t0 });
  }
  return { runtime: 'bun', results };
}
`;
}

export function pyProbeSource(probes: Probe[]): string {
  const fns = probes.map((p) => `def probe_${p.id}(ctx):\n${indent(p.py, '    ')}\n`).join('\n');
  const table = probes
    .map((p) => `    (${JSON.stringify(p.id)}, probe_${p.id}, ${p.timeoutMs ?? DEFAULT_MS}, ${p.own ? 'True' : 'False'}),`)
    .join('\n');
  return `${PY_HELPERS}

${fns}
PROBES = [
${table}
]

# Loading leaves a detached, setsid'd sleeper behind: it lives as long as the sandbox, and the test checks
# that the sandbox's destroy takes it too.
def _leave_sleeper():
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                fd = os.open('/dev/null', os.O_RDWR)
                for i in (0, 1, 2):
                    os.dup2(fd, i)
                os.execv('/usr/bin/sleep', ['sleep', '600'])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


_leave_sleeper()


def _run_forked(name, fn, ms, ctx):
    t0 = time.time()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            try:
                res = fn(ctx)
            except BaseException as e:
                import traceback
                res = {'attempted': False, 'succeeded': False, 'detail': 'probe error: ' + traceback.format_exc()[-1500:]}
            data = json.dumps(res).encode()
            while data:
                n = os.write(wfd, data)
                data = data[n:]
        finally:
            os._exit(0)
    os.close(wfd)
    buf = b''
    deadline = t0 + ms / 1000.0
    timed_out = False
    while True:
        left = deadline - time.time()
        if left <= 0:
            timed_out = True
            break
        r, _, _ = select.select([rfd], [], [], left)
        if not r:
            timed_out = True
            break
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(rfd)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
    ms_taken = int((time.time() - t0) * 1000)
    try:
        res = json.loads(buf.decode())
    except Exception:
        why = 'timed out after %d ms' % ms if timed_out else 'the probe process died without a report (%d bytes)' % len(buf)
        res = {'attempted': False, 'succeeded': False, 'detail': why}
    return {'probe': name, 'attempted': bool(res.get('attempted')), 'succeeded': bool(res.get('succeeded')), 'detail': str(res.get('detail')), 'ms': ms_taken}


def handler(input):
    try:
        with open('/tmp/' + input['nonce'], 'w') as f:
            f.write(str(os.getpid()))
    except OSError:
        pass
    only = set(input.get('only') or [])
    skip = set(input.get('skip') or [])
    results = []
    for name, fn, ms, own in PROBES:
        if (name not in only) if only else (own or name in skip):
            continue
        results.append(_run_forked(name, fn, ms, input))
    return {'runtime': 'python', 'results': results}
`;
}
