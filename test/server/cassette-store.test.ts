/**
 * Cassette files (server/egress/cassette/store.ts, har.ts) and the tape's entries (tape.ts): merge replacing
 * an earlier episode's same-key calls, chained writes, byte-stable round trips, damaged and foreign files
 * refused naming the file and the entry, newer formats refused, the migrations table, a browser's HAR read
 * as a cassette and replayed, bodies over the cap cut and said. Real files in a temp folder.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cassetteText,
  CassetteError,
  createPlayer,
  createRedactor,
  createTape,
  FileCassetteStore,
  IMPORTED_EPISODE,
  migrateLog,
  TRUNCATED_NOTE,
  type CassetteRef,
  type HarEntry,
  type ReplayAnswer,
} from '../../server/egress/cassette';
import { CassetteMatch } from '../../contract/schemas/cassette';
import fc from 'fast-check';
import { fuzzSeed } from '../helpers/fuzz-seed';

const seed = fuzzSeed('cassette-store', 20261129, process.env, console.info);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'cassette-store-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const noSecrets = createRedactor({});
const match = CassetteMatch.parse({});

function record(invocationId: string, calls: { url: string; body?: string; answer: string }[]): HarEntry[] {
  let clock = 0;
  const tape = createTape({ redactor: noSecrets, invocationId, now: () => 1_750_000_000_000, perf: () => (clock += 7) });
  for (const c of calls) {
    const call = tape.begin({
      source: 'integration',
      integration: 'crm',
      method: 'POST',
      url: c.url,
      headers: [['content-type', 'application/json']],
      hostAdded: [],
    });
    if (c.body) call.requestBody(Buffer.from(c.body));
    call.head({ status: 200, statusText: 'OK', headers: [['content-type', 'text/plain']] });
    call.chunk(Buffer.from(c.answer));
    call.end(null);
  }
  return tape.entries();
}

let n = 0;
function fresh(): { store: FileCassetteStore; ref: CassetteRef; dir: string } {
  const dir = join(root, `s${n++}`);
  return {
    store: new FileCassetteStore({ locate: (t, s) => join(dir, t, s, 'cassettes'), creatorVersion: '9.9.9' }),
    ref: { tenant: 'ten', snippet: 'snip', name: 'default' },
    dir,
  };
}

const summary = (entries: HarEntry[]) =>
  entries.map((e) => `${e._svcEmu.invocation_id}#${e._svcEmu.seq} ${e.request.url} ${e.response.content.text}`);

describe('FileCassetteStore', () => {
  it('merge: a new episode replaces an earlier episode’s calls with the same request and is appended; a run merged again replaces its own episode', async () => {
    const { store, ref } = fresh();
    expect(await store.read(ref)).toBeNull();
    await store.merge(
      ref,
      record('inv_1', [
        { url: 'http://h/a', answer: 'a1' },
        { url: 'http://h/b', answer: 'b1' },
      ]),
      match,
    );
    const second = await store.merge(ref, record('inv_2', [{ url: 'http://h/a', answer: 'a2' }]), match);
    expect(summary(second.cassette.log.entries)).toEqual(['inv_1#1 http://h/b b1', 'inv_2#0 http://h/a a2']);
    const again = await store.merge(ref, record('inv_2', [{ url: 'http://h/c', answer: 'c2' }]), match);
    expect(summary(again.cassette.log.entries)).toEqual(['inv_1#1 http://h/b b1', 'inv_2#0 http://h/c c2']);
    const read = await store.read(ref);
    expect(read?.cassette).toEqual(again.cassette);
    expect(read?.cassette.log.creator).toEqual({ name: 'snippet-emulator', version: '9.9.9' });
    expect(read?.cassette.log._svcEmu).toEqual({ format: 1, tenant: 'ten', snippet: 'snip' });
  });

  it('merge uses the matchers: calls that differ only in an ignored field are the same call', async () => {
    const { store, ref } = fresh();
    const m = CassetteMatch.parse({ ignore_body_fields: ['request_id'] });
    await store.merge(ref, record('inv_1', [{ url: 'http://h/a', body: '{"q":1,"request_id":"r1"}', answer: 'one' }]), m);
    const f = await store.merge(ref, record('inv_2', [{ url: 'http://h/a', body: '{"q":1,"request_id":"r2"}', answer: 'two' }]), m);
    expect(summary(f.cassette.log.entries)).toEqual(['inv_2#0 http://h/a two']);
  });

  it('merge honours the cassette’s own matchers when the caller passes the defaults', async () => {
    const { store, ref } = fresh();
    const f = await store.merge(ref, record('inv_1', [{ url: 'http://h/a', body: '{"q":1,"request_id":"r1"}', answer: 'one' }]), match);
    await store.write(ref, {
      ...f.cassette,
      log: { ...f.cassette.log, _svcEmu: { ...f.cassette.log._svcEmu, match: { ignore_body_fields: ['request_id'] } } },
    });
    const g = await store.merge(ref, record('inv_2', [{ url: 'http://h/a', body: '{"q":1,"request_id":"r2"}', answer: 'two' }]), match);
    expect(summary(g.cassette.log.entries)).toEqual(['inv_2#0 http://h/a two']);
    // (zod's partial() keeps defaults: the file's matchers read back with the defaults filled in)
    expect(g.cassette.log._svcEmu.match).toMatchObject({ ignore_body_fields: ['request_id'] });
  });

  it('concurrent merges into one file are chained: every run lands', async () => {
    const { store, ref } = fresh();
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.merge(ref, record(`inv_${i}`, [{ url: `http://h/${i}`, answer: String(i) }]), match)),
    );
    const f = await store.read(ref);
    expect(f?.cassette.log.entries.map((e) => e._svcEmu.invocation_id).sort()).toEqual(
      Array.from({ length: 8 }, (_, i) => `inv_${i}`).sort(),
    );
  });

  it('round trip: write → read → write is byte-identical; keys in a fixed order, 2-space JSON, final newline', async () => {
    const { store, ref } = fresh();
    const f = await store.merge(ref, record('inv_1', [{ url: 'http://h/a?x=1', body: '{"b":1,"a":2}', answer: 'é ✓ answer' }]), match);
    const bytes1 = await readFile(f.path, 'utf8');
    expect(bytes1.startsWith('{\n  "log": {\n    "version": "1.2",\n    "creator": {')).toBe(true);
    expect(bytes1.endsWith('}\n')).toBe(true);
    const read = await store.read(ref);
    await store.write(ref, read!.cassette);
    expect(await readFile(f.path, 'utf8')).toBe(bytes1);
    // the same cassette with its keys in another order is the same bytes
    const scrambled = JSON.parse(bytes1, (_k, v: unknown) =>
      v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
    ) as typeof read;
    expect(Object.keys(scrambled as object)).toEqual(['log']);
    expect(cassetteText(scrambled as never)).toBe(bytes1);
    // fields the emulator does not know (another tool's) are kept
    const withExtra = JSON.parse(bytes1) as { log: { entries: Record<string, unknown>[] } };
    withExtra.log.entries[0]!._resourceType = 'fetch';
    await writeFile(f.path, JSON.stringify(withExtra));
    const extra = await store.read(ref);
    expect((extra!.cassette.log.entries[0] as Record<string, unknown>)._resourceType).toBe('fetch');
  });

  it('headers, query parameters and chunks are one line each; any text in them still reads back as written (property)', () => {
    const entry = record('inv_1', [{ url: 'http://h/a?x=1', answer: 'abc' }])[0]!;
    const text = cassetteText({
      log: { version: '1.2', creator: { name: 'x', version: '1' }, entries: [entry], _svcEmu: { format: 1, tenant: 't', snippet: 's' } },
    });
    expect(text).toContain('\n            { "name": "content-type", "value": "application/json" }');
    expect(text).toContain('\n            { "name": "x", "value": "1" }');
    expect(text).toMatch(/\n {12}\{ "t_ms": \d+, "bytes": 3 \}/);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string(), fc.string()), { maxLength: 5 }), fc.string(), (headers, q) => {
        const e = structuredClone(entry);
        e.request.headers = headers.map(([name, value]) => ({ name, value }));
        e.request.queryString = [{ name: q, value: `{\n "name": "${q}"}` }];
        e.response.content.text = `${q}{\n  "t_ms": 1,\n  "bytes": 2\n}`;
        const c = {
          log: {
            version: '1.2' as const,
            creator: { name: 'x', version: '1' },
            entries: [e],
            _svcEmu: { format: 1, tenant: 't', snippet: 's' },
          },
        };
        expect(JSON.parse(cassetteText(c))).toEqual(JSON.parse(JSON.stringify(c)));
      }),
      { seed, numRuns: 200 },
    );
  });

  it('a damaged or foreign file is a CassetteError naming the file and what is wrong, at which entry', async () => {
    const { store, ref } = fresh();
    const path = store.pathOf(ref);
    await mkdir(join(path, '..'), { recursive: true });
    const good = JSON.parse(
      cassetteText(
        (
          await store.merge(
            ref,
            record('inv_1', [
              { url: 'http://h/a', answer: 'a' },
              { url: 'http://h/b', answer: 'b' },
            ]),
            match,
          )
        ).cassette,
      ),
    ) as {
      log: { entries: { response: { status: unknown } }[]; _svcEmu: { format: number } };
    };
    const cases: [string, RegExp][] = [
      ['{"log": {"entries": [}', /not JSON: .*line 1, column 2[23]/],
      ['{"hello": "world"}', /not a HAR file: it has no log\.entries list/],
      [
        JSON.stringify({
          ...good,
          log: {
            ...good.log,
            entries: [good.log.entries[0], { ...good.log.entries[1], response: { ...good.log.entries[1]!.response, status: 'ok' } }],
          },
        }),
        /not a valid cassette: entry 1 \(response\.status\): /,
      ],
      [
        JSON.stringify({ ...good, log: { ...good.log, _svcEmu: { ...good.log._svcEmu, format: 2 } } }),
        /cassette format 2 was written by a newer emulator \(this one reads formats up to 1\)/,
      ],
      [
        JSON.stringify({ ...good, log: { ...good.log, _svcEmu: { ...good.log._svcEmu, format: 0 } } }),
        /log\._svcEmu\.format must be a whole number from 1, found 0/,
      ],
      [JSON.stringify({ ...good, log: { ...good.log, _svcEmu: 'x' } }), /log\._svcEmu must be an object/],
    ];
    for (const [text, message] of cases) {
      await writeFile(path, text);
      const err = await store.read(ref).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CassetteError);
      expect((err as CassetteError).path).toBe(path);
      expect((err as Error).message).toMatch(message);
      expect((err as Error).message.startsWith(`${path}: `)).toBe(true);
      // a merge into a damaged file refuses too, and leaves it as it was
      await expect(store.merge(ref, record('inv_9', [{ url: 'http://h/z', answer: 'z' }]), match)).rejects.toBeInstanceOf(CassetteError);
      expect(await readFile(path, 'utf8')).toBe(text);
    }
  });

  it('the migrations table: each step runs in order and the format is bumped; a missing step is said', () => {
    const log = { version: '1.2', entries: [], _svcEmu: { format: 1, tenant: 't', snippet: 's' } };
    const steps = {
      1: (l: Record<string, unknown>) => ({ ...l, comment: 'one' }),
      2: (l: Record<string, unknown>) => ({ ...l, comment: `${String(l.comment)} two` }),
    };
    expect(migrateLog(log, steps, 3)).toEqual({ log: { ...log, comment: 'one two', _svcEmu: { format: 3, tenant: 't', snippet: 's' } } });
    expect(migrateLog(log, { 2: steps[2] }, 3)).toEqual({ error: 'no migration from cassette format 1' });
    expect(migrateLog(log)).toEqual({ log });
  });

  it('list, remove, and names that are not cassette names', async () => {
    const { store, ref } = fresh();
    expect(await store.list('ten', 'snip')).toEqual([]);
    await store.merge(ref, record('inv_1', [{ url: 'http://h/a', answer: 'a' }]), match);
    await store.merge({ ...ref, name: 'other.v2' }, record('inv_2', [{ url: 'http://h/b', answer: 'b' }]), match);
    await writeFile(join(store.pathOf(ref), '..', 'notes.txt'), 'not a cassette');
    const list = await store.list('ten', 'snip');
    expect(list.map((f) => f.path.split('/').pop())).toEqual(['default.har', 'other.v2.har']);
    expect(list[0]!.bytes).toBeGreaterThan(100);
    expect(await store.remove({ ...ref, name: 'other.v2' })).toBe(true);
    expect(await store.remove({ ...ref, name: 'other.v2' })).toBe(false);
    expect(() => store.pathOf({ ...ref, name: '../escape' })).toThrow(CassetteError);
  });

  it('a browser’s HAR (no _svcEmu) reads as a cassette, one chunk per answer at its time, and replays', async () => {
    const { store, ref } = fresh();
    const chrome = {
      log: {
        version: '1.2',
        creator: { name: 'WebInspector', version: '537.36' },
        pages: [],
        entries: [
          {
            _initiator: { type: 'script' },
            _resourceType: 'fetch',
            cache: {},
            connection: '443',
            request: {
              method: 'POST',
              url: 'https://api.example.com/v1/items?page=2',
              httpVersion: 'http/2.0',
              headers: [{ name: 'content-type', value: 'application/json' }],
              queryString: [{ name: 'page', value: '2' }],
              cookies: [],
              headersSize: -1,
              bodySize: 9,
              postData: { mimeType: 'application/json', text: '{"a":1}' },
            },
            response: {
              status: 200,
              statusText: '',
              httpVersion: 'http/2.0',
              headers: [
                { name: 'content-type', value: 'application/json' },
                { name: 'content-encoding', value: 'gzip' },
                { name: 'content-length', value: '31' },
              ],
              cookies: [],
              content: { size: 11, mimeType: 'application/json', text: '{"items":[]}' },
              redirectURL: '',
              headersSize: -1,
              bodySize: -1,
              _transferSize: 120,
              _error: null,
            },
            serverIPAddress: '93.184.216.34',
            startedDateTime: '2026-11-27T10:00:00.000Z',
            time: 84.5,
            timings: { blocked: 1, dns: -1, ssl: -1, connect: -1, send: 0.2, wait: 80, receive: 3.3, _blocked_queueing: 0.5 },
          },
          {
            request: {
              method: 'GET',
              url: 'https://api.example.com/logo.png',
              httpVersion: 'http/2.0',
              headers: [],
              queryString: [],
              cookies: [],
              headersSize: -1,
              bodySize: 0,
            },
            response: {
              status: 200,
              statusText: '',
              httpVersion: 'http/2.0',
              headers: [],
              cookies: [],
              content: {
                size: 4,
                mimeType: 'image/png',
                text: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64'),
                encoding: 'base64',
              },
              redirectURL: '',
              headersSize: -1,
              bodySize: -1,
            },
            startedDateTime: '2026-11-27T10:00:00.100Z',
            time: 12,
            timings: { send: 0, wait: 10, receive: 2 },
            cache: {},
          },
          {
            request: {
              method: 'GET',
              url: 'https://blocked.example.com/t.js',
              httpVersion: '',
              headers: [],
              queryString: [],
              cookies: [],
              headersSize: -1,
              bodySize: 0,
            },
            response: {
              status: 0,
              statusText: '',
              httpVersion: '',
              headers: [],
              cookies: [],
              content: { size: 0, mimeType: 'x-unknown' },
              redirectURL: '',
              headersSize: -1,
              bodySize: -1,
              _error: 'net::ERR_BLOCKED_BY_CLIENT',
            },
            startedDateTime: '2026-11-27T10:00:00.200Z',
            time: 0,
            timings: { send: 0, wait: 0, receive: 0 },
            cache: {},
          },
        ],
      },
    };
    await mkdir(join(store.pathOf(ref), '..'), { recursive: true });
    await writeFile(store.pathOf(ref), JSON.stringify(chrome, null, 1));
    const f = await store.read(ref);
    const [json, png, blocked] = f!.cassette.log.entries;
    expect(json!._svcEmu).toEqual({
      seq: 0,
      invocation_id: IMPORTED_EPISODE,
      source: 'snippet',
      integration: null,
      chunks: [{ t_ms: 84.5, bytes: 12 }],
      redacted: [],
      error: null,
    });
    expect(json!.response.headers).toEqual([{ name: 'content-type', value: 'application/json' }]);
    expect(json!._resourceType).toBe('fetch');
    expect(png!._svcEmu.chunks).toEqual([{ t_ms: 12, bytes: 4 }]);
    expect(blocked!._svcEmu.error).toBe('net::ERR_BLOCKED_BY_CLIENT');
    expect(f!.cassette.log._svcEmu).toEqual({ format: 1, tenant: 'ten', snippet: 'snip' });

    const p = createPlayer({ cassette: f!.cassette, speed: 1, redactor: noSecrets });
    const a = p.answer({
      source: 'snippet',
      integration: null,
      method: 'POST',
      url: 'http://127.0.0.1:8080/v1/items?page=2',
      headers: [],
      hostAdded: [],
      body: Buffer.from('{ "a": 1 }'),
    }) as ReplayAnswer;
    expect(a.chunks.map((c) => [c.delayMs, c.data.toString()])).toEqual([[84.5, '{"items":[]}']]);
    const img = p.answer({
      source: 'snippet',
      integration: null,
      method: 'GET',
      url: 'https://api.example.com/logo.png',
      headers: [],
      hostAdded: [],
      body: Buffer.alloc(0),
    }) as ReplayAnswer;
    expect([...img.chunks[0]!.data]).toEqual([0x89, 0x50, 0x4e, 0x47]);

    // one browser entry pasted into an emulator cassette gets its extension too
    const mixed = JSON.parse(cassetteText(f!.cassette)) as { log: { entries: unknown[] } };
    mixed.log.entries.push(chrome.log.entries[0]);
    await writeFile(store.pathOf(ref), JSON.stringify(mixed));
    const pasted = (await store.read(ref))!.cassette.log.entries[3]!;
    expect(pasted._svcEmu).toMatchObject({ seq: 3, invocation_id: IMPORTED_EPISODE, chunks: [{ t_ms: 84.5, bytes: 12 }] });
    await writeFile(store.pathOf(ref), JSON.stringify(chrome));

    // a merge writes it back in the emulator's own form, the imported calls kept as an episode
    const merged = await store.merge(ref, record('inv_1', [{ url: 'http://h/new', answer: 'n' }]), match);
    expect(merged.cassette.log.entries.map((e) => e._svcEmu.invocation_id)).toEqual([
      IMPORTED_EPISODE,
      IMPORTED_EPISODE,
      IMPORTED_EPISODE,
      'inv_1',
    ]);
    expect(JSON.parse(await readFile(merged.path, 'utf8'))).toMatchObject({ log: { _svcEmu: { format: 1 } } });
  });
});

describe('tape', () => {
  it('cuts bodies over the cap and says so; the chunk sizes add up to what was kept', () => {
    let clock = 0;
    const tape = createTape({ redactor: noSecrets, invocationId: 'inv_cap', perf: () => (clock += 1), maxBodyBytes: 10 });
    const call = tape.begin({ source: 'snippet', integration: null, method: 'post', url: 'http://h/x', headers: [], hostAdded: [] });
    call.requestBody(Buffer.from('0123456789abcdef'));
    call.head({ status: 200, statusText: 'OK', headers: [] });
    call.chunk(Buffer.from('aaaaaa'));
    call.chunk(Buffer.from('bbbbbb'));
    call.chunk(Buffer.from('cccccc'));
    call.end(null);
    const [e] = tape.entries();
    expect(e!.request.method).toBe('POST');
    expect(e!.request.postData).toMatchObject({ text: '0123456789', comment: `${TRUNCATED_NOTE} kept the first 10 of 16 bytes` });
    expect(e!.request.bodySize).toBe(16);
    expect(e!.response.content).toMatchObject({ size: 10, text: 'aaaaaabbbb', comment: `${TRUNCATED_NOTE} kept the first 10 of 18 bytes` });
    expect(e!.response.bodySize).toBe(18);
    expect(e!._svcEmu.chunks.map((c) => c.bytes)).toEqual([6, 4]);
  });

  it('entries come in seq order; a call still open is written with what it had and an error; a call that failed says why', () => {
    let clock = 0;
    const tape = createTape({
      redactor: noSecrets,
      invocationId: 'inv_o',
      now: () => Date.parse('2026-11-27T12:00:00Z'),
      perf: () => clock,
    });
    const a = tape.begin({ source: 'snippet', integration: null, method: 'GET', url: 'http://h/a', headers: [], hostAdded: [] });
    const b = tape.begin({ source: 'snippet', integration: null, method: 'GET', url: 'http://h/b', headers: [], hostAdded: [] });
    const c = tape.begin({ source: 'snippet', integration: null, method: 'GET', url: 'http://h/c', headers: [], hostAdded: [] });
    clock = 30;
    b.head({ status: 200, statusText: 'OK', headers: [] });
    clock = 45;
    b.chunk(Buffer.from('x'));
    b.end(null);
    c.end('connect ECONNREFUSED');
    a.head({ status: 200, statusText: 'OK', headers: [] });
    a.chunk(Buffer.from('partial'));
    clock = 50;
    const entries = tape.entries();
    expect(entries.map((e) => [e._svcEmu.seq, e.request.url, e._svcEmu.error])).toEqual([
      [0, 'http://h/a', 'the run ended before the call finished'],
      [1, 'http://h/b', null],
      [2, 'http://h/c', 'connect ECONNREFUSED'],
    ]);
    expect(entries[0]!.response.content.text).toBe('partial');
    expect(entries[1]).toMatchObject({
      startedDateTime: '2026-11-27T12:00:00.000Z',
      time: 45,
      timings: { send: 0, wait: 30, receive: 15 },
      _svcEmu: { chunks: [{ t_ms: 45, bytes: 1 }] },
    });
    expect(entries[2]!.response.status).toBe(0);
    // later calls of an ended handle are ignored
    b.chunk(Buffer.from('late'));
    expect(tape.entries()[1]!.response.content.text).toBe('x');
  });
});
