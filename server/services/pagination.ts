import { InvalidRequestError } from '../domain/errors';

export interface PageRequest {
  limit?: number;
  cursor?: string;
}
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

const encode = (key: string) => Buffer.from(JSON.stringify({ k: key }), 'utf8').toString('base64url');
function decode(cursor: string, valid: (key: string) => boolean): string {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { k?: unknown };
    if (typeof parsed.k === 'string' && valid(parsed.k)) return parsed.k;
  } catch {
    /* fall through */
  }
  throw new InvalidRequestError(
    [{ location: 'query.cursor', message: 'is not a cursor this API returned' }],
    'cursor is not one this API returned',
  );
}

/**
 * Keyset pagination over a list already sorted by `compare` on `keyOf`. The cursor names the last key
 * returned, so inserts and deletes between pages never repeat or skip an item.
 */
export function paginate<T, R>(
  sorted: readonly T[],
  keyOf: (item: T) => string,
  req: PageRequest,
  map: (item: T) => R,
  compare: (a: string, b: string) => number = (a, b) => (a < b ? -1 : a > b ? 1 : 0),
  validKey: (key: string) => boolean = () => true,
): Page<R> {
  const limit = req.limit ?? 100;
  const after = req.cursor === undefined ? null : decode(req.cursor, validKey);
  const start = after === null ? 0 : sorted.findIndex((item) => compare(keyOf(item), after) > 0);
  const slice = start < 0 ? [] : sorted.slice(start, start + limit);
  const more = start >= 0 && start + limit < sorted.length;
  const last = slice[slice.length - 1];
  return { data: slice.map(map), next_cursor: more && last !== undefined ? encode(keyOf(last)) : null };
}
