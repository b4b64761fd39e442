/**
 * Makes fixtures/state/schema2-format1.svcemu, the checked-in older archive test/state/damaged.test.ts
 * imports: a real export (a Bun snippet, a finished invocation with logs, a store value, a secret left
 * out) whose db.json is then written back as schema_version 2 was (no journal_seq, no webhook rotation
 * fields, no attempts/callback/parity_warnings on invocations, none of the later optional fields), with
 * its manifest's sha256 and schema_version to match. Run: node --import tsx test/state/make-fixture.ts
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { startTestCore, PROJECT_ROOT } from '../helpers/core';
import { readTar, writeTar } from '../../server/state/tar';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function main(): Promise<void> {
  const core = await startTestCore();
  try {
    const must = async (p: Promise<{ status: number; text: string }>) => {
      const r = await p;
      if (r.status >= 300) throw new Error(`${r.status} ${r.text}`);
    };
    await must(core.call('POST', '/v1/snippets', { name: 'hello', runtime: 'bun', description: 'from a schema 2 archive' }));
    await must(
      core.call('POST', '/v1/snippets/hello/versions', {
        code: 'export default async function handler(input) {\n  console.log("hello", input.name);\n  return { greeting: `hello ${input.name}` };\n}\n',
      }),
    );
    await must(core.call('PUT', '/v1/snippets/hello/environments/prod', { version: 1 }));
    await must(core.call('POST', '/v1/invoke/hello', { name: 'archive' }));
    await must(core.call('PUT', '/v1/store/visits', { value: 41 }));
    await must(core.call('PUT', '/v1/secrets/LEFT_OUT', { value: 'never-in-the-archive' }));
    const res = await fetch(`${core.url}/_emu/state/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${core.admin}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const parts = readTar(gunzipSync(Buffer.from(await res.arrayBuffer())));
    const manifest = JSON.parse(parts[0]!.data.toString('utf8'));
    const db = JSON.parse(parts.find((p) => p.name === 'db.json')!.data.toString('utf8'));
    delete db.journal_seq;
    db.schema_version = 2;
    for (const t of db.tenants) {
      delete t.previous_webhook_secret;
      delete t.previous_webhook_secret_expires_at;
    }
    for (const v of db.versions) delete v.egress;
    for (const i of db.invocations) {
      for (const k of [
        'attempts',
        'callback',
        'parity_warnings',
        'egress',
        'egress_blob',
        'stored_input_blob',
        'agent_blob',
        'events_blob',
        'queue_wait_ms',
        'input_truncated',
        'overrides',
      ])
        delete i[k];
    }
    const dbBytes = Buffer.from(JSON.stringify(db));
    const kept = parts.slice(1).map((p) => (p.name === 'db.json' ? { name: p.name, data: dbBytes } : p));
    manifest.schema_version = 2;
    manifest.emulator_version = '0.0.9 (schema 2 fixture)';
    manifest.parts = kept.map((p) => ({ name: p.name, size: p.data.length, sha256: sha(p.data) }));
    const tar = writeTar(
      [{ name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest, null, 2) + '\n') }, ...kept],
      Date.parse(manifest.created_at),
    );
    const dir = join(PROJECT_ROOT, 'fixtures', 'state');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'schema2-format1.svcemu'), gzipSync(tar, { level: 9 }));
    process.stdout.write(`wrote fixtures/state/schema2-format1.svcemu (${db.invocations.length} invocation(s))\n`);
  } finally {
    await core.stop();
  }
}

main().catch((err) => {
  process.stderr.write(String(err?.stack ?? err) + '\n');
  process.exit(1);
});
