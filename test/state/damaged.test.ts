/**
 * What an import refuses, and that a refusal changes nothing (docs/state.md): truncated, a byte flipped
 * (in the gzip stream, and inside a part so only its sha256 tells), a foreign file, a newer format_version,
 * a wrong or missing passphrase — on the files (the data dir byte for byte as it was, a fresh one not even
 * made) and through a running core (422 archive_invalid, the state as it was). And the migration path: the
 * checked-in archive whose db is at schema_version 2 (test/state/make-fixture.ts) imports into a working state.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli } from '../helpers/cli';
import { expectProblem } from '../api/_util';
import { readTar, writeTar } from '../../server/state/tar';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Every file under `dir` with its bytes' sha256 and mode: what "byte-identical" compares. */
async function fingerprint(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        out[relative(dir, p) + '/'] = 'dir';
        await walk(p);
      } else if (e.isFile()) out[relative(dir, p)] = `${sha(await readFile(p))} ${(await lstat(p)).mode.toString(8)}`;
      else out[relative(dir, p)] = 'other'; // a socket, a link: there or not
    }
  };
  await walk(dir);
  return out;
}

/** The archive with its tar parts changed by `fn` (manifest first), gzip'd again. */
function rewrite(archive: Buffer, fn: (parts: { name: string; data: Buffer }[]) => void): Buffer {
  const parts = readTar(gunzipSync(archive)).map((p) => ({ name: p.name, data: Buffer.from(p.data) }));
  fn(parts);
  return gzipSync(writeTar(parts));
}

