import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, serveCore, stats } from './lib';

/**
 * Issue 14's soak: a long-running core must not keep anything per invocation. Against the built core as a
 * separate process (`svc-emu serve`, started with node --expose-gc), one client, over loopback: `hello`
 * warm Bun hello invocations, then `logs` invocations that each log 1 MB. After a forced full GC
 * (`GET /_emu/memory?gc=1`) the core's RSS and heap are read after the first `baseline` hellos, at half
 * and at the end of the hellos, and before and after the 1 MB-log run. Every reading after the baseline
 * must be within `maxGrowth` (10%) of it: `ok` says whether they were (and the run exits non-zero if not).
 */
const HELLO = 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n';
const LOGS_1MB = 'const line = "x".repeat(999_999);\nexport default async function handler() { console.log(line); return { ok: true }; }\n';
const MB = 1024 * 1024;
/** Time spent in the calls themselves (the GC readings between them excluded). */
const seconds = (ms: number[]) => Math.round(ms.reduce((a, b) => a + b, 0) / 100) / 10;

export interface SoakOptions {
  hello: number;
  logs: number;
  baseline: number;
  maxGrowth?: number;
}

interface Reading {
  at: string;
  calls: number;
  rss_mb: number;
  heap_used_mb: number;
  heap_total_mb: number;
  external_mb: number;
}

export async function soakBench(opts: SoakOptions) {
  const maxGrowth = opts.maxGrowth ?? 0.1;
  if (!(opts.baseline > 0 && opts.baseline < opts.hello / 2 && opts.logs >= 0)) {
    throw new Error(`soak: the baseline (${opts.baseline}) must be above 0 and below half the hellos (${opts.hello})`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-soak-'));
  const core = await serveCore(dir, { nodeFlags: ['--expose-gc'] });
  const call = client(core.url, core.apiKey);
  const admin = JSON.parse(readFileSync(join(dir, 'emulator.json'), 'utf8')).admin_token as string;
  const asAdmin = client(core.url, admin);
  const ok = async (m: string, p: string, b?: unknown) => {
    const r = await call(m, p, b);
    if (r.status >= 300) throw new Error(`${m} ${p}: ${r.status} ${r.body}`);
    return JSON.parse(r.body || 'null');
  };
  const readings: Reading[] = [];
  let calls = 0;
  const read = async (at: string) => {
    const r = await asAdmin('GET', '/_emu/memory?gc=1');
    if (r.status !== 200) throw new Error(`/_emu/memory?gc=1: ${r.status} ${r.body}`);
    const m = JSON.parse(r.body) as { rss_bytes: number; heap_used_bytes: number; heap_total_bytes: number; external_bytes: number };
    const mb = (x: number) => Math.round((x / MB) * 10) / 10;
    const reading = {
      at,
      calls,
      rss_mb: mb(m.rss_bytes),
      heap_used_mb: mb(m.heap_used_bytes),
      heap_total_mb: mb(m.heap_total_bytes),
      external_mb: mb(m.external_bytes),
    };
    readings.push(reading);
    process.stderr.write(`soak: ${at} (${calls} calls): rss ${reading.rss_mb} MB, heap ${reading.heap_used_mb} MB\n`);
    return reading;
  };
  /** `n` invocations, one after the other; the latency of each goes into `ms`. */
  const drive = async (name: string, n: number, ms: number[]): Promise<number[]> => {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      const r = await call('POST', `/v1/invoke/${name}`, { name: 'soak' });
      ms.push(performance.now() - t);
      calls++;
      if (r.status !== 200) throw new Error(`invoke ${name} (call ${calls}): ${r.status} ${r.body.slice(0, 500)}`);
    }
    return ms;
  };

  try {
    for (const [name, code] of [
      ['hello', HELLO],
      ['logs-1mb', LOGS_1MB],
    ] as const) {
      await ok('POST', '/v1/snippets', { name, runtime: 'bun' });
      await ok('POST', `/v1/snippets/${name}/versions`, { code });
    }
    await read('start');
    const half = Math.floor(opts.hello / 2);
    const helloMs: number[] = [];
    await drive('hello', opts.baseline, helloMs);
    await read(`after ${opts.baseline} hellos (baseline)`);
    await drive('hello', half - opts.baseline, helloMs);
    await read(`after ${half} hellos`);
    await drive('hello', opts.hello - half, helloMs);
    await read(`after ${opts.hello} hellos`);
    await read('before the 1 MB-log run');
    const logsMs = await drive('logs-1mb', opts.logs, []);
    await read(`after ${opts.logs} invocations logging 1 MB`);
    const last = JSON.parse((await call('GET', '/v1/invocations?snippet=logs-1mb&limit=1')).body).data[0];
    const lastLogs = last ? JSON.parse((await call('GET', `/v1/invocations/${last.id}/logs`)).body) : null;
    const pool = JSON.parse((await asAdmin('GET', '/_emu/executor')).body).pool;

    const base = readings.find((r) => r.at.endsWith('(baseline)'))!;
    const growth = (x: number, b: number) => Math.round(((x - b) / b) * 1000) / 10;
    const later = readings.slice(readings.indexOf(base) + 1).map((r) => ({
      at: r.at,
      rss_growth_percent: growth(r.rss_mb, base.rss_mb),
      heap_growth_percent: growth(r.heap_used_mb, base.heap_used_mb),
    }));
    const worst = {
      rss_growth_percent: Math.max(...later.map((l) => l.rss_growth_percent)),
      heap_growth_percent: Math.max(...later.map((l) => l.heap_growth_percent)),
    };
    const passed = worst.rss_growth_percent <= maxGrowth * 100 && worst.heap_growth_percent <= maxGrowth * 100;
    if (!passed) {
      process.stderr.write(`soak: FAILED: growth after the baseline went over ${maxGrowth * 100}% (${JSON.stringify(worst)})\n`);
      process.exitCode = 1;
    }
    return {
      counts: { hello: opts.hello, logs_1mb: opts.logs, baseline: opts.baseline },
      readings,
      growth_from_baseline: later,
      worst,
      max_growth_percent: maxGrowth * 100,
      ok: passed,
      hello: { seconds: seconds(helloMs), latency: stats(helloMs) },
      logs_1mb: {
        seconds: seconds(logsMs),
        latency: stats(logsMs),
        last_outcome: last?.outcome,
        last_logs_bytes: lastLogs ? Buffer.byteLength(lastLogs.logs) : null,
      },
      pool,
    };
  } finally {
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
