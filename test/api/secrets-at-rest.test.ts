/**
 * No secret value or credential is kept in plain text anywhere under the data dir (issue 2), yet all of
 * them survive a restart.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { newTenant } from './_util';

const dirs: string[] = [];
const cores: TestCore[] = [];
afterAll(async () => {
  for (const c of cores) await c.stop().catch(() => {});
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(p)));
    // Symlinks point out of the data dir (the sandboxes' link to the shared runtime node_modules): not state.
    else if (!entry.isSymbolicLink()) out.push(p);
  }
  return out;
}

/** The ways a value could sit in a file in a readable or trivially decodable form. */
function encodings(value: string): [string, Buffer][] {
  const utf8 = Buffer.from(value, 'utf8');
  return [
    ['utf8', utf8],
    ['utf16le', Buffer.from(value, 'utf16le')],
    ['base64', Buffer.from(utf8.toString('base64').replace(/=+$/, ''))],
    ['base64url', Buffer.from(utf8.toString('base64url'))],
    ['hex', Buffer.from(utf8.toString('hex'))],
    ['HEX', Buffer.from(utf8.toString('hex').toUpperCase())],
    ['json-escaped', Buffer.from(JSON.stringify(value).slice(1, -1))],
  ];
}

describe('secrets at rest', () => {
  it('no secret value, API key, webhook secret or admin token is in plain text under the data dir; all survive a restart', async () => {
    const dataDir = await tempDir();
    dirs.push(dataDir);
    const core = await startTestCore({ dataDir });
    cores.push(core);

    const secretValues = {
      OPENAI_API_KEY: 'sk-PLAINTEXT-CANARY-0a1b2c3d4e5f6a7b8c9d',
      DB_PASSWORD: 'pw-PLAINTEXT-CANARY-correct horse battery staple',
      UNICODE_SECRET: 'üñíçødé-PLAINTEXT-CANARY-秘密',
      LONG_SECRET: 'L'.repeat(20) + '-PLAINTEXT-CANARY-' + 'x'.repeat(4000),
    };
    for (const [name, value] of Object.entries(secretValues)) {
      const r = await core.call('PUT', `/v1/secrets/${name}`, { value });
      expect(r.status, r.text).toBe(201);
    }
    // replace one: the old value must be gone too
    const replacedOld = 'sk-PLAINTEXT-CANARY-replaced-old-value';
    expect((await core.call('PUT', '/v1/secrets/ROTATED', { value: replacedOld })).status).toBe(201);
    const rotatedNew = 'sk-PLAINTEXT-CANARY-rotated-new-value';
    expect((await core.call('PUT', '/v1/secrets/ROTATED', { value: rotatedNew })).status).toBe(200);
    // a deleted secret leaves nothing behind
    const deletedValue = 'sk-PLAINTEXT-CANARY-deleted-value';
    expect((await core.call('PUT', '/v1/secrets/DELETED', { value: deletedValue })).status).toBe(201);
    expect((await core.call('DELETE', '/v1/secrets/DELETED')).status).toBe(204);

    const otherKey = await newTenant(core, 'other');
    const extraLocal = await core.call('POST', '/_emu/tenants/local/keys', undefined, { key: core.admin });
    expect(extraLocal.status).toBe(201);
    const otherSecret = 'sk-PLAINTEXT-CANARY-other-tenant';
    expect((await core.call('PUT', '/v1/secrets/OTHER', { value: otherSecret }, { key: otherKey })).status).toBe(201);

    // store values, small and large, and a version, so db.json and blobs hold real content
    expect((await core.call('PUT', '/v1/store/small', { value: { hello: 'world' } })).status).toBe(201);
    expect((await core.call('PUT', '/v1/store/large', { value: 'v'.repeat(100_000) })).status).toBe(201);
    expect((await core.call('POST', '/v1/snippets', { name: 'rest', runtime: 'bun' })).status).toBe(201);
    expect(
      (await core.call('POST', '/v1/snippets/rest/versions', { code: 'export default async function handler(){ return { ok: 1 } }' }))
        .status,
    ).toBe(201);
    expect(
      (await core.call('PUT', '/v1/integrations/llm', { provider: 'openai', auth: { type: 'bearer', secret: 'OPENAI_API_KEY' } })).status,
    ).toBe(201);

    const whOld = (await core.call('GET', '/v1/tenant/webhook-secret')).json.secret as string;
    const whNew = (await core.call('POST', '/v1/tenant/webhook-secret')).json.secret as string;
    const whOther = (await core.call('GET', '/v1/tenant/webhook-secret', undefined, { key: otherKey })).json.secret as string;
    expect(whNew).not.toBe(whOld);

    const localKey = core.key;
    const admin = core.admin;
    await core.stop();

    const needles: [string, string][] = [
      ...Object.entries(secretValues).map(([n, v]) => [`secret ${n}`, v] as [string, string]),
      ['replaced secret (old)', replacedOld],
      ['replaced secret (new)', rotatedNew],
      ['deleted secret', deletedValue],
      ['other tenant secret', otherSecret],
      ['local API key', localKey],
      ['local API key body', localKey.slice('svc_'.length)],
      ['other tenant key', otherKey],
      ['extra local key', extraLocal.json.key],
      ['webhook secret (current)', whNew],
      ['webhook secret (current) body', whNew.slice('whsec_'.length)],
      ['webhook secret (rotated away)', whOld.slice('whsec_'.length)],
      ['other tenant webhook secret', whOther.slice('whsec_'.length)],
      ['admin token', admin],
      ['admin token body', admin.slice('emu_'.length)],
    ];
    const files = await filesUnder(dataDir);
    expect(files.map((f) => f.slice(dataDir.length + 1))).toEqual(expect.arrayContaining(['db.json', 'secret.key']));
    expect(files.some((f) => f.includes(`${join(dataDir, 'blobs')}`))).toBe(true);
    const found: string[] = [];
    for (const file of files) {
      const content = await readFile(file);
      for (const [label, value] of needles) {
        for (const [enc, bytes] of encodings(value)) {
          if (content.includes(bytes)) found.push(`${label} (${enc}) in ${file.slice(dataDir.length + 1)}`);
        }
      }
    }
    expect(found).toEqual([]);
    // the check itself finds what is there: the store value and the code are in the files in clear
    const all = Buffer.concat(await Promise.all(files.map((f) => readFile(f))));
    expect(all.includes(Buffer.from('"hello":"world"'))).toBe(true);
    expect(all.includes(Buffer.from('return { ok: 1 }'))).toBe(true);

    // ---- restart on the same data dir
    const again = await startTestCore({ dataDir });
    cores.push(again);
    expect(again.key).toBe(localKey); // the local key is shown again (it is sealed, not hashed only)
    expect(again.emu.firstStart).toBe(false);
    const list = await again.call('GET', '/v1/secrets');
    expect(list.status).toBe(200);
    expect(list.json.data.map((s: { name: string }) => s.name).sort()).toEqual([...Object.keys(secretValues), 'ROTATED'].sort());
    const local = again.emu.services.tenants.get('local');
    expect(again.emu.services.secrets.reveal(local)).toEqual({ ...secretValues, ROTATED: rotatedNew });
    expect(again.emu.services.secrets.reveal(again.emu.services.tenants.get('other'))).toEqual({ OTHER: otherSecret });
    // every key still works, each for its own tenant
    for (const [key, tenantSecret] of [
      [localKey, 'OPENAI_API_KEY'],
      [extraLocal.json.key, 'OPENAI_API_KEY'],
      [otherKey, 'OTHER'],
    ] as const) {
      const r = await again.call('GET', '/v1/secrets', undefined, { key });
      expect(r.status).toBe(200);
      expect(r.json.data.map((s: { name: string }) => s.name)).toContain(tenantSecret);
    }
    expect((await again.call('GET', '/v1/tenant/webhook-secret')).json.secret).toBe(whNew);
    expect((await again.call('GET', '/v1/tenant/webhook-secret', undefined, { key: otherKey })).json.secret).toBe(whOther);
    expect((await again.call('GET', '/v1/store/large')).json.value).toBe('v'.repeat(100_000));
    expect((await again.call('GET', '/v1/integrations/llm')).json.secret_present).toBe(true);
    // a fresh admin token per start; the old one no longer opens /_emu
    expect(again.admin).not.toBe(admin);
    expect((await again.call('GET', '/_emu/info', undefined, { key: admin })).status).toBe(401);
  });

  it('without secret.key the secrets cannot be read, and the key file is not derivable from db.json', async () => {
    const dataDir = await tempDir();
    dirs.push(dataDir);
    const core = await startTestCore({ dataDir });
    cores.push(core);
    expect((await core.call('PUT', '/v1/secrets/X', { value: 'sk-PLAINTEXT-CANARY-needs-key' })).status).toBe(201);
    await core.stop();
    const keyText = (await readFile(join(dataDir, 'secret.key'), 'utf8')).trim();
    expect(Buffer.from(keyText, 'base64')).toHaveLength(32);
    const db = await readFile(join(dataDir, 'db.json'), 'utf8');
    expect(db).not.toContain(keyText);
    const sealed = JSON.parse(db).secrets[0].sealed as string;
    expect(sealed).toMatch(/^v1\./);
    expect(sealed).not.toContain('CANARY');
  });
});
