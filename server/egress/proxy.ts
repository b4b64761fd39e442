import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, createServer, isIP, type Server, type Socket } from 'node:net';
import { chmod, unlink } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { answerFromCassette, headerPairs, replayedHeaders, type EgressIdentity, type EgressService } from '../services/egress';
import type { CallRequest, EgressSession, TapeCall } from './cassette/types';
import type { FaultPlan } from './faults';
import { PROBLEM_TYPE_BASE } from '../http/problem';
import type { TlsTerminator } from './tls/terminate';
import { upstreamTls } from './tls/trust';
import { isProviderCall, type ExchangeRecorder } from './exchanges';

type Gate =
  | { kind: 'drop' }
  | { kind: 'hold' }
  | { kind: 'fault'; status: number; body: string }
  | { kind: 'refused' | 'unreachable'; detail: string }
  | { kind: 'go'; target: { address: string; family: number } };

/** The first line each relayed connection starts with (see the runners' egress relay). */
const PREAMBLE = /^SVC-EGRESS 1 (\S+)\r?\n/;
const PREAMBLE_MAX = 256;
/** A replayed chunk comes at least this share of its recorded gap after the one before (catching up after a stall). */
const CATCH_UP = 0.9;
/** A connection held open by a `timeout` fault is closed after this long if the client has not given up. */
const HOLD_MAX_MS = 10 * 60 * 1000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Why a call could not reach its target, naming it and the fix: what a snippet's HTTP client shows. A
 * tunnel's refusal reaches the client only as its status line (Bun: "Proxy refused to open a tunnel: 502
 * …", httpx: "ProxyError: 502 …"), so the same text is its reason phrase (`statusLine`).
 */
export function unreachableText(host: string, port: number, why: string): string {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const fix = /ENOTFOUND|EAI_AGAIN|host not found/i.test(why)
    ? /(^|\.)openai\.com$/i.test(host)
      ? 'this machine cannot resolve it (offline?): point OPENAI_BASE_URL (a tenant secret) at a reachable OpenAI-compatible API, e.g. the fake provider (node --import tsx scripts/fake-provider.mjs)'
      : 'check the host name, or whether this machine is online'
    : /ECONNREFUSED/.test(why)
      ? 'nothing listens there: start the server, or check the port'
      : 'check the address and the network';
  return `egress: cannot reach ${where}: ${why}; ${fix}`;
}

/** `HTTP/1.1 502 Bad Gateway (egress: …)`: the standard phrase first, then the reason, in the ASCII a status line allows. */
export const statusLine = (status: number, phrase: string, detail: string) =>
  `HTTP/1.1 ${status} ${phrase} (${detail.replace(/[\u2013\u2014]/g, '-').replace(/[^\x20-\x7e]/g, '?')})`;

/**
 * Where a data dir's egress socket lives: inside it, unless that path is too long for a unix socket
 * (about 107 bytes on Linux), then in the temp dir under a name derived from the data dir.
 */
export function egressSocketPath(dataDir: string): string {
  const inside = join(dataDir, 'egress.sock');
  if (Buffer.byteLength(inside) <= 100) return inside;
  return join(tmpdir(), `svc-emu-egress-${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}.sock`);
}

/**
 * The egress proxy: an HTTP forward proxy (absolute-form requests for plain HTTP, CONNECT tunnels for
 * HTTPS) on a unix socket. Runners reach it through their relay (from inside the sandbox's network
 * namespace it is the only way out); each connection names its invocation in a one-line preamble. Every
 * call goes through EgressService: fault rules, the egress profile on the resolved address, the log.
 */
