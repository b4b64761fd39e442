import type { z } from 'zod';
import type { Operation, ResponseSpec } from './operation';
import type { ProblemCode } from './problems';
import { problem } from './responses';

/**
 * What the HTTP edge answers for any operation of a given shape, before or around its handler
 * (server/http/app.ts validates the request, server/http/body.ts reads the body, server/http/guards.ts
 * checks Host and Origin, server/http/problem.ts turns anything unexpected into a 500). Every operation
 * carries these in its `responses` (defineOperation adds them), so the document, the client's checks and
 * the server agree on every status an operation can answer.
 */
interface EdgeAnswer {
  status: number;
  codes: ProblemCode[];
  description: string;
}

export function edgeAnswers(op: Pick<Operation, 'auth' | 'params' | 'query' | 'headers' | 'body'>): EdgeAnswer[] {
  const out: EdgeAnswer[] = [];
  if (op.auth !== 'none') {
    out.push({ status: 401, codes: ['unauthenticated'], description: 'Missing or invalid credentials.' });
  }
  if (op.query || op.headers || op.body) {
    const what = [op.query && 'query', op.headers && 'header', op.body && 'JSON body'].filter(Boolean).join(', ');
    out.push({
      status: 400,
      codes: op.body ? ['validation_failed', 'malformed_json'] : ['validation_failed'],
      description: `Malformed request: a bad ${what}.`,
    });
  }
  if ((op.params && pathCanFail(op.params)) || op.body) {
    out.push({
      status: 422,
      codes: ['validation_failed'],
      description: 'Validation failed; `errors` lists each problem with its location.',
    });
  }
  if (op.body) {
    out.push({ status: 413, codes: ['payload_too_large'], description: 'The body is over 6 MiB.' });
    out.push({ status: 415, codes: ['unsupported_media_type'], description: 'The body is not JSON.' });
  }
  out.push({
    status: 403,
    codes: ['forbidden_origin'],
    description: 'A request from another origin (`Origin`, `Sec-Fetch-Site: cross-site`).',
  });
  out.push({ status: 421, codes: ['misdirected_request'], description: 'A `Host` this core does not serve (DNS rebinding).' });
  out.push({ status: 500, codes: ['internal'], description: 'An internal error; the emulator’s log has it under the request id.' });
  return out;
}

/** Path segments that tell a path schema that only says "a string" from one with rules (a name, a number, a length). */
const PATH_PROBES = ['!', 'abc', '0', 'x'.repeat(300)];

/** Whether the path parameters can be refused (422): `{id}` as any string cannot, `{version}` as a number can. */
function pathCanFail(params: z.ZodType): boolean {
  const keys = Object.keys((params as Partial<z.ZodObject>).shape ?? {});
  if (!keys.length) return true;
  return PATH_PROBES.some((probe) => !params.safeParse(Object.fromEntries(keys.map((k) => [k, probe]))).success);
}

/** The operation's own responses with the edge's answers merged in (codes joined, the operation's words first). */
export function withEdgeResponses(op: Operation): Record<number, ResponseSpec> {
  const responses: Record<number, ResponseSpec> = { ...op.responses };
  for (const edge of edgeAnswers(op)) {
    const own = responses[edge.status];
    if (!own) {
      responses[edge.status] = problem(edge.status, edge.codes, edge.description);
    } else if (own.codes) {
      const missing = edge.codes.filter((c) => !own.codes!.includes(c));
      if (missing.length) responses[edge.status] = { ...own, codes: [...own.codes, ...missing] };
    }
  }
  return responses;
}
