import { z } from 'zod';

/**
 * Record and replay of outbound calls (emulator only). A run's egress mode is `live` (calls go out),
 * `record` (they go out, and each call with its answer and the timing of every chunk is written to the
 * snippet's cassette) or `replay` (nothing goes out: each call is answered from the cassette, chunk by
 * chunk at the recorded pace). The mode comes from, first to last: the run (`X-Emu-Egress-Mode`, admin
 * only), the snippet (`egress.mode` in its `snippet.json`), the server (`serve --egress-mode`, or the
 * GUI's switch). A cassette is a HAR 1.2 file with documented extensions (docs/cassettes.md), so HAR
 * viewers open it; it lives beside the snippet: `snippets/<name>/cassettes/<cassette>.har` for a
 * workspace snippet, `<data-dir>/cassettes/<tenant>/<snippet>/<cassette>.har` for one made over the API.
 */
export const EGRESS_MODES = ['live', 'record', 'replay'] as const;
export const EgressMode = z.enum(EGRESS_MODES).meta({ id: 'EgressMode' });
export type EgressMode = z.infer<typeof EgressMode>;

/** A cassette's name: its file is `<name>.har`. */
export const CASSETTE_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const CassetteName = z.string().regex(CASSETTE_NAME_RE, 'must be 1–63 of a-z 0-9 . _ -, starting with a letter or digit');
export const DEFAULT_CASSETTE = 'default';

const MATCH_FIELDS = {
  /** Dotted paths into a JSON body left out of the comparison (`metadata.user_id`, `messages.*.id`). */
  ignore_body_fields: z.array(z.string().min(1).max(200)).max(50),
  /** Query parameters left out of the comparison. */
  ignore_query: z.array(z.string().min(1).max(100)).max(50),
  /** Also compare the host and port (off by default: a recording made against a provider on another port still plays). */
  host: z.boolean(),
  /**
   * `true`: the n-th call of a run must match the n-th recorded call of the episode being played.
   * `false` (default): any recorded call that matches, each used once before any is used again.
   */
  order: z.boolean(),
};

/**
 * Matchers as a snippet.json or a cassette gives them: only what it says (no defaults filled in, so
 * layering defaults ⊕ cassette ⊕ snippet lets each say only what it changes).
 */
export const CassetteMatchGiven = z
  .object({
    ignore_body_fields: MATCH_FIELDS.ignore_body_fields.optional(),
    ignore_query: MATCH_FIELDS.ignore_query.optional(),
    host: MATCH_FIELDS.host.optional(),
    order: MATCH_FIELDS.order.optional(),
  })
  .strict()
  .meta({ id: 'CassetteMatchGiven' });

/** How a request finds its recorded answer in `replay`. Method and URL (path and query) always count. */
export const CassetteMatch = z
  .object({
    ignore_body_fields: MATCH_FIELDS.ignore_body_fields.default([]),
    ignore_query: MATCH_FIELDS.ignore_query.default([]),
    host: MATCH_FIELDS.host.default(false),
    order: MATCH_FIELDS.order.default(false),
  })
  .strict()
  .meta({ id: 'CassetteMatch' });
export type CassetteMatch = z.infer<typeof CassetteMatch>;

/** `egress` in a workspace snippet's `snippet.json`; kept on each version it makes. */
export const SnippetEgress = z
  .object({
    mode: EgressMode.optional(),
    cassette: CassetteName.optional(),
    match: CassetteMatchGiven.optional(),
  })
  .strict()
  .meta({ id: 'SnippetEgress' });
export type SnippetEgress = z.infer<typeof SnippetEgress>;

/** The server's default mode (`GET|PUT /_emu/egress/mode`): what a run gets when neither it nor its snippet says. */
export const EgressModeSetting = z
  .object({
    mode: EgressMode,
    /** Replayed chunks come this many times faster than recorded (1 = as recorded; 0 = no waits at all). */
    replay_speed: z.number().min(0).max(1000),
  })
  .meta({ id: 'EgressModeSetting' });

// ---- the cassette file: HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) + `_svcEmu` extensions ----

const NameValue = z.object({ name: z.string(), value: z.string() }).loose();

/** One recorded chunk of a response body: when it arrived and how many bytes of `content.text` (decoded) it is. */
export const HarChunk = z.object({ t_ms: z.number().min(0), bytes: z.number().int().min(0) });

