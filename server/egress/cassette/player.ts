import { CassetteMatch, type Cassette, type HarEntry } from '../../../contract/schemas/cassette';
import { bodyToHar, harBodyBytes } from './har';
import { bodyText, differences, matchInputOfEntry, normalise, normaliseHead, type NormalisedHead, type NormalisedRequest } from './match';
import { urlMarkers, type ByteRedactor } from './redact';
import { DEFAULT_MAX_BODY_BYTES } from './tape';
import type { CallRequest, CallResponseHead, Player, Redactor, ReplayAnswer, ReplayMiss } from './types';

export interface PlayerOptions {
  cassette: Cassette;
  /** The matchers in force (the snippet's `egress.match` over the cassette's own); defaults filled in. */
  match?: Partial<CassetteMatch>;
  /** Recorded waits are divided by it; 0: no waits. */
  speed: number;
  /** The same secrets the recording was redacted with: live requests are compared redacted. */
  redactor: Redactor;
  /** The cassette's name, for messages. */
  name?: string;
  /** A live request body is cut here before comparing, as the tape cut it when recording. */
  maxBodyBytes?: number;
}

interface Item {
  entry: HarEntry;
  /** Method, path, query: computed up front (cheap); the body only when a call gets this far (`normOf`). */
  head: NormalisedHead;
  norm: NormalisedRequest | null;
  used: boolean;
}

/** At most this many recorded calls have their bodies compared to name the closest one. */
const MAX_COMPARED = 50;

const describe = (e: HarEntry): string => `${e.request.method} ${e.request.url}`;

/** The recorded answer, as chunks with the wait before each (scaled by `speed`). */
export function playEntry(entry: HarEntry, speed: number): ReplayAnswer {
  const body = harBodyBytes(entry.response.content.text, entry.response.content.encoding);
  const headers: [string, string][] = entry.response.headers.map((h) => [h.name, h.value]);
  // The body may differ in length from what was sent (a secret redacted, a long body cut): say the truth.
  for (const h of headers) if (h[0].toLowerCase() === 'content-length') h[1] = String(body.length);
  const head: CallResponseHead = { status: entry.response.status, statusText: entry.response.statusText, headers };
  const scale = (d: number) => (speed > 0 && Number.isFinite(d) && d > 0 ? d / speed : 0);
  const chunks: ReplayAnswer['chunks'] = [];
  let at = 0;
  let prevT = 0;
  let carried = 0;
  for (const c of entry._svcEmu.chunks) {
    const delay = scale(c.t_ms - prevT) + carried;
    prevT = Math.max(prevT, c.t_ms);
    const size = Math.min(c.bytes, body.length - at);
    if (size <= 0) {
      carried = delay; // an empty chunk (a secret's bytes moved to the next one): its wait goes with the next
      continue;
    }
    carried = 0;
    chunks.push({ delayMs: delay, data: body.subarray(at, at + size) });
    at += size;
  }
  if (at < body.length) {
    // Chunk sizes short of the body (an edited file): the rest comes at the end.
    const last = chunks[chunks.length - 1];
    if (last) last.data = Buffer.concat([last.data, body.subarray(at)]);
    else chunks.push({ delayMs: scale(entry.time) + carried, data: body.subarray(at) });
  }
  return { entry, error: entry._svcEmu.error, head, chunks };
}

/**
 * Answers one run's calls from a cassette. `order: false`: the first unused matching entry, then (all used)
 * the last matching one again. `order: true`: the episode whose first call matches the run's first call
 * (the newest such), then its calls in `seq` order, one per call. A miss names the closest recorded call.
 */
