import type { Cassette, CassetteMatch, EgressMode, HarEntry } from '../../../contract/schemas/cassette';

/**
 * The seam between the cassette engine (this folder: HAR files, redaction, matching, playback) and the
 * places calls pass through (server/egress/proxy.ts for a snippet's own HTTP client, services/egress.ts
 * `send` for `integrations.call`). Formats and modes: contract/schemas/cassette.ts and docs/cassettes.md.
 */
export type { Cassette, CassetteMatch, EgressMode, HarEntry };

/** One outbound call's request, as the proxy or the core is about to send it (plain text: before redaction). */
export interface CallRequest {
  source: 'snippet' | 'integration';
  integration: string | null;
  method: string;
  /** Absolute URL (`http://host:port/path?query`; `https://…` for integrations and TLS the core terminates). */
  url: string;
  /** As sent upstream, in order; header names lower-case. */
  headers: [string, string][];
  /** Header names the host itself added (an integration's credential): always redacted, never matched. */
  hostAdded: readonly string[];
  /** The whole request body (empty for none). */
  body: Buffer;
}

/** A response as received from upstream (record) or as recorded (replay). */
export interface CallResponseHead {
  status: number;
  statusText: string;
  headers: [string, string][];
}

/**
 * Removes credentials before anything is written: every header the host added, the usual credential
 * headers (authorization, proxy-authorization, cookie, set-cookie, x-api-key, api-key), and every value
 * of the tenant's secrets wherever it appears (URL, headers, bodies), replaced by `[secret NAME]`.
 */
export interface Redactor {
  text(s: string): { text: string; replaced: string[] };
  headers(h: readonly [string, string][], hostAdded: readonly string[]): { headers: [string, string][]; replaced: string[] };
}

/**
 * Takes down one run's calls as HAR entries (redacted, bodies capped). Every run has one, whatever its
 * mode: its entries become the run's `egress_blob` (the run report embeds it); in `record` they are also
 * merged into the cassette when the run ends.
 */
export interface Tape {
  /** A call begins; the returned handle is fed as bytes flow. Its `seq` is the order calls began in. */
  begin(req: Omit<CallRequest, 'body'>): TapeCall;
  /** Finished calls, in `seq` order (a call still open at the end is written with what it had, `error` set). */
  entries(): HarEntry[];
}

export interface TapeCall {
  requestBody(chunk: Buffer): void;
  head(head: CallResponseHead): void;
  /** A response chunk, as it arrived (its time is taken now). */
  chunk(data: Buffer): void;
  /** The call ended: answered (`error` null) or not (`error` says why). Later calls of the handle are ignored. */
  end(error: string | null): void;
}

/** A recorded answer, ready to play: chunks with the wait before each (already scaled by the replay speed). */
export interface ReplayAnswer {
  entry: HarEntry;
  /** The recorded call failed without an answer: fail this one the same way. */
  error: string | null;
  head: CallResponseHead;
  chunks: { delayMs: number; data: Buffer }[];
}

/** No recorded call matches: fail the call with `message`, which names the closest recorded call and how it differs. */
export interface ReplayMiss {
  message: string;
  closest: { seq: number; invocation_id: string; method: string; url: string; differences: string[] } | null;
}

/** Answers one run's calls from a cassette (stateful: it knows which entries this run has used). */
export interface Player {
  answer(req: CallRequest): ReplayAnswer | ReplayMiss;
}

/** Where a cassette is: a workspace snippet's folder, or the data dir for a snippet made over the API. */
export interface CassetteRef {
  tenant: string;
  snippet: string;
  name: string;
}

export interface CassetteFile {
  path: string;
  cassette: Cassette;
  bytes: number;
  updatedAt: string;
}

/** Reads and writes cassette files (atomic writes; a damaged file is an error naming the file and what is wrong). */
export interface CassetteStore {
  /** The file a cassette lives in (whether or not it exists). */
  pathOf(ref: CassetteRef): string;
  /** Null when there is none; throws CassetteError when the file is not a cassette. */
  read(ref: CassetteRef): Promise<CassetteFile | null>;
  /**
   * A record run ended: its entries replace the entries of any earlier episode with the same request
   * keys, then are appended as a new episode. One writer per file at a time (calls are chained).
   */
  merge(ref: CassetteRef, entries: readonly HarEntry[], match: CassetteMatch): Promise<CassetteFile>;
  /** Writes a whole cassette, replacing one of the same name (PUT, state import): check and redact it first. */
  write(ref: CassetteRef, cassette: Cassette): Promise<CassetteFile>;
  list(tenant: string, snippet: string): Promise<CassetteFile[]>;
  remove(ref: CassetteRef): Promise<boolean>;
}

export class CassetteError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
  }
}

/** How one run treats its outbound calls: decided when it starts, used by the proxy and `integrations.call`. */
export interface EgressSession {
  invocationId: string;
  mode: EgressMode;
  source: 'run' | 'snippet' | 'server';
  cassette: CassetteRef | null;
  tape: Tape;
  /** Replay only (null otherwise, or when the cassette does not exist: every call then misses, saying so). */
  player: Player | null;
  /** Replay speed: recorded waits are divided by it (0: no waits). */
  speed: number;
  counts: { calls: number; recorded: number; replayed: number; unmatched: number; passthrough: number };
  /** Replay: the first few misses' messages, said on the run when it ends (a client's error only says 502). */
  misses?: string[];
}