export class EgressProxy {
  private readonly http = createHttpServer();
  private readonly listener: Server;
  private readonly who = new WeakMap<Duplex, EgressIdentity>();
  /**
   * A CONNECT tunnel whose TLS the core terminates (record and replay of HTTPS: server/egress/tls/): the
   * decrypted socket is handed to the HTTP server like a relay connection, marked with the origin it was
   * opened to, so `forward` sees origin-form requests (`GET /v1/…`) and rebuilds `https://host:port/…`.
   */
  private readonly tlsOrigin = new WeakMap<Duplex, { host: string; port: number }>();
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly egress: EgressService,
    readonly socketPath: string,
    /**
     * TLS termination for recording and replaying runs (server/egress/tls/); null: every tunnel is blind.
     * `note` is told (invocation, text) when a run's tunnel cannot be terminated (passthrough or refused).
     */
    private readonly tls: { terminator: TlsTerminator; note: (invocationId: string, text: string) => void } | null = null,
  ) {
    this.http.on('request', (req, res) => void this.forward(req, res));
    this.http.on('connect', (req, socket, head) => void this.tunnel(req, socket as Socket, head));
    this.http.on('clientError', (_err, socket) => socket.destroy());
    this.listener = createServer((socket) => this.accept(socket));
  }

  async listen(): Promise<void> {
    await unlink(this.socketPath).catch(() => {}); // a socket left by a core that died
    await new Promise<void>((resolve, reject) => {
      this.listener.once('error', reject);
      this.listener.listen(this.socketPath, () => resolve());
    });
    await chmod(this.socketPath, 0o600);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.listener.close(() => resolve()));
    await unlink(this.socketPath).catch(() => {});
  }

  /** Reads the preamble, then hands the rest of the connection to the HTTP server. */
  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const text = buf.toString('latin1');
      const m = PREAMBLE.exec(text);
      if (!m) {
        if (buf.length > PREAMBLE_MAX || (text.includes('\n') && !text.startsWith('SVC-EGRESS'))) socket.destroy();
        return;
      }
      socket.off('data', onData);
      socket.pause();
      this.who.set(socket, this.egress.identify(m[1] === '-' ? null : m[1]!));
      const rest = buf.subarray(Buffer.byteLength(m[0], 'latin1'));
      if (rest.length) socket.unshift(rest);
      this.http.emit('connection', socket);
      socket.resume();
    };
    socket.on('data', onData);
  }

  private identity(socket: Duplex): EgressIdentity {
    return this.who.get(socket) ?? { tenant: null, invocation_id: null };
  }

  /**
   * Plain HTTP: `GET http://host/path`; and origin-form requests (`GET /v1/…`) on a TLS tunnel the core
   * terminated (`tlsOrigin`), sent on to `https://host:port` over TLS. Answered with `Connection: close`, so
   * each request is attributed afresh. Every call goes on its run's tape (services/egress-sessions.ts); a
   * replaying run's calls are answered from the cassette, chunk by chunk at the recorded pace, and nothing
   * goes out (fault rules still act first).
   */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const identity = this.identity(req.socket);
    const origin = this.tlsOrigin.get(req.socket);
    let url: URL;
    try {
      if (origin) {
        if (!(req.url ?? '').startsWith('/')) throw new Error('not origin-form');
        url = new URL(`https://${origin.host.includes(':') ? `[${origin.host}]` : origin.host}:${origin.port}${req.url}`);
      } else {
        url = new URL(req.url ?? '');
        if (url.protocol !== 'http:') throw new Error('not http');
      }
    } catch {
      res
        .writeHead(400, { 'content-type': 'text/plain', connection: 'close' })
        .end('the egress proxy takes absolute http:// URLs (and CONNECT for https)\n');
      return;
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    let bytesOut = 0;
    let bytesIn = 0;
    const plan = this.egress.plan(host, null);
    // A model call (chat completions, responses): its bodies are kept for the agent run view (egress/exchanges.ts).
    const exchange =
      identity.invocation_id && isProviderCall(req.method, url.pathname)
        ? this.egress.exchanges.open(identity.invocation_id, { source: 'snippet', method: req.method ?? 'POST', host, path: url.pathname })
        : null;
    const headers = { ...req.headers };
    for (const h of ['proxy-authorization', 'proxy-connection', 'connection', 'keep-alive']) delete headers[h];
    // The run's tape takes the call as it goes upstream (in replay too: the run's egress_blob shows what it asked).
    const session = this.egress.sessionFor(identity.invocation_id);
    const sent = headerPairs({ ...headers, host: url.host });
    const callRequest = {
      source: 'snippet' as const,
      integration: null,
      method: req.method ?? 'GET',
      url: url.href,
      headers: sent,
      hostAdded: [],
    };
    const call = session?.tape.begin(callRequest) ?? null;
    const log = (fields: { status?: number | null; refused?: string | null; error?: string | null }) => {
      const entry = this.egress.record({
        source: 'snippet',
        ...identity,
        integration: null,
        method: req.method ?? 'GET',
        host,
        port,
        path: url.pathname,
        status: fields.status ?? null,
        bytes_out: bytesOut,
        bytes_in: bytesIn,
        duration_ms: Math.round(performance.now() - started),
        fault: plan.describe,
        refused: fields.refused ?? null,
        error: fields.error ?? null,
        startedAt: started,
      });
      exchange?.finish(entry);
      // After the log entry: building the tape's entry (redaction) is not the call's time.
      call?.end(fields.error ?? fields.refused ?? (fields.status == null ? 'no answer' : null));
    };
    /** The whole request body (a fault's or the cassette's answer needs no upstream, but the tape and the agent view want it). */
    const readBody = () =>
      new Promise<Buffer>((resolve) => {
        const parts: Buffer[] = [];
        req.on('data', (c: Buffer) => {
          bytesOut += c.length;
          parts.push(c);
          call?.requestBody(c);
          exchange?.request(c);
        });
        req.once('end', () => resolve(Buffer.concat(parts)));
        req.once('close', () => resolve(Buffer.concat(parts)));
      });
    res.shouldKeepAlive = false;

    // Replay: no name is resolved and no connection made; fault rules still act first (QA can break a replay on purpose).
    const gate: Gate | { kind: 'replay' } =
      session?.mode === 'replay' ? ((await this.faultGate(plan)) ?? { kind: 'replay' }) : await this.gate(host, port, plan, identity);
    if (gate.kind === 'unreachable') gate.detail = unreachableText(host, port, gate.detail);
    switch (gate.kind) {
      case 'drop':
        req.socket.destroy();
        log({ error: 'connection dropped by a fault rule' });
        return;
      case 'hold':
        await this.hold(req.socket);
        log({ error: 'held without an answer by a fault rule' });
        return;
      case 'fault':
        bytesIn = Buffer.byteLength(gate.body);
        // The model call's request still tells which model was asked, even though the fault answers it.
        if (exchange || call) await readBody();
        exchange?.head(gate.status, 'application/json', undefined);
        exchange?.response(Buffer.from(gate.body));
        call?.head({
          status: gate.status,
          statusText: '',
          headers: [
            ['content-type', 'application/json'],
            ['x-svc-emu-fault', 'status'],
          ],
        });
        call?.chunk(Buffer.from(gate.body));
        res.writeHead(gate.status, { 'content-type': 'application/json', 'x-svc-emu-fault': 'status' }).end(gate.body);
        log({ status: gate.status });
        return;
      case 'refused':
      case 'unreachable': {
        const refused = gate.kind === 'refused';
        const status = refused ? 403 : 502;
        const code = refused ? 'egress_refused' : 'bad_gateway';
        res.writeHead(status, { 'content-type': 'application/problem+json', 'x-svc-emu-egress': refused ? 'refused' : 'failed' }).end(
          JSON.stringify({
            type: `${PROBLEM_TYPE_BASE}${code}`,
            title: refused ? 'Egress refused' : 'Bad gateway',
            status,
            code,
            detail: gate.detail,
          }),
        );
        log({ status, refused: refused ? gate.detail : null, error: refused ? null : gate.detail });
        return;
      }
      case 'replay': {
        // A latency fault delays the answer as it would a live one: the recorded times count from after it.
        const from = started + plan.latencyMs;
        const body = await readBody();
        return this.replay(res, session!, { ...callRequest, body }, exchange, call, log, (n) => (bytesIn += n), from);
      }
    }
    const target = gate.target;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const upstream = send(
      {
        host: target.address,
        family: target.family,
        port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, host: url.host },
        agent: false,
        setHost: false,
        // TLS the core terminated goes on over TLS, checked against the name the client asked for.
        ...(url.protocol === 'https:' && !isIP(host) ? { servername: host } : {}),
        // The default roots, plus SVC_EMU_EXTRA_CA's in tests (server/egress/tls/trust.ts): the check stays on.
        ...(url.protocol === 'https:' ? upstreamTls() : {}),
      },
      (up) => {
        exchange?.head(up.statusCode ?? null, up.headers['content-type'], up.headers['content-encoding']);
        call?.head({ status: up.statusCode ?? 502, statusText: up.statusMessage ?? '', headers: headerPairs(up.headers) });
        up.on('data', (c: Buffer) => {
          bytesIn += c.length;
          exchange?.response(c);
          call?.chunk(c);
        });
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        up.on('end', () => log({ status: up.statusCode ?? null }));
      },
    );
    upstream.on('error', (err) => {
      if (!res.headersSent)
        res
          .writeHead(502, { 'content-type': 'text/plain' })
          .end(`${unreachableText(host, port, (err as NodeJS.ErrnoException).code ?? err.message)}\n`);
      else res.destroy();
      log({ status: res.headersSent ? null : 502, error: (err as NodeJS.ErrnoException).code ?? err.message });
    });
    // Counted as it is piped: a listener attached earlier would start the body flowing before the upstream exists.
    req.on('data', (c: Buffer) => {
      bytesOut += c.length;
      exchange?.request(c);
      call?.requestBody(c);
    });
    req.pipe(upstream);
  }

  /**
   * A replaying run's call: the cassette's answer (the recorded status and headers, then each chunk when its
   * recorded time has come, scaled by the replay speed), or a 502 problem `egress_replay_no_match` naming the
   * closest recorded call and how it differs. Timers go with the client.
   */
  private async replay(
    res: ServerResponse,
    session: EgressSession,
    request: CallRequest,
    exchange: ExchangeRecorder | null,
    call: TapeCall | null,
    log: (fields: { status?: number | null; refused?: string | null; error?: string | null }) => void,
    counted: (bytes: number) => void,
    /** When the call began (performance.now()): recorded chunk times count from the request, as they were taken. */
    started: number,
  ): Promise<void> {
    const answer = answerFromCassette(session, request);
    if ('message' in answer) {
      const body = JSON.stringify({
        type: `${PROBLEM_TYPE_BASE}egress_replay_no_match`,
        title: 'No recorded call matches',
        status: 502,
        code: 'egress_replay_no_match',
        detail: answer.message,
        ...(answer.closest ? { closest: answer.closest } : {}),
      });
      exchange?.head(502, 'application/problem+json', undefined);
      exchange?.response(Buffer.from(body));
      counted(Buffer.byteLength(body));
      res.writeHead(502, { 'content-type': 'application/problem+json', 'x-svc-emu-egress': 'no-match' }).end(body);
      log({ status: 502, error: answer.message });
      return;
    }
    if (answer.error) {
      const why = `${answer.error} (as recorded in cassette ${session.cassette?.name ?? ''})`;
      res.writeHead(502, { 'content-type': 'text/plain', 'x-svc-emu-egress': 'replayed' }).end(`${why}\n`);
      log({ status: 502, error: why });
      return;
    }
    const headers = replayedHeaders(answer.head.headers);
    const total = answer.chunks.reduce((n, c) => n + c.data.length, 0);
    if (answer.head.headers.some(([k]) => k.toLowerCase() === 'content-length')) headers['content-length'] = String(total);
    headers['x-svc-emu-egress'] = 'replayed';
    exchange?.head(answer.head.status, String(headers['content-type'] ?? ''), undefined);
    call?.head({ status: answer.head.status, statusText: answer.head.statusText, headers: answer.head.headers.map(([k, v]) => [k, v]) });
    if (answer.head.statusText) res.writeHead(answer.head.status, answer.head.statusText, headers);
    else res.writeHead(answer.head.status, headers);
    // Each chunk is due at its recorded offset from the call's start (as the tape took it), so timer lateness does
    // not add up; but never sooner than 90% of its recorded gap after the chunk before, so after a stall (a loaded
    // machine) the stream catches up gently instead of bursting, and the pace between chunks holds.
    const offsets: number[] = [];
    for (const c of answer.chunks) offsets.push((offsets[offsets.length - 1] ?? 0) + c.delayMs);
    let lastWrite = -Infinity;
    const dueAt = (i: number) => Math.max(started + offsets[i]!, lastWrite + answer.chunks[i]!.delayMs * CATCH_UP);
    const played = await new Promise<boolean>((resolve) => {
      let i = 0;
      let timer: NodeJS.Timeout | null = null;
      let settled = false;
      const settle = (ok: boolean) => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        res.off('close', gone);
        resolve(ok);
      };
      const gone = () => settle(false);
      const step = () => {
        timer = null;
        while (i < answer.chunks.length && dueAt(i) <= performance.now()) {
          const data = answer.chunks[i++]!.data;
          lastWrite = performance.now();
          counted(data.length);
          exchange?.response(data);
          call?.chunk(data);
          res.write(data);
        }
        if (i === answer.chunks.length) {
          res.end();
          return settle(true);
        }
        timer = setTimeout(step, Math.max(0, dueAt(i) - performance.now()));
      };
      res.once('close', gone);
      step();
    });
    log(played ? { status: answer.head.status } : { status: answer.head.status, error: 'the client went away during the replay' });
  }

  /**
   * HTTPS and anything else: `CONNECT host:port`, then bytes both ways (only host and port are known), or,
   * for a recording or replaying run, TLS terminated by the core (server/egress/tls/terminate.ts).
   */
  private async tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    const started = performance.now();
    const identity = this.identity(client);
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? '');
    if (!m) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const host = m[1]!;
    const port = Number(m[2]);
    let bytesOut = head.length;
    let bytesIn = 0;
    const plan = this.egress.plan(host, null);
    let logged = false;
    const log = (fields: { status?: number | null; refused?: string | null; error?: string | null }) => {
      if (logged) return;
      logged = true;
      this.egress.record({
        source: 'snippet',
        ...identity,
        integration: null,
        method: 'CONNECT',
        host,
        port,
        path: null,
        status: fields.status ?? null,
        bytes_out: bytesOut,
        bytes_in: bytesIn,
        duration_ms: Math.round(performance.now() - started),
        fault: plan.describe,
        refused: fields.refused ?? null,
        error: fields.error ?? null,
        startedAt: started,
      });
    };
    client.on('error', () => client.destroy());
    // Recording or replaying: the core terminates the TLS and hands the requests inside to `forward` (faults,
    // the profile and the tape apply to each). Live: a blind tunnel, as production has.
    const session = this.egress.sessionFor(identity.invocation_id);
    if (session && session.mode !== 'live') {
      const why = this.tls ? this.tls.terminator.refusal(host, port) : 'TLS termination is off in this core';
      if (!why) {
        const t = await this.tls!.terminator.terminate(client, head, host, port);
        if ('socket' in t) {
          this.tlsOrigin.set(t.socket, { host, port });
          this.who.set(t.socket, identity);
          this.http.emit('connection', t.socket);
          return;
        }
        this.tls!.note(
          session.invocationId,
          `egress: https://${host}:${port}: the core could not terminate TLS (${t.failed}); the call failed, and later tunnels to it ${session.mode === 'record' ? 'go out unrecorded' : 'are refused'}`,
        );
        log({ error: `TLS termination failed: ${t.failed}` });
        return;
      }
      if (session.mode === 'replay') {
        // Nothing goes out in replay: the tunnel is refused, saying why.
        const detail = `replay: cannot replay https://${host}:${port}: ${why}; nothing goes out in replay`;
        client.end(
          `${statusLine(502, 'Bad Gateway', detail)}\r\nContent-Type: text/plain\r\nConnection: close\r\nX-Svc-Emu-Egress: no-tls\r\n\r\n${detail}\n`,
        );
        this.tls?.note(session.invocationId, `egress: ${detail}`);
        log({ status: 502, error: detail });
        return;
      }
      // Recording: the call goes out as a blind tunnel, not on the cassette, and the run says so (egress-sessions.ts counts it in `calls`).
      session.counts.passthrough++;
      this.tls?.note(session.invocationId, `egress: https://${host}:${port} went out as a blind tunnel, not recorded: ${why}`);
    }
    const gate = await this.gate(host, port, plan, identity);
    if (gate.kind === 'unreachable') gate.detail = unreachableText(host, port, gate.detail);
    switch (gate.kind) {
      case 'drop':
        client.destroy();
        log({ error: 'connection dropped by a fault rule' });
        return;
      case 'hold':
        await this.hold(client);
        log({ error: 'held without an answer by a fault rule' });
        return;
      case 'fault':
        client.end(`HTTP/1.1 ${gate.status} Fault\r\nConnection: close\r\nX-Svc-Emu-Fault: status\r\n\r\n`);
        log({ status: gate.status });
        return;
      case 'refused':
      case 'unreachable': {
        const refused = gate.kind === 'refused';
        client.end(
          `${statusLine(refused ? 403 : 502, refused ? 'Forbidden' : 'Bad Gateway', gate.detail)}\r\nContent-Type: text/plain\r\nConnection: close\r\nX-Svc-Emu-Egress: ${refused ? 'refused' : 'failed'}\r\n\r\n${gate.detail}\n`,
        );
        log({ status: refused ? 403 : 502, refused: refused ? gate.detail : null, error: refused ? null : gate.detail });
        return;
      }
    }
    const target = gate.target;
    const upstream = connect({ host: target.address, port, family: target.family });
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      client.on('data', (c: Buffer) => (bytesOut += c.length));
      upstream.on('data', (c: Buffer) => (bytesIn += c.length));
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.on('error', (err) => {
      const why = unreachableText(host, port, (err as NodeJS.ErrnoException).code ?? err.message);
      if (!client.destroyed && bytesIn === 0) client.end(`${statusLine(502, 'Bad Gateway', why)}\r\nConnection: close\r\n\r\n${why}\n`);
      else client.destroy();
      log({ status: 502, error: (err as NodeJS.ErrnoException).code ?? err.message });
    });
    const finish = () => {
      upstream.destroy();
      client.destroy();
      log({ status: 200 });
    };
    upstream.once('close', finish);
    client.once('close', finish);
  }

  /**
   * What happens to a call before any byte goes out: the fault plan's delay, then its failure if it has
   * one, then the egress profile on the addresses the name resolves to.
   */
  private async gate(host: string, port: number, plan: FaultPlan, identity: EgressIdentity): Promise<Gate> {
    const fault = await this.faultGate(plan);
    if (fault) return fault;
    const target = await this.egress.resolve(host, port, identity);
    if ('refused' in target) return { kind: 'refused', detail: target.refused };
    if ('error' in target) return { kind: 'unreachable', detail: target.error };
    return { kind: 'go', target };
  }

  /** The fault plan's delay, then its failure if it has one (null: none). A replaying run's calls pass this too. */
  private async faultGate(plan: FaultPlan): Promise<Exclude<Gate, { kind: 'go' | 'refused' | 'unreachable' }> | null> {
    if (plan.latencyMs) await sleep(plan.latencyMs);
    if (plan.fail?.type === 'drop') return { kind: 'drop' };
    if (plan.fail?.type === 'timeout') return { kind: 'hold' };
    if (plan.fail?.type === 'status') {
      return {
        kind: 'fault',
        status: plan.fail.status,
        body: plan.fail.body ?? JSON.stringify({ error: 'injected by an emulator fault rule' }),
      };
    }
    return null;
  }

  /** A `timeout` fault: no answer; the connection stays open until the client gives up. */
  private hold(socket: Duplex): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => socket.destroy(), HOLD_MAX_MS);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
