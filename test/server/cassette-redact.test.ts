/**
 * Credentials never reach a cassette (server/egress/cassette/redact.ts, tape.ts): every secret value in
 * every encoding the engine promises (raw, URL-encoded, JSON-escaped, base64 at any alignment), every
 * credential header and every header the host added, in URLs, headers and bodies, also when a streamed
 * body splits a secret across chunks. The property test builds real tapes from arbitrary secrets and
 * checks the JSON of the entries (what a cassette file and a run's egress_blob hold).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createRedactor, createTape, redactEntry, REDACTED_VALUE, type HarEntry } from '../../server/egress/cassette';
import { fuzzSeed } from '../helpers/fuzz-seed';

const seed = fuzzSeed('cassette-redact', 20261127, process.env, console.info);

function oneCall(
  secrets: Record<string, string>,
  build: (call: ReturnType<ReturnType<typeof createTape>['begin']>) => void,
  req: { url: string; headers: [string, string][]; hostAdded?: string[] },
): HarEntry[] {
  let clock = 0;
  const tape = createTape({ redactor: createRedactor(secrets), invocationId: 'inv_p', now: () => 0, perf: () => (clock += 5) });
  const call = tape.begin({
    source: 'integration',
    integration: 'crm',
    method: 'POST',
    url: req.url,
    headers: req.headers,
    hostAdded: req.hostAdded ?? [],
  });
  build(call);
  call.end(null);
  return tape.entries();
}

function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) strings(x, out);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) strings(x, out);
  return out;
}

/** Every run of base64 characters in `text`, decoded at each of the four alignments (an independent oracle). */
function decodedBase64Runs(text: string): Buffer[] {
  const out: Buffer[] = [];
  for (const m of text.matchAll(/[A-Za-z0-9+/_-]{6,}/g)) {
    const run = m[0].replace(/-/g, '+').replace(/_/g, '/');
    for (let k = 0; k < 4; k++) out.push(Buffer.from(run.slice(k), 'base64'));
  }
  return out;
}

