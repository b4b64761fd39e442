import type { Context } from 'koa';
import { ApiError, badRequest, payloadTooLarge, validationFailed } from '../errors';
import { describeJsonError } from '../storage/atomic-file';

export const BODY_LIMIT_BYTES = 6 * 1024 * 1024;
/** Deeper JSON is refused: re-serialising it (every db.json write) would overflow the stack. */
export const JSON_MAX_DEPTH = 128;

/** Deepest nesting of arrays/objects in JSON text (strings skipped); a linear scan, no recursion. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

const isJsonType = (type: string | undefined) => !!type && /^application\/([\w.+-]*\+)?json\s*(;|$)/i.test(type);

/** The request body as bytes, whatever its type: over the limit → 413 without reading the rest. */
export async function readRawBody(ctx: Context, limit = BODY_LIMIT_BYTES): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || NaN);
  if (declared > limit) throw payloadTooLarge(`the request body is ${declared} bytes; the limit is ${limit} (6 MiB)`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      ctx.req.resume(); // drain, so the 413 can be written
      throw payloadTooLarge(`the request body is over the limit of ${limit} bytes (6 MiB)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Reads and parses a JSON body. Over the limit → 413 without reading the rest; a body that is not
 * declared as JSON → 415 (which also keeps HTML forms on other sites from posting to us); a body that
 * does not parse → 400 with where it broke. An empty body is `undefined`.
 */
export async function readJsonBody(ctx: Context, limit = BODY_LIMIT_BYTES): Promise<unknown> {
  const raw = await readRawBody(ctx, limit);
  const size = raw.length;
  if (size === 0) return undefined;
  if (!isJsonType(ctx.get('content-type'))) {
    throw new ApiError(415, 'unsupported_media_type', 'Unsupported media type', 'send the body as JSON with "Content-Type: application/json"', {
      errors: [{ location: 'header.content-type', message: 'must be application/json' }],
    });
  }
  const text = raw.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw badRequest('malformed_json', `the request body is not valid JSON: ${describeJsonError(text, err)}`);
  }
  if (jsonDepth(text) > JSON_MAX_DEPTH) {
    throw validationFailed([{ location: 'body', message: `nests arrays/objects deeper than ${JSON_MAX_DEPTH} levels` }]);
  }
  return value;
}
