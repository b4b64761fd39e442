// The tab's runs, held above the pages: an invoke the Run panel (pages/snippet-run.tsx) or "Run again"
// (pages/invocation-replay.tsx) starts lives here, not in the page, so leaving the page never aborts its
// request. That matters for streams: a client that disconnects cancels the run (docs/contract.md,
// "Invoke"), and watching one in the live inspector means leaving the Run panel. A run ends when it ends,
// when Cancel is pressed, or when the tab closes (the browser drops the request); never on navigation.
// Also kept per snippet: the Run form's draft, so coming back finds the form as it was left.
import { useSyncExternalStore } from 'react';
import { operations, ProblemError, type Api, type EventStream } from './api';
import type { Invocation } from './types';

export type Mode = 'sync' | 'async' | 'stream';

export interface RunMeta {
  invocationId: string | null;
  version: string | null;
  env: string | null;
}

export interface RunEvent {
  id: number;
  event: string;
  /** ms since the run was sent */
  at: number;
  data: unknown;
}

export type Result =
  | { mode: 'sync'; status: number; ok: boolean; body: unknown; meta: RunMeta; ms: number }
  | { mode: 'async'; status: number; accepted: unknown; meta: RunMeta; record: Invocation | null; reads: number; readError: unknown }
  | { mode: 'stream'; status: number; meta: RunMeta; events: RunEvent[]; done: boolean; ms: number | null; cut: string | null }
  | { mode: 'refused'; status: number; body: unknown; meta: RunMeta }
  | { mode: 'error'; error: unknown };

/** What to invoke: the invoke operation's input, and the X-Emu-Limits value (`''`: none). */
export interface RunRequest {
  snippet: string;
  mode: Mode;
  query: { env?: string; version?: string };
  body: Record<string, unknown>;
  limits: string;
  /** This run's egress mode and cassette (`X-Emu-Egress-Mode`, `X-Emu-Cassette`; `''`: the snippet's or the server's). */
  egress?: { mode: '' | 'live' | 'record' | 'replay'; cassette: string };
  /**
   * A debug run (`X-Emu-Debug: 1`, with the admin token): its session is found on the live feed by this
   * X-Request-Id (pages/debug-session.tsx).
   */
  debug?: { requestId: string };
}

export interface HeldRun {
  /** This tab's number for the run (a newer run of the same snippet has a larger one). */
  seq: number;
  request: RunRequest;
  result: Result | null;
  running: boolean;
  /** Cancel was pressed (the core is ending the run). */
  cancelling: boolean;
}

/** The Run form as the user left it. */
export interface RunDraft {
  input: string;
  mode: Mode;
  target: string;
  overrides: Record<'timeout_ms' | 'max_memory_mb' | 'max_cpu_percent', string>;
  /** What the form was last prefilled from (`#/snippet/NAME/run/from/ID`), so it is applied once. */
  from: string | null;
  /** The run's egress choice (absent: the snippet's or the server's mode). */
  egress?: RunRequest['egress'];
}

export const FINISHED = new Set(['succeeded', 'failed']);

/** The run's invocation, version and environment, from the answer's headers (any status). */
const metaOf = (headers: Headers): RunMeta => ({
  invocationId: headers.get('X-Invocation-Id'),
  version: headers.get('X-Snippet-Version'),
  env: headers.get('X-Snippet-Env'),
});

/** An answer's body as shown: its JSON, its text when it is not JSON, null when empty. */
function parsedBody(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return text; // not JSON: shown as text
  }
}

