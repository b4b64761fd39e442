/**
 * Matching and playback (server/egress/cassette/match.ts, player.ts): the key (method, path, query, body
 * normalised), the matchers, order mode, repeats, every kind of difference a miss names, replay speed.
 * Entries are made by a real tape (server/egress/cassette/tape.ts) with a scripted clock.
 */
import { describe, expect, it } from 'vitest';
import {
  createPlayer,
  createRedactor,
  createTape,
  normalise,
  type Cassette,
  type CallRequest,
  type HarEntry,
  type Redactor,
  type ReplayAnswer,
  type ReplayMiss,
} from '../../server/egress/cassette';
import { CassetteMatch } from '../../contract/schemas/cassette';
import fc from 'fast-check';
import { fuzzSeed } from '../helpers/fuzz-seed';

const seed = fuzzSeed('cassette-player', 20261128, process.env, console.info);

interface Recorded {
  method?: string;
  url: string;
  body?: string;
  status?: number;
  headers?: [string, string][];
  /** [ms since the call began, text] */
  chunks?: [number, string][];
  error?: string;
}

const noSecrets = createRedactor({});

function record(invocationId: string, calls: Recorded[], redactor: Redactor = noSecrets): HarEntry[] {
  let clock = 0;
  const tape = createTape({ redactor, invocationId, now: () => 1_750_000_000_000, perf: () => clock });
  for (const c of calls) {
    clock = 0;
    const call = tape.begin({
      source: 'snippet',
      integration: null,
      method: c.method ?? 'POST',
      url: c.url,
      headers: [['content-type', 'application/json']],
      hostAdded: [],
    });
    if (c.body) call.requestBody(Buffer.from(c.body));
    if (c.error) {
      clock = 3;
      call.end(c.error);
      continue;
    }
    clock = 1;
    call.head({ status: c.status ?? 200, statusText: 'OK', headers: c.headers ?? [['content-type', 'text/plain']] });
    for (const [t, text] of c.chunks ?? [[2, 'ok']]) {
      clock = t;
      call.chunk(Buffer.from(text));
    }
    call.end(null);
  }
  return tape.entries();
}

const cassetteOf = (...episodes: HarEntry[][]): Cassette => ({
  log: {
    version: '1.2',
    creator: { name: 'snippet-emulator', version: 't' },
    entries: episodes.flat(),
    _svcEmu: { format: 1, tenant: 't', snippet: 's' },
  },
});

const live = (method: string, url: string, body = ''): CallRequest => ({
  source: 'snippet',
  integration: null,
  method,
  url,
  headers: [],
  hostAdded: [],
  body: Buffer.from(body),
});
const text = (a: ReplayAnswer | ReplayMiss): string => {
  if ('message' in a) throw new Error(`expected an answer, got a miss: ${a.message}`);
  return Buffer.concat(a.chunks.map((c) => c.data)).toString();
};
const missOf = (a: ReplayAnswer | ReplayMiss): ReplayMiss => {
  if (!('message' in a)) throw new Error(`expected a miss, got an answer: ${text(a)}`);
  return a;
};

const chat = (content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model: 'm',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content },
    ],
    ...extra,
  });

