/**
 * What a parity probe observes, normalised so two deployments can be compared value for value: ids, times,
 * request ids and durations never reach an observation; statuses, problem codes, chosen headers, body
 * shapes (JSON key paths and types), outcomes and limit timings (as a band) do.
 */

/** One aspect of a probe's observation. A `gate` aspect says whether the rest could be observed at all. */
export interface Aspect {
  aspect: string;
  value: string;
  gate: boolean;
}

export class Observation {
  readonly aspects: Aspect[] = [];
  readonly notes: string[] = [];

  set(aspect: string, value: string): void {
    const at = this.aspects.findIndex((a) => a.aspect === aspect);
    if (at >= 0) this.aspects[at] = { aspect, value, gate: this.aspects[at]!.gate };
    else this.aspects.push({ aspect, value, gate: false });
  }

  /**
   * A step the rest of the probe depends on (creating its snippet): when the two sides differ here, the
   * aspects after it are not compared (they differ because of it). Returns `ok`, for the probe to go on or stop.
   */
  gate(aspect: string, value: string, ok: boolean): boolean {
    this.aspects.push({ aspect, value, gate: true });
    return ok;
  }

  note(text: string): void {
    this.notes.push(text);
  }

  toRecord(): Record<string, string> {
    return Object.fromEntries(this.aspects.map((a) => [a.aspect, a.value]));
  }
}

export interface Difference {
  aspect: string;
  emulator: string | null;
  target: string | null;
}

/**
 * Aspects compared in the reference's order (then any only the target has). At a gate that differs the
 * comparison stops: what follows is its consequence, and naming it again would hide the one real difference.
 */
export function compare(emulator: Observation, target: Observation): Difference[] {
  const t = new Map(target.aspects.map((a) => [a.aspect, a]));
  const seen = new Set<string>();
  const diffs: Difference[] = [];
  for (const a of emulator.aspects) {
    seen.add(a.aspect);
    const other = t.get(a.aspect);
    if (other?.value === a.value) continue;
    diffs.push({ aspect: a.aspect, emulator: a.value, target: other?.value ?? null });
    if (a.gate || other?.gate) return diffs;
  }
  for (const a of target.aspects) {
    if (!seen.has(a.aspect)) diffs.push({ aspect: a.aspect, emulator: null, target: a.value });
  }
  return diffs;
}

/** Fields of an invocation record that only the emulator has (docs/parity.md): left out of record shapes. */
export const EMULATOR_ONLY_FIELDS = new Set(['parity', 'parity_warnings', 'debug']);

/**
 * A JSON value's shape: every key path with its type, sorted (`a:object`, `a.b:string`, `items[]:number`).
 * Array elements merge into one `[]` path; `maxDepth` levels at most (values deeper are `…:object`).
 */
export function shapeOf(value: unknown, opts: { maxDepth?: number; skipTop?: ReadonlySet<string> } = {}): string {
  const paths = new Set<string>();
  const maxDepth = opts.maxDepth ?? 4;
  const walk = (v: unknown, path: string, depth: number) => {
    const type = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
    if (path) paths.add(`${path}:${type}`);
    if (depth >= maxDepth) return;
    if (Array.isArray(v)) for (const item of v) walk(item, `${path}[]`, depth + 1);
    else if (v && typeof v === 'object') {
      for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
        if (depth === 0 && opts.skipTop?.has(k)) continue;
        walk(child, path ? `${path}.${k}` : k, depth + 1);
      }
    }
  };
  if (value === undefined) return '(no JSON body)';
  if (value === null || typeof value !== 'object') return `(${value === null ? 'null' : typeof value})`;
  walk(value, '', 0);
  return [...paths].sort().join(' ') || (Array.isArray(value) ? '[]' : '{}');
}

/** `application/problem+json; charset=utf-8` → `application/problem+json`. */
export const mediaType = (headers: Headers): string => (headers.get('content-type') ?? '(none)').split(';')[0]!.trim().toLowerCase();

/** A header whose value is an id or a time: only whether it is there. */
export const present = (headers: Headers, name: string): string => (headers.get(name) ? 'present' : 'absent');

/** A path with ids in it (`/v1/invocations/inv_…`): the ids replaced by `{id}`. */
export const pathPattern = (value: string | null | undefined): string => {
  if (!value) return '(none)';
  let path = value;
  try {
    path = new URL(value, 'http://x').pathname; // absolute or relative: the path is what is compared
  } catch {
    /* not a URL: compared as it is */
  }
  return path.replace(/\/inv_[A-Za-z0-9]+/g, '/{id}').replace(/\/[0-9a-f]{8}-[0-9a-f-]{27,}/gi, '/{id}');
};

/** A problem+json body's code, or what stands for it. */
export function problemCode(body: unknown): string {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const code = (body as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return '(no code)';
}

/** The `errors[].location`s of a problem, sorted: which field a refusal names. */
export function errorLocations(body: unknown): string {
  const errors = body && typeof body === 'object' ? (body as { errors?: unknown }).errors : undefined;
  if (!Array.isArray(errors)) return '(none)';
  const locs = errors.map((e) => (e && typeof e === 'object' ? String((e as { location?: unknown }).location) : '?'));
  return locs.length ? [...new Set(locs)].sort().join(', ') : '(none)';
}

/**
 * How long an answer took against the limit it should have taken: `≈ timeout_ms` when within the band,
 * else early or late. The band is the limit plus `slack` (a cold start, the network); the number measured goes to a note.
 */
export function timingBand(elapsedMs: number, limitMs: number, slackMs: number): string {
  if (elapsedMs < limitMs) return `early (before timeout_ms ${limitMs})`;
  if (elapsedMs <= limitMs + slackMs) return `≈ timeout_ms (${limitMs} ms, up to +${slackMs} ms)`;
  return `late (more than timeout_ms ${limitMs} + ${slackMs} ms)`;
}