describe('redactor', () => {
  const r = createRedactor({ API_KEY: 'abcd1234secret', SHORT: 'abc', PASS: 'p@ss word/+' });

  it('replaces each value with [secret NAME], longest first, and says what it replaced', () => {
    expect(r.text('key=abcd1234secret&x=1')).toEqual({ text: 'key=[secret API_KEY]&x=1', replaced: ['[secret API_KEY]'] });
    // under 4 characters: left alone (it would match ordinary text)
    expect(r.text('abc abc').text).toBe('abc abc');
    const both = createRedactor({ OUTER: 'token-abcdef-long', INNER: 'abcdef' });
    expect(both.text('x token-abcdef-long y abcdef').text).toBe('x [secret OUTER] y [secret INNER]');
  });

  it('finds the URL-encoded, form-encoded, JSON-escaped and base64 forms', () => {
    expect(r.text(`u?p=${encodeURIComponent('p@ss word/+')}`).text).toBe('u?p=[secret PASS]');
    expect(r.text(`u?${new URLSearchParams({ p: 'p@ss word/+' }).toString()}`).text).toBe('u?p=[secret PASS]');
    const q = createRedactor({ Q: 'say "hi" \\ bye' });
    expect(q.text(JSON.stringify({ m: 'say "hi" \\ bye' })).text).toBe('{"m":"[secret Q]"}');
    expect(r.text(Buffer.from('abcd1234secret').toString('base64')).text).toBe('[secret API_KEY]');
    // inside a longer base64 string, at each of the three alignments: the bytes of the value are gone
    for (const prefix of ['', 'u', 'us', 'usr:']) {
      const b64 = Buffer.from(`${prefix}abcd1234secret!`).toString('base64');
      const out = r.text(`Basic ${b64}`).text;
      expect(out).toContain('[secret API_KEY]');
      const decodable = out.replace(/\[secret API_KEY\]/g, '');
      expect(Buffer.from(decodable.slice(6), 'base64').toString('latin1')).not.toContain('1234secr');
    }
    const url = Buffer.from('abcd1234secret??>>').toString('base64url');
    expect(r.text(url).text).toContain('[secret API_KEY]');
  });

  it('redacts credential headers and host-added headers whatever their value, and secrets in other headers', () => {
    const out = r.headers(
      [
        ['Authorization', 'Bearer anything'],
        ['cookie', 'a=b'],
        ['x-api-key', 'k'],
        ['api-key', 'k'],
        ['proxy-authorization', 'Basic x'],
        ['x-crm-token', 'not a secret value'],
        ['x-trace', 'id abcd1234secret'],
        ['accept', 'application/json'],
      ],
      ['X-CRM-Token'],
    );
    expect(out.headers).toEqual([
      ['Authorization', REDACTED_VALUE],
      ['cookie', REDACTED_VALUE],
      ['x-api-key', REDACTED_VALUE],
      ['api-key', REDACTED_VALUE],
      ['proxy-authorization', REDACTED_VALUE],
      ['x-crm-token', REDACTED_VALUE],
      ['x-trace', 'id [secret API_KEY]'],
      ['accept', 'application/json'],
    ]);
    expect(out.replaced).toEqual([
      'authorization',
      'cookie',
      'x-api-key',
      'api-key',
      'proxy-authorization',
      'x-crm-token',
      '[secret API_KEY]',
    ]);
    expect(r.headers([['set-cookie', 's=1']], []).headers).toEqual([['set-cookie', REDACTED_VALUE]]);
  });

  it('a secret split across response chunks is replaced whole and the chunk sizes still add up', () => {
    const [e] = oneCall(
      { K: 'SECRETVALUE99' },
      (call) => {
        call.head({ status: 200, statusText: 'OK', headers: [['content-type', 'text/plain']] });
        call.chunk(Buffer.from('one SECRET'));
        call.chunk(Buffer.from('VALUE99 two'));
        call.chunk(Buffer.from(' three'));
      },
      { url: 'http://h/x', headers: [] },
    );
    expect(e!.response.content.text).toBe('one [secret K] two three');
    const sizes = e!._svcEmu.chunks.map((c) => c.bytes);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(Buffer.byteLength(e!.response.content.text!));
    expect(sizes).toEqual(['one [secret K]'.length, ' two'.length, ' three'.length]);
    expect(e!._svcEmu.redacted).toEqual(['[secret K]']);
  });

  it('a body that is not UTF-8 is redacted as bytes and kept in base64', () => {
    const [e] = oneCall(
      { K: 'SECRETVALUE99' },
      (call) => {
        call.requestBody(Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from('SECRETVALUE99'), Buffer.from([0xc3])]));
        call.head({ status: 204, statusText: 'No Content', headers: [] });
      },
      { url: 'http://h/x', headers: [] },
    );
    expect(e!.request.postData?.encoding).toBe('base64');
    const bytes = Buffer.from(e!.request.postData!.text, 'base64');
    expect(bytes.toString('latin1')).toContain('[secret K]');
    expect(bytes.toString('latin1')).not.toContain('SECRETVALUE99');
  });

  it('redactEntry redacts a cassette that came from elsewhere (PUT, import) with the tenant’s secrets', () => {
    const [clean] = oneCall(
      {},
      (call) => {
        call.requestBody(Buffer.from('{"key":"IMPORTEDSECRET1"}'));
        call.head({ status: 200, statusText: 'OK', headers: [['x-echo', 'IMPORTEDSECRET1']] });
        call.chunk(Buffer.from('ab IMPORTED'));
        call.chunk(Buffer.from('SECRET1 cd'));
      },
      { url: 'http://h/x?k=IMPORTEDSECRET1', headers: [['authorization', 'Bearer x']] },
    );
    expect(JSON.stringify(clean)).toContain('IMPORTEDSECRET1');
    const e = redactEntry(clean!, createRedactor({ IMP: 'IMPORTEDSECRET1' }));
    expect(JSON.stringify(e)).not.toContain('IMPORTEDSECRET1');
    expect(e.response.content.text).toBe('ab [secret IMP] cd');
    expect(e._svcEmu.chunks.map((c) => c.bytes)).toEqual(['ab [secret IMP]'.length, ' cd'.length]);
    expect(e._svcEmu.redacted).toContain('[secret IMP]');
  });

  it('property: no secret value survives in the JSON of a tape’s entries, in any form or split', () => {
    // Printable ASCII, so quotes, backslashes, spaces, `%`, `+`, `/` and `=` are all drawn.
    const secret = fc.stringMatching(/^[\x20-\x7e]{8,40}$/);
    fc.assert(
      fc.property(
        fc.uniqueArray(secret, { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 6 }),
        fc.stringMatching(/^[a-z ]{0,12}$/),
        (values, cuts, filler) => {
          const secrets = Object.fromEntries(values.map((v, i) => [`S${i}`, v]));
          const scaffold =
            JSON.stringify(oneCall({}, () => {}, { url: 'http://h/x', headers: [] })) + ' [secret S0] [secret S1] [secret S2] [redacted]';
          fc.pre(values.every((v) => !scaffold.includes(v) && !filler.includes(v)));
          const v0 = values[0]!;
          const all = values.join(filler);
          const responseBody = Buffer.from(
            `${filler}${all}${filler}${Buffer.from(v0).toString('base64')}${filler}${JSON.stringify({ v: v0 })}`,
          );
          const entries = oneCall(
            secrets,
            (call) => {
              call.requestBody(
                Buffer.from(
                  JSON.stringify({ filler, all, encoded: encodeURIComponent(v0), b64: Buffer.from(`u:${v0}`).toString('base64') }),
                ),
              );
              call.head({
                status: 200,
                statusText: 'OK',
                headers: [
                  ['x-echo', v0],
                  ['set-cookie', `s=${v0}`],
                ],
              });
              // the body in pieces, cut wherever the draw says (secrets split across chunks)
              let at = 0;
              for (const c of cuts) {
                const end = Math.min(responseBody.length, at + 1 + (c % 17));
                call.chunk(responseBody.subarray(at, end));
                at = end;
              }
              call.chunk(responseBody.subarray(at));
            },
            {
              url: `http://h/p/${encodeURIComponent(v0)}?${new URLSearchParams({ q: v0, r: all }).toString()}`,
              headers: [
                ['authorization', `Bearer ${v0}`],
                ['x-plain', all],
                ['x-host-added', 'unrelated credential value'],
                ['x-basic', `Basic ${Buffer.from(`user:${v0}`).toString('base64')}`],
              ],
              hostAdded: ['x-host-added'],
            },
          );
          const json = JSON.stringify(entries);
          // Every string the entries hold (URL, header values, bodies), and the JSON as a whole.
          const texts = [json, ...strings(entries)];
          for (const v of values) {
            const forms = [v, JSON.stringify(v).slice(1, -1), encodeURIComponent(v), new URLSearchParams({ v }).toString().slice(2)];
            for (const t of texts) {
              for (const f of forms) expect(t).not.toContain(f);
              expect(decodedBase64Runs(t).some((d) => d.includes(Buffer.from(v)))).toBe(false);
            }
          }
          expect(json).not.toContain('unrelated credential value');
          const e = entries[0]!;
          expect(e._svcEmu.chunks.reduce((a, c) => a + c.bytes, 0)).toBe(e.response.content.size);
        },
      ),
      { seed, numRuns: 300 },
    );
  });
});