describe('normalise', () => {
  const m = CassetteMatch.parse({});
  it('ignores JSON key order, query order and the host (unless asked), and keeps method, path and values', () => {
    const a = normalise({ method: 'post', url: 'http://a:1/v1/x?b=2&a=1', body: '{"x":1,"y":[1,{"q":2,"p":1}]}' }, m);
    const b = normalise({ method: 'POST', url: 'http://b:2/v1/x?a=1&b=2', body: '{"y":[1,{"p":1,"q":2}],"x":1}' }, m);
    expect(a.key).toBe(b.key);
    expect(normalise({ method: 'POST', url: 'http://a:1/v1/x?a=1&b=2', body: '' }, m).key).not.toBe(a.key);
    const withHost = CassetteMatch.parse({ host: true });
    expect(normalise({ method: 'POST', url: 'http://a:1/v1/x', body: '' }, withHost).key).not.toBe(
      normalise({ method: 'POST', url: 'http://a:2/v1/x', body: '' }, withHost).key,
    );
  });
  it('leaves out ignored body fields (dotted, * for any index or key) and ignored query parameters', () => {
    const m2 = CassetteMatch.parse({ ignore_body_fields: ['messages.*.id', 'metadata.user', 'tags.1'], ignore_query: ['ts'] });
    const a = normalise(
      {
        method: 'POST',
        url: 'http://h/x?ts=1&k=v',
        body: '{"messages":[{"id":"a","c":1},{"id":"b","c":2}],"metadata":{"user":"u1","app":"x"},"tags":["a","b"]}',
      },
      m2,
    );
    const b = normalise(
      {
        method: 'POST',
        url: 'http://h/x?ts=99&k=v',
        body: '{"messages":[{"id":"z","c":1},{"id":"y","c":2}],"metadata":{"user":"u2","app":"x"},"tags":["a","c"]}',
      },
      m2,
    );
    expect(a.key).toBe(b.key);
    const c = normalise(
      {
        method: 'POST',
        url: 'http://h/x?ts=99&k=v',
        body: '{"messages":[{"id":"z","c":3},{"id":"y","c":2}],"metadata":{"user":"u2","app":"x"},"tags":["a","c"]}',
      },
      m2,
    );
    expect(c.key).not.toBe(a.key);
  });
  it('compares a body that is not JSON as text', () => {
    expect(normalise({ method: 'POST', url: 'http://h/x', body: '{not json' }, m).body).toEqual({ kind: 'text', text: '{not json' });
  });
});

