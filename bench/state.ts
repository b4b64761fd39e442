import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, ROOT, serveCore } from './lib';

/**
 * Issue 18's figures for the state archive (docs/state.md): a core with `invocations` finished runs that
 * each logged ~1 KB (20 lines), then the export's time and size while the core runs (secrets left out,
 * and sealed with a passphrase), the same export on the files with the core stopped (`svc-emu export`),
 * and the import's time: on the files into a fresh data dir (`svc-emu import`, then the core's start on
 * it), and through a running core (`POST /_emu/state/import`).
 */
const LOGGER =
  'export default async function handler(input) {\n' +
  '  for (let i = 0; i < 20; i++) console.log(`line ${i} of run ${input.n}: ${"x".repeat(32)}`);\n' +
  '  return { n: input.n };\n}\n';

function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ ms: number; code: number; stderr: string }> {
  const t = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'svc-emu.mjs'), ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (code) => resolve({ ms: Math.round(performance.now() - t), code: code ?? 1, stderr }));
  });
}

const kb = (n: number) => Math.round(n / 102.4) / 10;

export async function stateBench(opts: { invocations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-state-'));
  const source = join(dir, 'source');
  let core = await serveCore(source);
  const sourceKey = core.apiKey;
  const call = client(core.url, sourceKey);
  const adminOf = (d: string) => JSON.parse(readFileSync(join(d, 'emulator.json'), 'utf8')).admin_token as string;
  const exportOnce = async (url: string, token: string, body: object) => {
    const t = performance.now();
    const res = await fetch(`${url}/_emu/state/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`export: ${res.status} ${await res.text()}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    return { ms: Math.round(performance.now() - t), bytes };
  };
  try {
    for (const [m, p, b] of [
      ['POST', '/v1/snippets', { name: 'logger', runtime: 'bun' }],
      ['POST', '/v1/snippets/logger/versions', { code: LOGGER }],
      ['PUT', '/v1/secrets/BENCH_SECRET', { value: 'bench-secret-value' }],
    ] as const) {
      const r = await call(m, p, b);
      if (r.status >= 300) throw new Error(`${m} ${p}: ${r.status} ${r.body}`);
    }
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < opts.invocations) {
          const n = next++;
          const r = await call('POST', '/v1/invoke/logger', { n });
          if (r.status !== 200) throw new Error(`invoke: ${r.status} ${r.body}`);
        }
      }),
    );
    const fillMs = Math.round(performance.now() - t0);
    const admin = adminOf(source);
    await exportOnce(core.url, admin, {}); // the first one pays for loading code paths
    const live = await exportOnce(core.url, admin, {});
    const sealed = await exportOnce(core.url, admin, { passphrase: 'bench passphrase' });
    const archive = join(dir, 'state.svcemu');
    writeFileSync(archive, live.bytes);
    await core.stop();
    const dbBytes = readFileSync(join(source, 'db.json')).length; // after the stop: the journal is in it then

    // On the files, no core running.
    const offlineExport = await cli(['export', join(dir, 'offline.svcemu'), '--data-dir', source]);
    if (offlineExport.code !== 0) throw new Error(`svc-emu export: ${offlineExport.stderr}`);
    const target = join(dir, 'target');
    const offlineImport = await cli(['import', archive, '--data-dir', target]);
    if (offlineImport.code !== 0) throw new Error(`svc-emu import: ${offlineImport.stderr}`);
    const started = await serveCore(target);
    // The source's key works there (keys travel hashed): the history answers.
    const listed = await client(started.url, sourceKey)('GET', '/v1/invocations?limit=1');
    await started.stop();

    // Through a running core, into its fresh state.
    core = await serveCore(join(dir, 'live-target'));
    const t1 = performance.now();
    const res = await fetch(`${core.url}/_emu/state/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminOf(join(dir, 'live-target'))}`, 'content-type': 'application/vnd.svc-emu.state+gzip' },
      body: live.bytes,
    });
    const liveImportMs = Math.round(performance.now() - t1);
    if (res.status !== 200) throw new Error(`import: ${res.status} ${await res.text()}`);
    const report = (await res.json()) as { counts: { invocations: number } };
    return {
      invocations: opts.invocations,
      fill_ms: fillMs,
      db_json_kb: kb(dbBytes),
      archive_kb: kb(live.bytes.length),
      archive_with_passphrase_kb: kb(sealed.bytes.length),
      export_running_core_ms: live.ms,
      export_with_passphrase_ms: sealed.ms,
      export_on_files_cli_ms: offlineExport.ms,
      import_on_files_cli_ms: offlineImport.ms,
      start_after_import_ready_ms: Math.round(started.readyMs),
      import_running_core_ms: liveImportMs,
      imported_invocations: report.counts.invocations,
      history_answers_after_start: listed.status === 200,
    };
  } finally {
    await core.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