export function createPlayer(opts: PlayerOptions): Player {
  const match = CassetteMatch.parse(opts.match ?? {});
  const cap = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const speed = opts.speed;
  const items: Item[] = opts.cassette.log.entries.map((entry) => ({
    entry,
    head: normaliseHead(entry.request, match),
    norm: null,
    used: false,
  }));
  const episodes = new Map<string, Item[]>();
  for (const it of items) {
    const id = it.entry._svcEmu.invocation_id;
    const list = episodes.get(id) ?? [];
    list.push(it);
    episodes.set(id, list);
  }
  for (const list of episodes.values()) list.sort((a, b) => a.entry._svcEmu.seq - b.entry._svcEmu.seq);
  let episode: Item[] | null = null;
  let cursor = 0;
  let calls = 0;
  const cassetteName = opts.name ? `cassette "${opts.name}"` : 'the cassette';

  const liveInput = (req: CallRequest) => {
    const url = urlMarkers(opts.redactor.text(req.url).text);
    const raw = req.body.length > cap ? req.body.subarray(0, cap) : req.body;
    const r = opts.redactor as Partial<ByteRedactor>;
    let body: Buffer = raw;
    if (typeof r.bytes === 'function') body = r.bytes(raw).bytes;
    else if (Buffer.from(raw.toString('utf8'), 'utf8').equals(raw))
      body = Buffer.from(opts.redactor.text(raw.toString('utf8')).text, 'utf8');
    const har = bodyToHar(body);
    return { method: req.method, url, body: bodyText(har.text, har.encoding) };
  };

  const normOf = (it: Item): NormalisedRequest => (it.norm ??= normalise(matchInputOfEntry(it.entry), match));
  const matches = (it: Item, norm: NormalisedRequest): boolean => it.head.head === norm.head && normOf(it).key === norm.key;

  const miss = (req: CallRequest, norm: NormalisedRequest, pool: Item[], why: string): ReplayMiss => {
    const what = `${req.method.toUpperCase()} ${urlMarkers(opts.redactor.text(req.url).text)}`;
    if (pool.length === 0) {
      return {
        message: `replay: no recorded call matches ${what}: ${why}. Record it: run once with egress mode "record".`,
        closest: null,
      };
    }
    // Same method and path first: only their bodies are compared (a miss in a big cassette stays cheap).
    // Otherwise the few whose method, path, host and query differ least (bodies are the costly part).
    const near = pool.filter((it) => it.head.method === norm.method && it.head.path === norm.path);
    const bare = (h: NormalisedHead): NormalisedRequest => ({ ...h, body: { kind: 'none' }, key: h.head });
    const byHead = (list: Item[]) =>
      list
        .map((it) => ({ it, d: differences(bare(it.head), bare(norm)).distance }))
        .sort((a, b) => a.d - b.d)
        .slice(0, MAX_COMPARED)
        .map((x) => x.it);
    const candidates = byHead(near.length > 0 ? near : pool);
    let best = candidates[0] as Item;
    let bestDiff = differences(normOf(best), norm);
    for (const it of candidates.slice(1)) {
      const d = differences(normOf(it), norm);
      if (d.distance < bestDiff.distance) {
        best = it;
        bestDiff = d;
      }
    }
    const e = best.entry;
    const hints: string[] = ['record again (egress mode "record")'];
    if (bestDiff.bodyFields.length > 0 && bestDiff.words.every((w) => w.startsWith('body field') || w.startsWith('and '))) {
      hints.push(
        `if those fields do not matter, add them to "egress": {"match": {"ignore_body_fields": ${JSON.stringify(bestDiff.bodyFields.slice(0, 5))}}} in snippet.json`,
      );
    } else if (bestDiff.queryNames.length > 0) {
      hints.push(
        `if those parameters do not matter, add them to "egress": {"match": {"ignore_query": ${JSON.stringify(bestDiff.queryNames)}}} in snippet.json`,
      );
    } else if (bestDiff.bodyFields.length > 0) {
      hints.push(`add an "ignore_body_fields" matcher in snippet.json's "egress.match" for fields that do not matter`);
    }
    const diffs = bestDiff.words.length > 0 ? bestDiff.words.join('; ') : 'no difference (it was already used, and order is on)';
    return {
      message:
        `replay: no recorded call matches ${what} (${why}). The closest in ${cassetteName} is call #${e._svcEmu.seq} of run ${e._svcEmu.invocation_id}, ` +
        `${describe(e)}: ${diffs}. To fix: ${hints.join('; or ')}.`,
      closest: {
        seq: e._svcEmu.seq,
        invocation_id: e._svcEmu.invocation_id,
        method: e.request.method,
        url: e.request.url,
        differences: bestDiff.words,
      },
    };
  };

  return {
    answer(req) {
      const n = calls++;
      const norm = normalise(liveInput(req), match);
      if (items.length === 0) return miss(req, norm, [], `${cassetteName} holds no calls`);
      if (!match.order) {
        const same = items.filter((it) => matches(it, norm));
        const pick = same.find((it) => !it.used) ?? same[same.length - 1];
        if (pick) {
          pick.used = true;
          return playEntry(pick.entry, speed);
        }
        return miss(req, norm, items, `${items.length} recorded call(s), none with this method, URL and body`);
      }
      if (!episode) {
        const lists = [...episodes.values()];
        const firsts = lists.map((list) => list[0] as Item);
        const starting = lists.filter((list) => list[0] !== undefined && matches(list[0], norm));
        const newest = starting[starting.length - 1];
        if (!newest) return miss(req, norm, firsts, `match order is on, and no recorded run begins with this call`);
        episode = newest;
        cursor = 0;
      }
      const expected = episode[cursor];
      if (!expected) {
        return miss(req, norm, [], `match order is on, and the recorded run made only ${episode.length} call(s); this is call ${n + 1}`);
      }
      if (!matches(expected, norm))
        return miss(req, norm, [expected], `match order is on, and this is call ${cursor + 1} of the recorded run`);
      cursor++;
      expected.used = true;
      return playEntry(expected.entry, speed);
    },
  };
}