export class RunHolder {
  private readonly latest = new Map<string, HeldRun>();
  private readonly drafts = new Map<string, RunDraft>();
  /** Every run whose request is open, by seq (a newer run of the snippet does not end an older one). */
  private readonly open = new Map<number, AbortController>();
  private readonly listeners = new Set<() => void>();
  private seq = 0;

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  };

  /** The snippet's latest run in this tab, or null. */
  get(snippet: string): HeldRun | null {
    return this.latest.get(snippet) ?? null;
  }

  /** Requests this tab holds open (runs in flight). */
  get openCount(): number {
    return this.open.size;
  }

  draft(snippet: string): RunDraft | null {
    return this.drafts.get(snippet) ?? null;
  }

  saveDraft(snippet: string, draft: RunDraft): void {
    this.drafts.set(snippet, draft);
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }

  /** Changes a run's state, if it is still the snippet's latest (an older one runs on, unseen). */
  private update(snippet: string, seq: number, change: (r: HeldRun) => Partial<HeldRun>): void {
    const cur = this.latest.get(snippet);
    if (!cur || cur.seq !== seq) return;
    this.latest.set(snippet, { ...cur, ...change(cur) });
    this.notify();
  }

  private setResult(snippet: string, seq: number, f: (r: Result | null) => Result | null): void {
    this.update(snippet, seq, (r) => ({ result: f(r.result) }));
  }

  /**
   * Starts a run and resolves once the core has answered its start (stream: the response headers; sync:
   * the whole answer; async: the 202), with the invocation's id when the answer names one. The run goes
   * on after that (a stream is read to its end here), whoever watches.
   */
  async start(api: Api, req: RunRequest, adminToken: () => Promise<string | null>): Promise<string | null> {
    const seq = ++this.seq;
    const { snippet } = req;
    this.latest.set(snippet, { seq, request: req, result: null, running: true, cancelling: false });
    this.notify();
    const controller = new AbortController();
    this.open.set(seq, controller);
    const setResult = (f: (r: Result | null) => Result | null) => this.setResult(snippet, seq, f);
    let answered: (id: string | null) => void = () => {};
    const started = new Promise<string | null>((resolve) => (answered = resolve));
    void (async () => {
      try {
        const headers: Record<string, string> = {};
        if (req.mode !== 'sync') headers['X-Invoke-Mode'] = req.mode;
        const egressMode = req.egress?.mode ?? '';
        const cassette = req.egress?.cassette.trim() ?? '';
        if (req.limits || egressMode || cassette || req.debug) {
          const token = await adminToken();
          if (!token) {
            throw new Error(
              'Per-run limit overrides, egress modes and debug runs need the admin token, and this session has none: open the URL printed by npm start again.',
            );
          }
          if (req.debug) {
            headers['X-Emu-Debug'] = '1';
            headers['X-Request-Id'] = req.debug.requestId;
          }
          if (req.limits) headers['X-Emu-Limits'] = req.limits;
          if (egressMode) headers['X-Emu-Egress-Mode'] = egressMode;
          if (cassette) headers['X-Emu-Cassette'] = cassette;
          headers['X-Emu-Admin'] = token;
        }
        const t0 = performance.now();
        const input = { params: { snippet }, query: req.query, body: req.body, headers, signal: controller.signal };
        if (req.mode === 'stream') {
          // A refusal (an error answer) is shown with its status and body, as the other modes show theirs.
          const events = await api.client.stream(operations.invoke, input).catch((e: unknown) => {
            if (e instanceof ProblemError) return e;
            throw e;
          });
          if (events instanceof ProblemError) {
            const meta = metaOf(events.headers);
            answered(meta.invocationId);
            setResult(() => ({ mode: 'refused', status: events.status, body: parsedBody(events.text), meta }));
          } else await this.read(events, setResult, t0, controller.signal, answered);
          return;
        }
        const res = await api.client.send(operations.invoke, { ...input, headers: { accept: 'application/json', ...headers } });
        const meta = metaOf(res.headers);
        const parsed = parsedBody(res.text);
        if (req.mode === 'sync') {
          const ok = res.status >= 200 && res.status <= 299;
          setResult(() => ({ mode: 'sync', status: res.status, ok, body: parsed, meta, ms: performance.now() - t0 }));
          answered(meta.invocationId);
        } else if (res.status === 202) {
          const id = (parsed as { invocation_id?: string }).invocation_id ?? meta.invocationId;
          setResult(() => ({
            mode: 'async',
            status: res.status,
            accepted: parsed,
            meta: { ...meta, invocationId: id ?? null },
            record: null,
            reads: 0,
            readError: null,
          }));
          answered(id ?? null);
          // Read once now; then the Run panel reads again when the feed says it finished (readAsync).
          if (id) await this.readAsync(api, snippet);
        } else {
          answered(meta.invocationId);
          setResult(() => ({ mode: 'refused', status: res.status, body: parsed, meta }));
        }
      } catch (e) {
        if ((e as Error).name === 'AbortError') {
          setResult((r) =>
            r && r.mode === 'stream' ? { ...r, done: true, cut: 'stopped: the client disconnected, which cancels the run' } : r,
          );
        } else setResult(() => ({ mode: 'error', error: e }));
      } finally {
        answered(null);
        this.open.delete(seq);
        this.update(snippet, seq, () => ({ running: false }));
      }
    })();
    return started;
  }

  private async read(
    stream: EventStream<typeof operations.invoke>,
    setResult: (f: (r: Result | null) => Result | null) => void,
    t0: number,
    signal: AbortSignal,
    answered: (id: string | null) => void,
  ): Promise<void> {
    const meta = metaOf(stream.headers);
    answered(meta.invocationId);
    const events: RunEvent[] = [];
    setResult(() => ({ mode: 'stream', status: stream.status, meta, events: [], done: false, ms: null, cut: null }));
    for await (const e of stream) {
      events.push({ id: Number(e.id), event: e.event, at: performance.now() - t0, data: e.data });
      const startId = e.event === 'start' ? e.data.invocation_id : undefined;
      setResult((r) =>
        r && r.mode === 'stream'
          ? { ...r, events: [...events], meta: startId && !r.meta.invocationId ? { ...r.meta, invocationId: startId } : r.meta }
          : r,
      );
    }
    // The typed stream ends quietly when aborted (contract/sse.ts): the same note as an aborted fetch's.
    if (signal.aborted) throw new DOMException('stopped', 'AbortError');
    const last = events[events.length - 1];
    const complete = last?.event === 'result' || last?.event === 'error';
    setResult((r) =>
      r && r.mode === 'stream'
        ? { ...r, done: true, ms: performance.now() - t0, cut: complete ? null : 'ended without a result or error event' }
        : r,
    );
  }

  /** Reads the snippet's latest async run's record (after its 202, and when the live feed says it finished). */
  async readAsync(api: Api, snippet: string): Promise<void> {
    const cur = this.latest.get(snippet);
    const id = cur?.result?.mode === 'async' ? cur.result.meta.invocationId : null;
    if (!cur || !id) return;
    try {
      const record = await api.client.call(operations.getInvocation, { params: { id } });
      this.setResult(snippet, cur.seq, (r) => (r && r.mode === 'async' ? { ...r, record, reads: r.reads + 1 } : r));
    } catch (e) {
      this.setResult(snippet, cur.seq, (r) => (r && r.mode === 'async' ? { ...r, readError: e, reads: r.reads + 1 } : r));
    }
  }

  /** Stops waiting: aborts the snippet's latest request (for a stream, that disconnect cancels the run). */
  stop(snippet: string): void {
    const cur = this.latest.get(snippet);
    if (cur) this.open.get(cur.seq)?.abort();
  }

  /**
   * Cancel: asks the core to cancel the run (POST /v1/invocations/{id}/cancel), so a stream ends with its
   * `error` event and outcome `cancelled`; before the run has an id, the request is aborted instead.
   */
  async cancel(api: Api, snippet: string): Promise<void> {
    const cur = this.latest.get(snippet);
    if (!cur) return;
    const id = cur.result && 'meta' in cur.result ? cur.result.meta.invocationId : null;
    this.update(snippet, cur.seq, () => ({ cancelling: true }));
    if (!id) {
      this.open.get(cur.seq)?.abort();
      return;
    }
    try {
      await api.client.call(operations.cancelInvocation, { params: { id } });
    } catch {
      // It had ended (409) or the core is gone: what the run shows says which.
      this.update(snippet, cur.seq, () => ({ cancelling: false }));
    }
  }
}

/** This tab's runs (one per page load: the holder lives as long as the document). */
export const runs = new RunHolder();

/** The snippet's latest run in this tab, kept current. */
export function useHeldRun(snippet: string): HeldRun | null {
  return useSyncExternalStore(runs.subscribe, () => runs.get(snippet));
}
