import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { helloAnswer, leanClient } from './lean-http';
import { client, ROOT, serveCore, stats } from './lib';
import { HELLO, okCall } from './speed-core';

/**
 * `npm run bench -- profile [--invokes N]`: where the core's time goes on the warm path. Starts the built
 * core with `--cpu-prof`, drives N warm sync Bun hello invokes (max_cpu_percent 100) with the speed suite's
 * lean client, stops the core (the profile is written at its exit) and summarises the .cpuprofile: self
 * time by group (http/koa, auth, services, repository/lowdb, executor, runner-client, JSON, GC, …), by
 * source file and by function, each bundle location mapped back to its source through out/cli's source
 * maps. Writes bench/results/profile-<time>.md (and the raw profile beside it) and the same summary to
 * bench/results/profile-warm-path.md, the one the repository keeps.
 */
interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const RESULTS = join(ROOT, 'bench', 'results');
const KEPT = join(RESULTS, 'profile-warm-path.md');

/** Ordered: the first group whose test matches a frame (its mapped source, or its URL, and name) wins. */
const GROUPS: [string, (src: string, fn: string) => boolean][] = [
  ['GC', (_s, fn) => fn === '(garbage collector)'],
  ['idle (waiting: the runner, the client)', (_s, fn) => fn === '(idle)'],
  ['V8/native, unattributed', (_s, fn) => fn === '(program)' || fn === '(root)'],
  ['auth', (s, fn) => /server\/services\/tenants\.ts|server\/crypto\/|node:internal\/crypto/.test(s) || /authenticat/i.test(fn)],
  ['runner-client', (s) => /executor\/(runner-client|protocol)\.ts/.test(s)],
  ['executor', (s) => /(^|\/)executor\//.test(s)],
  ['repository/lowdb', (s) => /server\/storage\/|node_modules\/(lowdb|steno)\//.test(s)],
  ['services', (s) => /server\/(services|queue|webhooks|egress)\//.test(s)],
  [
    'http/koa',
    (s) =>
      /server\/(http|api)\/|node_modules\/(koa|@koa|koa-[a-z-]+|statuses|on-finished|http-errors|accepts|type-is|mime-types|negotiator|content-type|raw-body|cookies)\/|node:_http|node:internal\/http/.test(
        s,
      ),
  ],
  ['JSON', (s, fn) => /server\/json-text\.ts/.test(s) || (s === '' && /^(parse|stringify)$/.test(fn))],
  ['zod/contract', (s) => /node_modules\/zod\/|(^|\/)contract\//.test(s)],
  [
    'sockets/streams (HTTP and the runners’ pipes)',
    (s) => /node:net|node:internal\/(stream|streams|net|stream_base)|node:stream|node:internal\/child_process/.test(s),
  ],
  ['node: timers, events, other internals', (s) => s.startsWith('node:')],
  ['server, other', (s) => /(^|\/)server\//.test(s)],
];

/** A process's CPU time so far (user + system), ms, from /proc/<pid>/stat (clock ticks of 10 ms). */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export async function profileBench(opts: { invokes: number; log: (line: string) => void }) {
  mkdirSync(RESULTS, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const name = `profile-${stamp}.cpuprofile`;
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-profile-'));
  const core = await serveCore(dataDir, {
    nodeFlags: ['--cpu-prof', '--cpu-prof-dir', RESULTS, '--cpu-prof-name', name, '--cpu-prof-interval', '250'],
  });
  let latency;
  /** The timed invokes' window on the monotonic clock, in µs: V8's profile timestamps use the same clock here. */
  let window: [number, number] | null = null;
  /** The core's CPU time (user + system, the kernel's count) over the same window, in ms. */
  let cpuMs: number | null = null;
  try {
    const ok = okCall(client(core.url, core.apiKey));
    await ok('POST', '/v1/snippets', { name: 'hello', runtime: 'bun' });
    await ok('POST', '/v1/snippets/hello/versions', { code: HELLO.bun, max_cpu_percent: 100 });
    const c = leanClient({
      name: 'emulator hello',
      url: core.url,
      method: 'POST',
      path: '/v1/invoke/hello',
      headers: { authorization: `Bearer ${core.apiKey}` },
      body: { name: 'bench' },
      expect: helloAnswer,
    });
    const ms: number[] = [];
    const nowUs = () => Number(process.hrtime.bigint() / 1000n);
    try {
      for (let i = -200; i < opts.invokes; i++) {
        if (i === 0) {
          window = [nowUs(), 0];
          cpuMs = -processCpuMs(core.child.pid);
        }
        const t = performance.now();
        await c.hit();
        if (i >= 0) ms.push(performance.now() - t);
      }
      if (window) window[1] = nowUs();
      if (cpuMs !== null) cpuMs += processCpuMs(core.child.pid);
    } finally {
      c.close();
    }
    latency = stats(ms);
    opts.log(`profile: ${opts.invokes} warm invokes, p50 ${latency.p50_ms} ms`);
  } finally {
    await core.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const path = join(RESULTS, name);
  if (!existsSync(path)) throw new Error(`no profile at ${path}: did the core exit cleanly? (${readdirSync(RESULTS).join(', ')})`);
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const md = summarise(profile, { invokes: opts.invokes, latency, raw: relative(ROOT, path), window, cpuMs });
  const mdPath = join(RESULTS, `profile-${stamp}.md`);
  writeFileSync(mdPath, md);
  writeFileSync(KEPT, md);
  opts.log(`profile: ${relative(ROOT, mdPath)} (and ${relative(ROOT, KEPT)}); raw: ${relative(ROOT, path)}`);
  return { summary: relative(ROOT, mdPath), kept: relative(ROOT, KEPT), raw: relative(ROOT, path), latency };
}

/** Maps a frame in a bundle (out/…/*.mjs with a .map beside it) back to its source; other frames keep their URL. */
function sourceMapper() {
  const maps = new Map<string, { map: SourceMap; dir: string } | null>();
  return (url: string, line: number, column: number): { src: string; line: number } => {
    if (!url.startsWith('file://')) return { src: url, line: line + 1 };
    const file = fileURLToPath(url);
    if (!maps.has(file)) {
      const mapFile = `${file}.map`;
      maps.set(file, existsSync(mapFile) ? { map: new SourceMap(JSON.parse(readFileSync(mapFile, 'utf8'))), dir: dirname(mapFile) } : null);
    }
    const m = maps.get(file);
    const rel = (p: string) => relative(ROOT, p);
    if (!m) return { src: rel(file), line: line + 1 };
    const e = m.map.findEntry(line, column) as { originalSource?: string; originalLine?: number };
    if (!e.originalSource) return { src: rel(file), line: line + 1 };
    const src = e.originalSource.startsWith('file://') ? fileURLToPath(e.originalSource) : resolve(m.dir, e.originalSource);
    return { src: rel(src), line: (e.originalLine ?? 0) + 1 };
  };
}

function summarise(
  p: CpuProfile,
  run: {
    invokes: number;
    latency: ReturnType<typeof stats> | undefined;
    raw: string;
    window: [number, number] | null;
    cpuMs: number | null;
  },
): string {
  // Only the samples taken while the timed invokes ran (start-up, set-up and warm-up left out), when the
  // window falls inside the profile (the same monotonic clock); else the whole profile, said so below.
  const inProfile = !!run.window && run.window[0] >= p.startTime && run.window[1] <= p.endTime;
  const [from, to] = inProfile ? run.window! : [p.startTime, p.endTime];
  const self = new Map<number, number>(); // node id → µs
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    if (at < from || at > to) continue;
    const dt = p.timeDeltas[i + 1] ?? 0; // the time until the next sample belongs to this one
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
  }
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const map = sourceMapper();
  /**
   * A native frame (no URL: readFileUtf8, writev…) or one of Node's own (node:…) is charged to its nearest
   * caller in the project or its packages: the code that chose to read a file or write a socket.
   */
  const caller = (node: CpuProfileNode): { src: string; line: number } | null => {
    for (let id = parent.get(node.id); id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (f.url && !f.url.startsWith('node:')) return map(f.url, f.lineNumber, f.columnNumber);
    }
    return null;
  };
  const byGroup = new Map<string, number>();
  const byFile = new Map<string, number>();
  const byFn = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const node of p.nodes) {
    const us = self.get(node.id) ?? 0;
    if (!us) continue;
    const fn = node.callFrame.functionName || '(anonymous)';
    const own = map(node.callFrame.url, node.callFrame.lineNumber, node.callFrame.columnNumber);
    const from = (!own.src && !fn.startsWith('(')) || own.src.startsWith('node:') ? caller(node) : null;
    const { src, line } = from ?? own;
    const group = GROUPS.find(([, test]) => test(src, fn))?.[0] ?? 'other';
    total += us;
    if (fn === '(idle)') idle += us;
    byGroup.set(group, (byGroup.get(group) ?? 0) + us);
    if (src) byFile.set(src, (byFile.get(src) ?? 0) + us);
    const where = from ? `${own.src || 'native'} ← ${src}:${line}` : src ? `${src}:${line}` : '(native)';
    byFn.set(`${fn} — ${where}`, (byFn.get(`${fn} — ${where}`) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number, of: number) => `${((us / of) * 100).toFixed(1)}%`;
  const msOf = (us: number) => (us / 1000).toFixed(0);
  const perInvoke = (us: number) => (us / run.invokes).toFixed(1);
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  const table = (title: string, rows: [string, number][], withShare: boolean) => [
    `| ${title} | self ms | µs per invoke | share of busy |`,
    '|---|---:|---:|---:|',
    ...rows.map(
      ([k, us]) =>
        `| ${k.replace(/\|/g, '\\|')} | ${msOf(us)} | ${perInvoke(us)} | ${withShare && !/^\(?idle/.test(k) ? pct(us, busy) : ''} |`,
    ),
  ];
  const l = run.latency;
  return [
    '# Where the core’s time goes on the warm path',
    '',
    `Generated by \`npm run bench -- profile --invokes ${run.invokes}\` on ${new Date().toISOString()} (the built core under \`node --cpu-prof\`,`,
    '250 µs sampling; warm sync Bun hello at max_cpu_percent 100, one client, keep-alive). Self time only: a function’s own',
    'samples, not its callees’. Bundle frames are mapped to their sources through out/cli’s source maps. The runner',
    '(Bun) is another process: its time shows here as the core’s idle time. Raw profile (not committed): `' + run.raw + '`.',
    '',
    `- ${run.invokes} invokes${l ? `, latency p50 ${l.p50_ms} ms, p99 ${l.p99_ms} ms` : ''}; ${inProfile ? 'the samples of the timed invokes' : 'the whole profile (start-up included: the invokes’ window was not inside it)'}, ${msOf(to - from)} ms: core busy ${msOf(busy)} ms (${pct(busy, total)}), **${perInvoke(busy)} µs of core CPU per invoke**.`,
    ...(run.cpuMs !== null
      ? [
          `- The kernel's count of the core's CPU time over the same invokes (\`/proc/<pid>/stat\`, user + system): ${run.cpuMs.toFixed(0)} ms, **${((run.cpuMs * 1000) / run.invokes).toFixed(1)} µs per invoke**. Both figures grow on a loaded host (the sampler's own cost included), so compare them only within one run or between runs at a similar load (load average ${loadavg()[0]!.toFixed(1)} at the end of this one).`,
        ]
      : []),
    '- A native frame (readFileUtf8, writev, …) or one of Node’s own (node:…) is charged, in the group and file tables, to its nearest',
    '  caller in the project or its packages (the code that chose to read the file or write the socket); the function table shows both (`frame ← caller`).',
    '',
    '## By group',
    '',
    ...table('group', top(byGroup, 50), true),
    '',
    '## By source file (top 20)',
    '',
    ...table('file', top(byFile, 20), true),
    '',
    '## By function (top 30)',
    '',
    ...table('function — source:line', top(byFn, 30), true),
    '',
  ].join('\n');
}
