import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { client, ROOT, stats } from './lib';

/**
 * Issue 4's figure: save-to-live, from a file written in the workspace to the first invocation that
 * returns the new output (debounce, code check, version, deploy, retire, cold start included), for Bun
 * and Python over 20 edits each, against the built core (`svc-emu serve --workspace`).
 */
const CODE = {
  bun: (i: number) => ['index.ts', `export default async function handler() { return { edit: ${i} }; }\n`] as const,
  python: (i: number) => ['main.py', `def handler(input):\n    return {"edit": ${i}}\n`] as const,
};

export async function workspaceBench(opts: { edits: number }) {
  const ws = mkdtempSync(join(tmpdir(), 'svc-emu-bench-ws-'));
  const data = mkdtempSync(join(tmpdir(), 'svc-emu-bench-data-'));
  for (const rt of ['bun', 'python'] as const) {
    mkdirSync(join(ws, 'snippets', `live-${rt}`), { recursive: true });
    const [file, code] = CODE[rt](0);
    writeFileSync(join(ws, 'snippets', `live-${rt}`, file), code);
  }
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'svc-emu.mjs'), 'serve', '--port', '0', '--json', '--data-dir', data, '--workspace', ws], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  try {
    const info = JSON.parse(await new Promise<string>((r) => createInterface({ input: child.stdout! }).once('line', r))) as { url: string; api_key: string };
    const call = client(info.url, info.api_key);
    const out: Record<string, unknown> = {};
    for (const rt of ['bun', 'python'] as const) {
      const samples: number[] = [];
      for (let i = 1; i <= opts.edits; i++) {
        const [file, code] = CODE[rt](i);
        const t0 = performance.now();
        writeFileSync(join(ws, 'snippets', `live-${rt}`, file), code);
        for (;;) {
          const r = await call('POST', `/v1/invoke/live-${rt}?env=dev`, {});
          if (r.status === 200 && JSON.parse(r.body).edit === i) break;
          if (performance.now() - t0 > 10_000) throw new Error(`edit ${i} of live-${rt} not live after 10 s`);
          await new Promise((res) => setTimeout(res, 2));
        }
        samples.push(performance.now() - t0);
        await new Promise((res) => setTimeout(res, 100)); // let the replacement spare start
      }
      out[`save_to_live_${rt}`] = stats(samples);
    }
    out.note = 'file written → first invocation answering the new output; includes the 50 ms debounce, code check, version, deploy and a cold start';
    return out;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(ws, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}
