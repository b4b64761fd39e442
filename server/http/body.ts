import type { Context } from 'koa';
import { ApiError, badRequest, payloadTooLarge } from '../errors';

export const BODY_LIMIT_BYTES = 6 * 1024 * 1024;

const isJsonType = (type: string | undefined) => !!type && /^application\/([\w.+-]*\+)?json\s*(;|$)/i.test(type);

/**
 * Reads and parses a JSON body. Over the limit → 413 without reading the rest; a body that is not
 * declared as JSON → 415 (which also keeps HTML forms on other sites from posting to us); a body that
 * does not parse → 400 with where it broke. An empty body is `undefined`.
 */
export async function readJsonBody(ctx: Context, limit = BODY_LIMIT_BYTES): Promise<unknown> {
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
  if (size === 0) return undefined;
  if (!isJsonType(ctx.get('content-type'))) {
    throw new ApiError(415, 'unsupported_media_type', 'Unsupported media type', 'send the body as JSON with "Content-Type: application/json"', {
      errors: [{ location: 'header.content-type', message: 'must be application/json' }],
    });
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    throw badRequest('malformed_json', `the request body is not valid JSON: ${msg}`);
  }
}
