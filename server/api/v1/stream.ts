import type { Context } from 'koa';
import { SSE_HEADERS, SseBody, type StreamEvent } from '../../http/sse';
import type { Reply } from '../../http/route';
import type { Services } from '../../services';
import type { InvokeRequest } from '../../services/invoke';
import type { InvocationRecord } from '../../storage/schema';
import type { InvocationView } from '../../services/invocations';

type StreamRequest = Omit<InvokeRequest, 'mode' | 'signal' | 'onChunk' | 'onStart'>;

/** The headers naming the run, on every invoke response (docs/contract.md, "Invoke"). */
export const runHeaders = (v: Pick<InvocationRecord, 'id' | 'version' | 'env'>) => ({
  'X-Invocation-Id': v.id,
  'X-Snippet-Version': String(v.version),
  'X-Snippet-Env': v.env ?? 'none',
});

const startData = (r: Pick<InvocationRecord, 'id' | 'snippet' | 'version' | 'env'>) => ({
  invocation_id: r.id,
  snippet: r.snippet,
  version: r.version,
  env: r.env,
});
const lastEvent = (v: InvocationView): ['result' | 'error', unknown] =>
  v.outcome === 'success'
    ? ['result', { output: v.output, usage: v.usage }]
    : ['error', { code: v.outcome ?? 'failed', message: v.error?.message ?? v.outcome ?? 'failed', invocation_id: v.id }];

/**
 * Stream mode: `start` once the run is recorded, a `chunk` per yielded value as it arrives, then
 * `result` or `error`. Refusals before the run exists (404, 429, …) are ordinary problem responses.
 * The client going away cancels the run. Every event is also recorded for the inspector.
 */
export async function streamInvocation(services: Services, ctx: Context, req: StreamRequest): Promise<Reply> {
  const streams = services.streams;
  const abort = new AbortController();
  let ended = false;
  ctx.res.once('close', () => {
    if (!ended) abort.abort(); // the client went away mid-stream
  });
  let id = '';
  let body: SseBody | null = null;
  let started!: (rec: InvocationRecord) => void;
  const start = new Promise<InvocationRecord>((resolve) => (started = resolve));
  const run = services.invoke.invoke({
    ...req,
    mode: 'stream',
    signal: abort.signal,
    onStart: (rec) => {
      id = rec.id;
      const sse = new SseBody(streams.pingMs);
      body = sse;
      streams.open(id, (e) => (e ? sse.send(e) : sse.end()));
      streams.emit(id, 'start', startData(rec));
      started(rec);
    },
    onChunk: (data) => streams.emit(id, 'chunk', { data }),
  });
  const first = await Promise.race([start.then((rec) => ({ rec })), run.then((done) => ({ done }))]);
  if ('done' in first) return replay(services, first.done.record); // an Idempotency-Key repeat: nothing ran

  void run
    .then(
      async ({ record }) => {
        const [event, data] = lastEvent(await services.invocations.view(record));
        streams.emit(id, event, data);
      },
      () => streams.emit(id, 'error', { code: 'failed', message: 'the emulator failed to record this invocation', invocation_id: id }),
    )
    .finally(() => {
      ended = true;
      return streams.close(id);
    });
  return { status: 200, body: body!.stream, headers: { ...SSE_HEADERS, ...runHeaders(first.rec) } };
}

/** A repeat of a finished invocation: its recorded events again (or start and its outcome, if it did not stream). */
async function replay(services: Services, record: InvocationRecord): Promise<Reply> {
  const view = await services.invocations.view(record);
  let events = (await services.streams.read(record)).events;
  if (!events.length) {
    const [event, data] = lastEvent(view);
    const at = record.created_at;
    events = [
      { id: 1, event: 'start', data: startData(record), at, t_ms: 0 },
      { id: 2, event, data, at: record.finished_at ?? at, t_ms: 0 },
    ] satisfies StreamEvent[];
  }
  const sse = new SseBody(services.streams.pingMs);
  for (const e of events) sse.send(e);
  sse.end();
  return { status: 200, body: sse.stream, headers: { ...SSE_HEADERS, ...runHeaders(record), 'Idempotent-Replayed': 'true' } };
}

/**
 * A second viewer (the GUI's inspector): the events so far, then each next one live until the stream
 * ends (or at once, for one that has ended).
 */
export async function followInvocation(services: Services, ctx: Context, record: InvocationRecord): Promise<Reply> {
  const sse = new SseBody(services.streams.pingMs);
  const early: (StreamEvent | null)[] = [];
  let caughtUp = false;
  const deliver = (e: StreamEvent | null) => (e ? sse.send(e) : sse.end());
  const f = await services.streams.follow(record, (e) => (caughtUp ? deliver(e) : early.push(e)));
  for (const e of f.past) sse.send(e);
  for (const e of early) deliver(e);
  caughtUp = true;
  if (!f.live) sse.end();
  ctx.res.once('close', () => {
    f.unsubscribe();
    sse.end();
  });
  return { status: 200, body: sse.stream, headers: { ...SSE_HEADERS } };
}
