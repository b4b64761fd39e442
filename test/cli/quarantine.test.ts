// Issue 14: what a start could not load is reported by the CLI — `svc-emu doctor` (human and --json)
// lists each quarantined record with its problem and what to do, an offline command on the data dir
// quarantines instead of failing, and `serve` says so in its banner.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main, type CliIO } from '../../server/cli/main';
import { emptyDb } from '../../server/storage/schema';
import { tempDir } from '../helpers/core';

const T = '2026-11-01T00:00:00.000Z';
let dir: string;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function io(cwd: string, untilSignal: () => Promise<string> = () => new Promise(() => {})) {
  const out = { stdout: '', stderr: '' };
  const cli: CliIO = { stdout: (t) => void (out.stdout += t), stderr: (t) => void (out.stderr += t), cwd, untilSignal };
  return { cli, out };
}

async function run(argv: string[]) {
  const { cli, out } = io('/');
  return { code: await main(argv, cli), ...out };
}

/** A data dir whose db.json holds one good and one out-of-range store record (a year-33715 expiry). */
async function badDataDir(): Promise<string> {
  dir = await tempDir('svc-emu-cli-quarantine-');
  const doc = {
    ...emptyDb(),
    store: [
      { tenant_id: 'ten_x', key: 'far', value: 1, size: 1, expires_at: '33715-06-01T00:00:00.000Z', created_at: T, updated_at: T },
      { tenant_id: 'ten_x', key: 'fine', value: 2, size: 1, expires_at: null, created_at: T, updated_at: T },
    ],
  };
  await writeFile(join(dir, 'db.json'), JSON.stringify(doc));
  return dir;
}

describe('the quarantine in the CLI', () => {
  it('an offline command loads past a bad record (kept aside), and doctor lists it with what to do', async () => {
    const d = await badDataDir();
    const original = await readFile(join(d, 'db.json'), 'utf8');
    const list = await run(['tenant', 'list', '--data-dir', d]);
    expect(list, list.stderr).toMatchObject({ code: 0 });
    expect(list.stderr).toBe(
      `svc-emu: 1 record(s) failed validation and were set aside; kept in ${join(d, 'quarantine')} (svc-emu doctor lists them)\n`,
    );
    const kept = await readdir(join(d, 'quarantine'));
    expect(kept.filter((f) => f.endsWith('.report.json'))).toHaveLength(1);
    const copy = kept.find((f) => f.endsWith('.db.json'))!;
    expect(await readFile(join(d, 'quarantine', copy), 'utf8')).toBe(original);
    expect(JSON.parse(await readFile(join(d, 'db.json'), 'utf8')).store.map((r: { key: string }) => r.key)).toEqual(['fine']);

    const human = await run(['doctor', '--data-dir', d]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`quarantine  1 record(s) kept aside in ${join(d, 'quarantine')}`);
    expect(human.stdout).toContain('db.json: store key "far" of "ten_x"');
    expect(human.stdout).toMatch(/expires_at: Invalid ISO datetime/);
    expect(human.stdout).toMatch(/→ The key reads as missing\. Fix the value and write it again \(PUT \/v1\/store\/\{key\}/);

    const json = await run(['doctor', '--json', '--data-dir', d]);
    const report = JSON.parse(json.stdout);
    expect(report.quarantine).toMatchObject({
      count: 1,
      entries: [{ source: 'db.json', collection: 'store', index: 0, label: 'store key "far" of "ten_x"' }],
    });
    expect(report.notes.join('\n')).toMatch(/1 record\(s\) failed validation/);
  });

  it('doctor on a clean data dir says the quarantine is empty', async () => {
    dir = await tempDir('svc-emu-cli-quarantine-');
    const human = await run(['doctor', '--data-dir', dir]);
    expect(human.stdout).toContain(`quarantine  empty (${join(dir, 'quarantine')})`);
  });

  it('serve says in its banner that records are quarantined', async () => {
    const d = await badDataDir();
    let signal!: (s: string) => void;
    const { cli, out } = io(d, () => new Promise<string>((res) => (signal = res)));
    const done = main(['serve', '--port', '0', '--spares', 'plain', '--log-format', 'json', '--data-dir', d], cli);
    const deadline = Date.now() + 15_000;
    while (!out.stdout.includes('Press Ctrl+C') && Date.now() < deadline) {
      const early = await Promise.race([done, new Promise((r) => setTimeout(() => r(null), 20))]);
      if (early !== null) throw new Error(`serve exited with ${String(early)}: ${out.stderr}`);
    }
    expect(out.stdout).toContain(`QUARANTINE  1 record(s) failed validation at load and are kept aside in ${join(d, 'quarantine')}`);
    expect(out.stderr).toMatch(/"level":"error","msg":"records that failed validation were quarantined"/);
    signal('SIGTERM');
    expect(await done).toBe(0);
  }, 30_000);
});
