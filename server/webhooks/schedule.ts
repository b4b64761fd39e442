/**
 * When to try a webhook delivery again. Attempt n (1-based) is sent PRODUCTION_SCHEDULE_MS[n-1] after the
 * previous attempt failed (the first one at once); once the last attempt has failed, delivery gives up.
 */

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export const PRODUCTION_SCHEDULE_MS: readonly number[] = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

/** The longest Retry-After we honour; a receiver asking for more is retried after this. */
export const MAX_RETRY_AFTER_MS = 24 * HOUR;

export interface RetryPolicy {
  /** 1 = production; 0.001 compresses 5 min to 300 ms, for QA and tests. */
  scale: number;
  /** Fraction: a delay becomes delay × uniform[1 - jitter, 1 + jitter]. */
  jitter: number;
  /** Uniform in [0, 1), like Math.random. */
  random: () => number;
}

/** A policy with the production defaults (scale 1, jitter 0.2, Math.random), overridden where given. */
export function retryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  return { scale: 1, jitter: 0.2, random: Math.random, ...overrides };
}

/**
 * The wait before the next attempt, given how many attempts were made so far; null means give up.
 * The delay is the larger of the scheduled one and the receiver's Retry-After, jittered (but never below
 * Retry-After), then scaled. A zero delay stays zero.
 */
export function nextDelayMs(attemptsSoFar: number, policy: RetryPolicy, retryAfterMs: number | null): number | null {
  if (!Number.isInteger(attemptsSoFar) || attemptsSoFar < 0) throw new RangeError('attemptsSoFar must be a whole number ≥ 0');
  const scheduled = PRODUCTION_SCHEDULE_MS[attemptsSoFar];
  if (scheduled === undefined) return null;
  const floor = retryAfterMs === null ? 0 : Math.min(Math.max(retryAfterMs, 0), MAX_RETRY_AFTER_MS);
  const base = Math.max(scheduled, floor);
  if (base === 0) return 0;
  const factor = 1 - policy.jitter + 2 * policy.jitter * policy.random();
  const jittered = Math.max(base * factor, floor);
  return Math.round(jittered * policy.scale);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

/** The three HTTP-date forms of RFC 9110 §5.6.7; all are in GMT. */
const HTTP_DATE_FORMS: readonly RegExp[] = [
  // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
  /^[a-z]{3}, (?<day>\d{2}) (?<month>[a-z]{3}) (?<year>\d{4}) (?<h>\d{2}):(?<m>\d{2}):(?<s>\d{2}) GMT$/i,
  // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
  /^[a-z]{6,9}, (?<day>\d{2})-(?<month>[a-z]{3})-(?<yy>\d{2}) (?<h>\d{2}):(?<m>\d{2}):(?<s>\d{2}) GMT$/i,
  // asctime: Sun Nov  6 08:49:37 1994
  /^[a-z]{3} (?<month>[a-z]{3}) (?<day>[ \d]\d) (?<h>\d{2}):(?<m>\d{2}):(?<s>\d{2}) (?<year>\d{4})$/i,
];

/** An HTTP-date as epoch milliseconds; null if it is not one. */
function parseHttpDate(text: string): number | null {
  const groups = HTTP_DATE_FORMS.map((re) => re.exec(text)?.groups).find((g) => g !== undefined);
  if (groups === undefined) return null;
  const num = (name: string) => Number((groups[name] ?? '').trim());
  // A two-digit RFC 850 year is read as the nearest plausible one; close enough for a retry hint.
  const year = groups.yy === undefined ? num('year') : num('yy') + (num('yy') < 70 ? 2000 : 1900);
  const month = MONTHS.indexOf((groups.month ?? '').toLowerCase());
  const [day, h, m, s] = [num('day'), num('h'), num('m'), num('s')];
  if (month < 0 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) return null;
  return Date.UTC(year, month, day, h, m, Math.min(s, 59));
}

/**
 * A Retry-After header (delta-seconds or HTTP-date) as milliseconds from `now`; null when absent or
 * unreadable. A time in the past gives 0; anything beyond 24 h is capped at 24 h.
 */
export function parseRetryAfter(value: string | undefined, now: Date): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  let ms: number;
  if (/^-?\d+$/.test(text)) ms = Number(text) * SECOND;
  else {
    const at = parseHttpDate(text);
    if (at === null) return null;
    ms = at - now.getTime();
  }
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS);
}