/** What the emulator adds to a HAR entry (HAR allows custom fields starting with `_`). */
export const HarEntryExtension = z.object({
  /** Order of the call within its run (0, 1, 2…). */
  seq: z.number().int().min(0),
  /** The run that recorded it (an episode is all entries of one invocation). */
  invocation_id: z.string(),
  /** `snippet`: the snippet's own HTTP client through the egress proxy; `integration`: `integrations.call`, made by the core. */
  source: z.enum(['snippet', 'integration']),
  integration: z.string().nullable(),
  /** The response body as it arrived, chunk by chunk (sizes add up to the decoded `content.text`). */
  chunks: z.array(HarChunk),
  /** What was replaced before writing: header names, and `[secret NAME]` markers put in place of secret values. */
  redacted: z.array(z.string()),
  /** The call failed without an answer (connection refused, dropped…): replay fails it the same way. */
  error: z.string().nullable(),
});

export const HarEntry = z
  .object({
    startedDateTime: z.string(),
    time: z.number(),
    request: z
      .object({
        method: z.string(),
        url: z.string(),
        httpVersion: z.string(),
        headers: z.array(NameValue),
        queryString: z.array(NameValue),
        cookies: z.array(z.unknown()),
        headersSize: z.number(),
        bodySize: z.number(),
        postData: z.object({ mimeType: z.string(), text: z.string(), encoding: z.string().optional() }).loose().optional(),
      })
      .loose(),
    response: z
      .object({
        status: z.number().int(),
        statusText: z.string(),
        httpVersion: z.string(),
        headers: z.array(NameValue),
        cookies: z.array(z.unknown()),
        content: z.object({ size: z.number(), mimeType: z.string(), text: z.string().optional(), encoding: z.string().optional() }).loose(),
        redirectURL: z.string(),
        headersSize: z.number(),
        bodySize: z.number(),
      })
      .loose(),
    cache: z.object({}).loose(),
    timings: z.object({ send: z.number(), wait: z.number(), receive: z.number() }).loose(),
    _svcEmu: HarEntryExtension,
  })
  .loose()
  .meta({ id: 'HarEntry' });
export type HarEntry = z.infer<typeof HarEntry>;

/** Bumped when the extension changes incompatibly; older cassettes are migrated on read (docs/cassettes.md). */
export const CASSETTE_FORMAT = 1;

export const Cassette = z
  .object({
    log: z
      .object({
        version: z.literal('1.2'),
        creator: z.object({ name: z.string(), version: z.string() }).loose(),
        entries: z.array(HarEntry),
        _svcEmu: z.object({
          format: z.number().int().min(1),
          tenant: z.string(),
          snippet: z.string(),
          /** The matchers this cassette was recorded with (the snippet's `egress.match` wins when both say). */
          match: CassetteMatchGiven.optional(),
        }),
      })
      .loose(),
  })
  .meta({ id: 'Cassette' });
export type Cassette = z.infer<typeof Cassette>;

/** One cassette in a list (`GET /_emu/snippets/{id}/cassettes`). */
export const CassetteSummary = z
  .object({
    name: z.string(),
    /** Where the file is (absolute path on the core's machine). */
    path: z.string(),
    entries: z.number().int(),
    /** Invocations whose calls it holds (its episodes), oldest first. */
    episodes: z.array(z.string()),
    bytes: z.number().int(),
    updated_at: z.string(),
  })
  .meta({ id: 'CassetteSummary' });

/** How a run's outbound calls were handled (on `GET /_emu/invocations/{id}`). */
export const InvocationEgress = z
  .object({
    mode: EgressMode,
    /** Which setting decided the mode. */
    source: z.enum(['run', 'snippet', 'server']),
    cassette: z.string().nullable(),
    calls: z.number().int().meta({ description: 'Outbound calls the run made (proxy and integrations).' }),
    recorded: z.number().int().meta({ description: 'Calls written to the cassette (record).' }),
    replayed: z.number().int().meta({ description: 'Calls answered from the cassette (replay).' }),
    unmatched: z.number().int().meta({ description: 'Calls that found no recorded answer (replay): each failed, naming the closest.' }),
    /** Calls that could not be recorded or replayed (an HTTPS tunnel the core cannot read), said here and in the logs. */
    passthrough: z.number().int(),
  })
  .meta({ id: 'InvocationEgress' });
export type InvocationEgress = z.infer<typeof InvocationEgress>;