describe('player', () => {
  it('order off: the first unused matching entry, then the last matching one again', () => {
    const ep = record('inv_1', [
      { url: 'http://h/n', body: '{"q":1}', chunks: [[2, 'first']] },
      { url: 'http://h/n', body: '{"q":1}', chunks: [[2, 'second']] },
      { url: 'http://h/other', body: '{}', chunks: [[2, 'other']] },
    ]);
    const p = createPlayer({ cassette: cassetteOf(ep), speed: 0, redactor: noSecrets });
    expect(text(p.answer(live('POST', 'http://h/other', '{}')))).toBe('other');
    expect(text(p.answer(live('POST', 'http://h/n', '{"q":1}')))).toBe('first');
    expect(text(p.answer(live('POST', 'http://h/n', '{"q":1}')))).toBe('second');
    expect(text(p.answer(live('POST', 'http://h/n', '{"q":1}')))).toBe('second');
    expect(text(p.answer(live('POST', 'http://h/other', '{}')))).toBe('other');
  });

  it('order on: the newest episode beginning with the first call, then its calls in seq order', () => {
    const old = record('inv_old', [
      { url: 'http://h/a', chunks: [[2, 'old a']] },
      { url: 'http://h/b', chunks: [[2, 'old b']] },
    ]);
    const neu = record('inv_new', [
      { url: 'http://h/a', chunks: [[2, 'new a']] },
      { url: 'http://h/b', chunks: [[2, 'new b']] },
    ]);
    const other = record('inv_other', [{ url: 'http://h/z', chunks: [[2, 'z']] }]);
    const cassette = cassetteOf(old, neu, other);
    const p = createPlayer({ cassette, match: { order: true }, speed: 0, redactor: noSecrets });
    expect(text(p.answer(live('POST', 'http://h/a')))).toBe('new a');
    const wrong = missOf(p.answer(live('POST', 'http://h/a')));
    expect(wrong.message).toContain('match order is on, and this is call 2 of the recorded run');
    expect(wrong.closest).toMatchObject({ seq: 1, invocation_id: 'inv_new', url: 'http://h/b' });
    expect(wrong.closest?.differences).toEqual(['path: recorded "/b", got "/a"']);
    expect(text(p.answer(live('POST', 'http://h/b')))).toBe('new b');
    const extra = missOf(p.answer(live('POST', 'http://h/b')));
    expect(extra.message).toContain('the recorded run made only 2 call(s)');

    const q = createPlayer({ cassette, match: { order: true }, speed: 0, redactor: noSecrets });
    const firstWrong = missOf(q.answer(live('POST', 'http://h/b')));
    expect(firstWrong.message).toContain('no recorded run begins with this call');
    expect(text(q.answer(live('POST', 'http://h/z')))).toBe('z');
  });

  it('a miss names the closest call (same method and path first, then the smallest body difference) and what differs, in plain words', () => {
    const ep = record('inv_1', [
      { url: 'http://h/v1/chat/completions', body: chat('Paris') },
      { url: 'http://h/v1/chat/completions', body: chat('Paris', { temperature: 0, stream: true, n: 1 }) },
      { url: 'http://h/v1/weather?city=Paris&units=metric', method: 'GET' },
      { url: 'http://h/v1/embeddings', body: chat('Rome') },
    ]);
    const p = createPlayer({ cassette: cassetteOf(ep), speed: 0, redactor: noSecrets, name: 'default' });

    const body = missOf(p.answer(live('POST', 'http://h/v1/chat/completions', chat('Rome'))));
    expect(body.closest).toMatchObject({ seq: 0, invocation_id: 'inv_1', method: 'POST', url: 'http://h/v1/chat/completions' });
    expect(body.closest?.differences).toEqual(['body field messages[1].content: recorded "Paris", got "Rome"']);
    expect(body.message).toContain('The closest in cassette "default" is call #0 of run inv_1, POST http://h/v1/chat/completions');
    expect(body.message).toContain('body field messages[1].content: recorded "Paris", got "Rome"');
    expect(body.message).toContain('record again (egress mode "record")');
    expect(body.message).toContain('"ignore_body_fields": ["messages.*.content"]');

    const missing = missOf(p.answer(live('POST', 'http://h/v1/chat/completions', chat('Paris', { temperature: 0, stream: true }))));
    expect(missing.closest?.seq).toBe(1);
    expect(missing.closest?.differences).toEqual(['body field n: recorded 1, got none']);

    const query = missOf(p.answer(live('GET', 'http://h/v1/weather?city=Rome&units=metric&x=1')));
    expect(query.closest?.differences).toEqual(['query city: recorded "Paris", got "Rome"', 'query x: recorded none, got "1"']);
    expect(query.message).toContain('"ignore_query": ["city","x"]');

    const method = missOf(p.answer(live('DELETE', 'http://h/v1/weather?city=Paris&units=metric')));
    expect(method.closest?.differences).toEqual(['method: recorded GET, got DELETE']);

    const path = missOf(p.answer(live('GET', 'http://h/v1/weathr?city=Paris&units=metric')));
    expect(path.closest?.differences).toEqual(['path: recorded "/v1/weather", got "/v1/weathr"']);

    const kind = missOf(p.answer(live('POST', 'http://h/v1/embeddings', 'plain text')));
    expect(kind.closest?.differences).toEqual(['body: recorded a JSON body, got a text body (10 characters)']);
  });

  it('text bodies: the difference is shown around where it starts', () => {
    const ep = record('inv_1', [{ url: 'http://h/t', body: 'line one\nline two: Paris is nice\n' }]);
    const p = createPlayer({ cassette: cassetteOf(ep), speed: 0, redactor: noSecrets });
    const m = missOf(p.answer(live('POST', 'http://h/t', 'line one\nline two: Rome is nice\n')));
    expect(m.closest?.differences).toEqual([
      'body (text, from character 19): recorded "line one\\nline two: Paris is nice\\n", got "line one\\nline two: Rome is nice\\n"',
    ]);
    const long = createPlayer({
      cassette: cassetteOf(record('inv_2', [{ url: 'http://h/t', body: `${'x'.repeat(50)}Paris${'y'.repeat(40)}` }])),
      speed: 0,
      redactor: noSecrets,
    });
    const l = missOf(long.answer(live('POST', 'http://h/t', `${'x'.repeat(50)}Rome${'y'.repeat(40)}`)));
    expect(l.closest?.differences).toEqual([
      `body (text, from character 50): recorded "…${'x'.repeat(20)}Paris${'y'.repeat(25)}…", got "…${'x'.repeat(20)}Rome${'y'.repeat(26)}…"`,
    ]);
  });

  it('host and port count only with match.host', () => {
    const ep = record('inv_1', [{ url: 'http://127.0.0.1:4000/x' }]);
    expect(
      text(createPlayer({ cassette: cassetteOf(ep), speed: 0, redactor: noSecrets }).answer(live('POST', 'http://127.0.0.1:5000/x'))),
    ).toBe('ok');
    const strict = createPlayer({ cassette: cassetteOf(ep), match: { host: true }, speed: 0, redactor: noSecrets });
    expect(missOf(strict.answer(live('POST', 'http://127.0.0.1:5000/x'))).closest?.differences).toEqual([
      'host: recorded "127.0.0.1:4000", got "127.0.0.1:5000"',
    ]);
  });

  it('a recorded body holds [secret NAME] where the live request holds the value: it matches only with the same secret', () => {
    const secrets = createRedactor({ KEY: 'sk-test-abcdef' });
    const ep = record('inv_1', [{ url: 'http://h/v1/x?key=sk-test-abcdef', body: '{"api_key":"sk-test-abcdef","q":1}' }], secrets);
    expect(JSON.stringify(ep)).not.toContain('sk-test-abcdef');
    // in a URL the marker is percent-encoded (the URL stays a valid URI for HAR tools); the query list shows it plain
    expect(ep[0]!.request.url).toBe('http://h/v1/x?key=%5Bsecret%20KEY%5D');
    expect(ep[0]!.request.queryString).toEqual([{ name: 'key', value: '[secret KEY]' }]);
    const cassette = cassetteOf(ep);
    expect(
      text(
        createPlayer({ cassette, speed: 0, redactor: secrets }).answer(
          live('POST', 'http://h/v1/x?key=sk-test-abcdef', '{"q":1,"api_key":"sk-test-abcdef"}'),
        ),
      ),
    ).toBe('ok');
    const rotated = createRedactor({ KEY: 'sk-other-999999' });
    const miss = missOf(
      createPlayer({ cassette, speed: 0, redactor: rotated }).answer(
        live('POST', 'http://h/v1/x?key=sk-test-abcdef', '{"q":1,"api_key":"sk-test-abcdef"}'),
      ),
    );
    expect(miss.closest?.differences).toContain('body field api_key: recorded "[secret KEY]", got "sk-test-abcdef"');
    // the miss message itself never shows a secret the redactor knows
    expect(
      missOf(
        createPlayer({ cassette, speed: 0, redactor: secrets }).answer(
          live('POST', 'http://h/v1/x?key=sk-test-abcdef', '{"api_key":"sk-test-abcdef","q":2}'),
        ),
      ).message,
    ).not.toContain('sk-test-abcdef');
  });

  it('plays chunks with the recorded waits, scaled by speed (0: none); an empty chunk’s wait goes with the next', () => {
    const ep = record('inv_1', [
      {
        url: 'http://h/s',
        chunks: [
          [40, 'a'],
          [90, 'bb'],
          [190, 'ccc'],
        ],
      },
    ]);
    const at = (speed: number) =>
      (
        createPlayer({ cassette: cassetteOf(ep), speed, redactor: noSecrets }).answer(live('POST', 'http://h/s')) as ReplayAnswer
      ).chunks.map((c) => [c.delayMs, c.data.toString()]);
    expect(at(1)).toEqual([
      [40, 'a'],
      [50, 'bb'],
      [100, 'ccc'],
    ]);
    expect(at(2)).toEqual([
      [20, 'a'],
      [25, 'bb'],
      [50, 'ccc'],
    ]);
    expect(at(0)).toEqual([
      [0, 'a'],
      [0, 'bb'],
      [0, 'ccc'],
    ]);
    const e = structuredClone(ep[0]!);
    e._svcEmu.chunks = [
      { t_ms: 10, bytes: 1 },
      { t_ms: 30, bytes: 0 },
      { t_ms: 60, bytes: 5 },
    ];
    const a = createPlayer({ cassette: cassetteOf([e]), speed: 1, redactor: noSecrets }).answer(live('POST', 'http://h/s')) as ReplayAnswer;
    expect(a.chunks.map((c) => [c.delayMs, c.data.toString()])).toEqual([
      [10, 'a'],
      [50, 'bbccc'],
    ]);
  });

  it('a recorded failure fails the same way; content-length says the played body’s length; an empty cassette says so', () => {
    const ep = record('inv_1', [
      { url: 'http://h/down', error: 'connect ECONNREFUSED 127.0.0.1:9' },
      { url: 'http://h/len', headers: [['content-length', '999']], chunks: [[2, 'four']] },
    ]);
    const p = createPlayer({ cassette: cassetteOf(ep), speed: 1, redactor: noSecrets });
    const down = p.answer(live('POST', 'http://h/down')) as ReplayAnswer;
    expect(down.error).toBe('connect ECONNREFUSED 127.0.0.1:9');
    expect(down.head.status).toBe(0);
    expect((p.answer(live('POST', 'http://h/len')) as ReplayAnswer).head.headers).toEqual([['content-length', '4']]);
    const empty = missOf(
      createPlayer({ cassette: cassetteOf([]), speed: 1, redactor: noSecrets, name: 'demo' }).answer(live('GET', 'http://h/x')),
    );
    expect(empty.closest).toBeNull();
    expect(empty.message).toContain('cassette "demo" holds no calls');
  });

  it('property: the same request always finds its own recording, and gets the recorded bytes back chunk for chunk', () => {
    const secretValue = fc.stringMatching(/^[A-Za-z0-9+/=_-]{8,24}$/);
    const jsonBody = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v));
    const anyBody = fc.oneof(
      jsonBody,
      fc.string({ maxLength: 200 }),
      fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a).toString('latin1')),
    );
    fc.assert(
      fc.property(
        secretValue,
        anyBody,
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { maxLength: 6 }),
        fc.dictionary(fc.stringMatching(/^[a-z]{1,5}$/), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
        fc.integer({ min: 1, max: 30 }),
        (secret, body, chunks, query, cap) => {
          const redactor = createRedactor({ S: secret });
          const url = `http://h/p/${encodeURIComponent(secret)}?${new URLSearchParams({ ...query, k: secret }).toString()}`;
          const reqBody = Buffer.concat([Buffer.from(body, 'latin1'), Buffer.from(secret)]);
          let clock = 0;
          const tape = createTape({ redactor, invocationId: 'inv_p', perf: () => (clock += 3), maxBodyBytes: cap * 10 });
          const call = tape.begin({ source: 'snippet', integration: null, method: 'PUT', url, headers: [], hostAdded: [] });
          call.requestBody(reqBody);
          call.head({ status: 201, statusText: 'Created', headers: [] });
          for (const c of chunks) call.chunk(Buffer.from(c));
          call.end(null);
          const cassette = cassetteOf(tape.entries());
          const p = createPlayer({ cassette, speed: 1, redactor, maxBodyBytes: cap * 10 });
          const a = p.answer({ source: 'snippet', integration: null, method: 'PUT', url, headers: [], hostAdded: [], body: reqBody });
          if ('message' in a) throw new Error(a.message);
          const played = Buffer.concat(a.chunks.map((c) => c.data));
          const sent = Buffer.concat(chunks.map((c) => Buffer.from(c))).subarray(0, cap * 10);
          // the answer comes back as recorded (redacted where it held the secret)
          expect(played.equals(redactor.bytes(sent).bytes)).toBe(true);
          if (!sent.includes(Buffer.from(secret))) expect(played.equals(sent)).toBe(true);
        },
      ),
      { seed, numRuns: 300 },
    );
  });
});
