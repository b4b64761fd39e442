// `npm run demo` (scripts/demo.mjs): the fake model paced like a real one, the core on the example workspace
// with the agent examples set up; a Mastra agent's answer streams in token by token; Ctrl+C (SIGINT) stops
// everything it started. Real processes: the demo, the fake provider, `svc-emu serve` and its runners.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

let demo: ChildProcess | null = null;
let dataDir: string | null = null;
const seen = new Set<number>();

/** Every live process below `pid` (from /proc: a process's parent is field 4 of its stat line). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z') parents.set(Number(name), Number(fields[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parents) {
      if (parent !== p) continue;
      out.push(child);
      walk(child);
    }
  };
  walk(pid);
  return out;
}
const isAlive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
};

afterAll(async () => {
  // Only what this test started, by pid, if the test failed before stopping it.
  for (const pid of [...(demo?.pid ? [demo.pid] : []), ...seen]) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('npm run demo', () => {
  it('streams the Mastra agent token by token from the paced fake model, and Ctrl+C stops everything', async () => {
    dataDir = await tempDir('svc-emu-demo-');
    demo = spawn(
      process.execPath,
      [join(PROJECT_ROOT, 'scripts', 'demo.mjs'), '--no-setup', '--json', '--port', '0', '--data-dir', dataDir, '--first-token-ms', '300'],
      { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    demo.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((res) => demo!.once('exit', (code) => res(code)));
    const line = await Promise.race([
      new Promise<string>((res) => createInterface({ input: demo!.stdout! }).once('line', res)),
      exited.then((code) => Promise.reject(new Error(`demo exited (${code}) before it was ready:\n${stderr}`))),
    ]);
    const info = JSON.parse(line) as { url: string; api_key: string; gui_url: string; provider_url: string };
    expect(info.gui_url).toMatch(/\/\?token=emu_/);
    for (const pid of descendants(demo.pid!)) seen.add(pid);
    expect(seen.size, 'the fake provider and the core').toBeGreaterThanOrEqual(2);

    // The secrets and the integration are set (names only: values are never returned).
    const auth = { authorization: `Bearer ${info.api_key}`, 'content-type': 'application/json' };
    const secrets = (await (await fetch(`${info.url}/v1/secrets`, { headers: auth })).json()) as { data: { name: string }[] };
    expect(secrets.data.map((s) => s.name).sort()).toEqual(['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'OPENAI_MODEL', 'WEATHER_TOKEN']);

    // Stream the Mastra agent: each chunk's arrival time.
    const t0 = performance.now();
    const res = await fetch(`${info.url}/v1/invoke/mastra-agent?env=dev`, {
      method: 'POST',
      headers: { ...auth, 'x-invoke-mode': 'stream' },
      body: JSON.stringify({ prompt: 'What is the weather in Paris?' }),
    });
    expect(res.status).toBe(200);
    const chunks: { at: number; token: string }[] = [];
    let result: { output: { answer: string } } | null = null;
    const decoder = new TextDecoder();
    let buf = '';
    for await (const piece of res.body!) {
      buf += decoder.decode(piece, { stream: true });
      let end: number;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (event === 'chunk')
          chunks.push({ at: performance.now() - t0, token: (JSON.parse(data!) as { data: { token: string } }).data.token });
        if (event === 'result') result = JSON.parse(data!) as typeof result;
        if (event === 'error') throw new Error(`the stream failed: ${data}\n${stderr}`);
      }
    }
    expect(result!.output.answer).toBe('Tool said: {"city":"Paris","forecast":"sunny","temperature_c":21}');
    expect(chunks.map((c) => c.token).join('')).toBe(result!.output.answer);
    // Token by token, spaced out as a model's: many small tokens, not one burst.
    expect(chunks.length).toBeGreaterThanOrEqual(10);
    const gaps = chunks.slice(1).map((c, i) => c.at - chunks[i]!.at);
    const sorted = [...gaps].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    const spread = chunks.at(-1)!.at - chunks[0]!.at;
    console.log(`demo stream: ${chunks.length} tokens over ${spread.toFixed(0)} ms, median gap ${median.toFixed(1)} ms`);
    expect(median, `gaps ${gaps.map((g) => g.toFixed(0)).join(', ')}`).toBeGreaterThanOrEqual(20);
    expect(spread).toBeGreaterThanOrEqual(20 * (chunks.length - 1));

    // Ctrl+C: the demo and everything below it stop; the exit is clean.
    for (const pid of descendants(demo.pid!)) seen.add(pid);
    demo.kill('SIGINT');
    expect(await exited).toBe(0);
    const deadline = Date.now() + 10_000;
    while ([...seen].some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect([...seen].filter(isAlive), 'processes left running').toEqual([]);
  }, 120_000);
});
