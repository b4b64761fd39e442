import type { Context } from 'koa';
import { ApiError, badRequest } from '../errors';
import { payloadTooLarge, validationFailed } from '../domain/errors';
import { BODY_LIMIT_BYTES, describeJsonError, jsonDepth, jsonErrorOffset, JSON_MAX_DEPTH } from '../json-text';

export { BODY_LIMIT_BYTES, jsonDepth, JSON_MAX_DEPTH };

export { VALUE_MAX_DEPTH, jsonValueDepth } from '../../contract/schemas/json';

const isJsonType = (type: string | undefined) => !!type && /^application\/([\w.+-]*\+)?json\s*(;|$)/i.test(type);

/** The request body as bytes, whatever its type: over the limit → 413 without reading the rest. */
export async function readRawBody(ctx: Context, limit = BODY_LIMIT_BYTES): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || NaN);
  if (declared > limit) throw payloadTooLarge(`the request body is ${declared} bytes; the limit is ${limit} (6 MiB)`);
  const req = ctx.req;
  if (req.readableEnded) return Buffer.alloc(0);
  // Gone before its body was read (the client left while earlier middleware ran): no event would come.
  if (req.destroyed) throw Object.assign(new Error('the request closed before its body ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
  // Read with the stream's events, not `for await`: its async iterator cost ~25 µs of CPU per request on the warm
  // path (bench/results/profile-warm-path.md), for what is nearly always one chunk.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (err: Error | null, body?: Buffer) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', settle);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(body!);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        settle(payloadTooLarge(`the request body is over the limit of ${limit} bytes (6 MiB)`));
        req.resume(); // drain, so the 413 can be written
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(null, Buffer.concat(chunks));
    // Closed before its end (the client went away mid-body): what `for await` would have thrown.
    const onClose = () =>
      settle(Object.assign(new Error('the request closed before its body ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', settle);
    req.on('close', onClose);
  });
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
    throw new ApiError(
      415,
      'unsupported_media_type',
      'Unsupported media type',
      'send the body as JSON with "Content-Type: application/json"',
      {
        errors: [{ location: 'header.content-type', message: 'must be application/json' }],
      },
    );
  }
  const text = raw.toString('utf8');
  const malformed = (err: unknown) => badRequest('malformed_json', `the request body is not valid JSON: ${describeJsonError(text, err)}`);
  // Depth first (a linear scan), so 6 MiB of `[` is answered before JSON.parse builds millions of levels:
  // 400 when it is not JSON at all, else 422 for the depth.
  if (jsonDepth(text) > JSON_MAX_DEPTH) {
    if (jsonErrorOffset(text) !== null) throw malformed(null);
    throw validationFailed([{ location: 'body', message: `nests arrays/objects deeper than ${JSON_MAX_DEPTH} levels` }]);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw malformed(err);
  }
}