describe('damaged, foreign and newer archives', () => {
  let dir: string;
  let source: TestCore;
  let good: Buffer;
  let sealed: Buffer;
  const cases: [string, () => Buffer, string][] = [];

  beforeAll(async () => {
    dir = await tempDir();
    source = await startTestCore({ dataDir: join(dir, 'source') });
    expect((await source.call('POST', '/v1/snippets', { name: 'keep', runtime: 'bun' })).status).toBe(201);
    expect((await source.call('POST', '/v1/snippets/keep/versions', { code: 'export default async () => ({ ok: true });\n' })).status).toBe(
      201,
    );
    expect((await source.call('POST', '/v1/invoke/keep', {})).status).toBe(200);
    expect((await source.call('PUT', '/v1/secrets/TOKEN', { value: 'secret-value-123' })).status).toBeLessThan(300);
    const exp = async (body: object) =>
      Buffer.from(
        await (
          await fetch(`${source.url}/_emu/state/export`, {
            method: 'POST',
            headers: { authorization: `Bearer ${source.admin}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          })
        ).arrayBuffer(),
      );
    good = await exp({});
    sealed = await exp({ passphrase: 'the right passphrase' });
    cases.push(
      ['truncated', () => good.subarray(0, Math.floor(good.length / 2)), 'archive_invalid'],
      [
        'one byte flipped in the gzip stream',
        () => {
          const b = Buffer.from(good);
          b[Math.floor(b.length / 2)]! ^= 0x01;
          return b;
        },
        'archive_invalid',
      ],
      [
        'one byte flipped inside db.json (only its sha256 tells)',
        () =>
          rewrite(good, (parts) => {
            const db = parts.find((p) => p.name === 'db.json')!;
            db.data[10]! ^= 0x01;
          }),
        'archive_invalid',
      ],
      ['a foreign file (a gzip of something else)', () => gzipSync(Buffer.from('{"not":"an archive"}\n'.repeat(100))), 'archive_invalid'],
      ['a foreign file (not gzip at all)', () => Buffer.from('PK\u0003\u0004 a zip file, say'), 'archive_invalid'],
      [
        'a newer format_version',
        () =>
          rewrite(good, (parts) => {
            const m = JSON.parse(parts[0]!.data.toString('utf8'));
            m.format_version = 99;
            parts[0]!.data = Buffer.from(JSON.stringify(m));
          }),
        'archive_invalid',
      ],
      [
        'a cassette whose snippet is a path out of its folder (sha256 made to match)',
        () =>
          rewrite(good, (parts) => {
            const c = parts.find((p) => p.name === 'cassettes.json')!;
            c.data = Buffer.from(
              JSON.stringify([
                {
                  tenant: 'local',
                  snippet: '../../../tmp/evil',
                  name: 'x',
                  where: 'data_dir',
                  cassette: { log: { version: '1.2', entries: [] } },
                },
              ]),
            );
            const m = JSON.parse(parts[0]!.data.toString('utf8'));
            m.parts = m.parts.map((p: { name: string }) =>
              p.name === 'cassettes.json' ? { ...p, size: c.data.length, sha256: sha(c.data) } : p,
            );
            parts[0]!.data = Buffer.from(JSON.stringify(m));
          }),
        'archive_invalid',
      ],
      [
        'a db.json that fails the load check (sha256 made to match)',
        () =>
          rewrite(good, (parts) => {
            const db = parts.find((p) => p.name === 'db.json')!;
            const doc = JSON.parse(db.data.toString('utf8'));
            doc.snippets[0].runtime = 'cobol';
            db.data = Buffer.from(JSON.stringify(doc));
            const m = JSON.parse(parts[0]!.data.toString('utf8'));
            m.parts = m.parts.map((p: { name: string }) =>
              p.name === 'db.json' ? { ...p, size: db.data.length, sha256: sha(db.data) } : p,
            );
            parts[0]!.data = Buffer.from(JSON.stringify(m));
          }),
        'archive_invalid',
      ],
    );
  }, 60_000);

  afterAll(async () => {
    await source?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses each on the files, naming what is wrong, and leaves the data dir byte-identical (a fresh one not even made)', async () => {
    // A data dir with state (--replace would set it aside): the source's, its core stopped.
    const full = join(dir, 'full');
    const prev = await startTestCore({ dataDir: full });
    await prev.call('PUT', '/v1/store/k', { value: 1 });
    await prev.stop();
    const before = await fingerprint(full);
    const all: [string, () => Buffer, string][] = [...cases, ['encrypted secrets, wrong passphrase', () => sealed, 'passphrase_wrong']];
    const passFile = join(dir, 'wrong-pass');
    await writeFile(passFile, 'not the passphrase\n');
    for (const [what, make, code] of all) {
      const file = join(dir, 'bad.svcemu');
      await writeFile(file, make());
      const extra = code === 'passphrase_wrong' ? ['--passphrase-file', passFile] : [];
      const onFull = await runCli(['import', file, '--data-dir', full, '--replace', '--json', ...extra]);
      expect(onFull.code, `${what}: ${onFull.stdout}`).toBe(1);
      const out = JSON.parse(onFull.stdout);
      expect(out.code, what).toBe(code);
      expect(out.detail.length, what).toBeGreaterThan(20);
      expect(await fingerprint(full), `${what}: the data dir changed`).toEqual(before);
      const fresh = join(dir, 'fresh');
      const onFresh = await runCli(['import', file, '--data-dir', fresh, '--json', ...extra]);
      expect(onFresh.code, what).toBe(1);
      expect(existsSync(fresh), `${what}: a fresh data dir was made`).toBe(false);
    }
    // Human words too: what is wrong, on stderr.
    await writeFile(join(dir, 'bad.svcemu'), cases.find(([w]) => w === 'a newer format_version')![1]());
    const human = await runCli(['import', join(dir, 'bad.svcemu'), '--data-dir', join(dir, 'fresh')]);
    expect(human.stderr).toMatch(/format_version 99, written by a newer emulator/);
    await writeFile(join(dir, 'bad.svcemu'), gzipSync(Buffer.from('{"not":"an archive"}\n'.repeat(100))));
    expect((await runCli(['import', join(dir, 'bad.svcemu'), '--data-dir', join(dir, 'fresh')])).stderr).toMatch(
      /not a svc-emu state archive/,
    );
    await writeFile(join(dir, 'bad.svcemu'), good.subarray(0, 100));
    expect((await runCli(['import', join(dir, 'bad.svcemu'), '--data-dir', join(dir, 'fresh')])).stderr).toMatch(/the archive is damaged/);
  }, 120_000);

  it('refuses each through a running core (422 with the code) and the state stays as it was', async () => {
    const core = await startTestCore();
    try {
      await core.call('POST', '/v1/snippets', { name: 'mine', runtime: 'bun' });
      const send = (body: Buffer, headers: Record<string, string> = {}) =>
        core.call('POST', '/_emu/state/import?replace=true', undefined, {
          key: core.admin,
          raw: body,
          headers: { 'content-type': 'application/vnd.svc-emu.state+gzip', ...headers },
        });
      for (const [what, make, code] of cases) {
        const res = await send(make());
        expectProblem(res, 422, code);
        expect(res.json.detail, what).not.toMatch(/internal/);
      }
      expectProblem(await send(sealed), 422, 'passphrase_required');
      expectProblem(await send(sealed, { 'x-emu-passphrase': encodeURIComponent('wrong one!') }), 422, 'passphrase_wrong');
      const list = await core.call('GET', '/v1/snippets');
      expect(list.json.data.map((s: { name: string }) => s.name)).toEqual(['mine']);
      expect((await readdir(core.dataDir)).filter((n) => n.startsWith('replaced-'))).toEqual([]);
      // The right passphrase: accepted (replace), the old state kept aside and said.
      const ok = await send(sealed, { 'x-emu-passphrase': encodeURIComponent('the right passphrase') });
      expect(ok.status, ok.text).toBe(200);
      expect(ok.json.replaced).toMatch(/replaced-/);
      expect(existsSync(join(ok.json.replaced, 'db.json'))).toBe(true);
      const after = await core.call('GET', '/v1/snippets', undefined, { key: source.key });
      expect(after.json.data.map((s: { name: string }) => s.name)).toEqual(['keep']);
    } finally {
      await core.stop();
    }
  }, 120_000);

  it('svc-emu export: through the running core or on the files; secrets left out said loudly, or carried with a passphrase', async () => {
    const file = join(dir, 'cli.svcemu');
    const viaCore = await runCli(['export', file, '--data-dir', source.dataDir]);
    expect(viaCore.code, viaCore.stderr).toBe(0);
    expect(viaCore.stderr).toMatch(/SECRETS LEFT OUT[\s\S]*secret local\/TOKEN[\s\S]*webhook signing secret of tenant local/);
    expect(viaCore.stdout).toMatch(/^wrote .*cli\.svcemu \(\d+ bytes\): 1 tenant\(s\), 1 snippet\(s\)/);
    expect((await lstat(file)).mode & 0o777).toBe(0o600);
    expect((await readFile(file)).includes(Buffer.from('secret-value-123'))).toBe(false);
    process.env.SVC_EMU_PASSPHRASE = 'from the environment';
    try {
      const sealedViaCore = await runCli(['export', file, '--data-dir', source.dataDir, '--json']);
      expect(sealedViaCore.code, sealedViaCore.stdout).toBe(0);
      expect(sealedViaCore.stderr).toBe('');
      expect(JSON.parse(sealedViaCore.stdout).manifest.secrets).toMatchObject({ mode: 'encrypted', left_out: [] });
    } finally {
      delete process.env.SVC_EMU_PASSPHRASE;
    }
    // On the files: a stopped core's data dir, its inbox and state as they are.
    const stopped = join(dir, 'stopped');
    const c = await startTestCore({ dataDir: stopped });
    await c.call('POST', '/v1/snippets', { name: 'offline', runtime: 'python' });
    await c.stop();
    const onFiles = await runCli(['export', join(dir, 'offline.svcemu'), '--data-dir', stopped, '--json']);
    expect(onFiles.code, onFiles.stdout + onFiles.stderr).toBe(0);
    expect(JSON.parse(onFiles.stdout).manifest.counts).toMatchObject({ tenants: 1, snippets: 1 });
    expect(existsSync(join(stopped, 'emulator.json')), 'the lock was let go').toBe(false);
    const short = await runCli(['export', file, '--data-dir', stopped, '--passphrase-file', join(dir, 'short')], dir);
    expect(short.code).toBe(1); // the file does not exist: said, nothing written
  }, 120_000);

  it('imports the checked-in archive of schema_version 2 into a working state', async () => {
    const data = join(dir, 'from-schema2');
    const file = join(PROJECT_ROOT, 'fixtures', 'state', 'schema2-format1.svcemu');
    const imp = await runCli(['import', file, '--data-dir', data, '--json']);
    expect(imp.code, imp.stdout + imp.stderr).toBe(0);
    const report = JSON.parse(imp.stdout);
    expect(report.schema_version).toEqual({ archive: 2, now: expect.any(Number) });
    expect(report.notes.join('\n')).toMatch(/schema_version 2; brought up/);
    expect(imp.stderr).toMatch(/NO SECRETS[\s\S]*secret local\/LEFT_OUT/);
    const core = await startTestCore({ dataDir: data });
    try {
      // No key was shown in the archive (left out): a new one made with the operator power.
      const key = await runCli(['key', 'create', '--tenant', 'local', '--data-dir', data]);
      expect(key.code, key.stderr).toBe(0);
      const k = key.stdout.trim();
      const past = await core.call('GET', '/v1/invocations', undefined, { key: k });
      expect(past.json.data).toHaveLength(1);
      expect(past.json.data[0]).toMatchObject({ snippet: 'hello', status: 'succeeded', outcome: 'success' });
      const logs = await core.call('GET', `/v1/invocations/${past.json.data[0].id}/logs`, undefined, { key: k });
      expect(logs.text).toMatch(/hello archive/);
      expect((await core.call('GET', '/v1/store/visits', undefined, { key: k })).json.value).toBe(41);
      const run = await core.call('POST', '/v1/invoke/hello', { name: 'again' }, { key: k });
      expect(run.status, run.text).toBe(200);
      expect(run.json).toEqual({ greeting: 'hello again' });
    } finally {
      await core.stop();
    }
  }, 120_000);
});
