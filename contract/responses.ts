import { z } from 'zod';
import type { ResponseSpec } from './operation';
import { PROBLEMS, type ProblemCode } from './problems';
import { Problem } from './schemas/common';

/** Building blocks of an operation's `responses`: JSON answers, problems with their codes, and SSE streams. */

/** What each problem status means when an operation says no more. */
const PROBLEM_TEXT: Record<number, string> = {
  400: 'Malformed request (bad JSON, query, path or header).',
  401: 'Missing or invalid credentials.',
  403: 'Forbidden.',
  404: 'Not found (another tenant’s resource answers exactly the same).',
  409: 'Conflicts with the current state.',
  413: 'Body or code bundle too large.',
  415: 'The body is not JSON.',
  422: 'Validation failed; `errors` lists each problem with its location.',
  429: 'Too many requests.',
  500: 'Internal error.',
  502: 'An outside tool failed.',
  503: 'Unavailable.',
  504: 'Timed out.',
};

/** The codes a status carries when an operation names none of its own. */
const DEFAULT_CODES: Record<number, readonly ProblemCode[]> = {
  400: ['validation_failed'],
  401: ['unauthenticated'],
  403: ['forbidden'],
  404: ['not_found'],
  409: ['conflict'],
  413: ['payload_too_large'],
  415: ['unsupported_media_type'],
  422: ['validation_failed'],
  429: ['rate_limited'],
  500: ['internal'],
};

/** One problem response: its status, the codes it can carry (each registered for that status), and what it means. */
export function problem<const C extends readonly ProblemCode[]>(
  status: number,
  codes: C,
  description?: string,
  headers?: z.ZodObject,
): ResponseSpec & { schema: typeof Problem; codes: C } {
  for (const code of codes) {
    if (!(PROBLEMS[code].statuses as readonly number[]).includes(status))
      throw new Error(`problem code ${code} is not registered for ${status}`);
  }
  return {
    description: description ?? PROBLEM_TEXT[status] ?? 'Error.',
    schema: Problem,
    contentType: 'application/problem+json',
    codes,
    ...(headers ? { headers } : {}),
  };
}

/** Problem responses with each status's usual codes. */
export function problems(...statuses: number[]): Record<number, ResponseSpec> {
  return Object.fromEntries(statuses.map((s) => [s, problem(s, DEFAULT_CODES[s] ?? [])]));
}

/** A JSON answer; its schema and headers keep their exact types (the client types the body by them). */
export function ok(description: string): ResponseSpec;
export function ok<S extends z.ZodType>(description: string, schema: S): ResponseSpec & { schema: S };
export function ok<S extends z.ZodType, H extends z.ZodObject>(
  description: string,
  schema: S,
  headers: H,
): ResponseSpec & { schema: S; headers: H };
export function ok(description: string, schema?: z.ZodType, headers?: z.ZodObject): ResponseSpec {
  return { description, ...(schema ? { schema } : {}), ...(headers ? { headers } : {}) };
}

export const noContent: ResponseSpec = { description: 'Done; no body.' };

/** A `text/event-stream` answer: each event name with the schema of its JSON `data`. */
export function sse<const E extends Readonly<Record<string, z.ZodType>>>(
  description: string,
  events: E,
  headers?: z.ZodObject,
): ResponseSpec & { contentType: 'text/event-stream'; events: E } {
  return {
    description,
    contentType: 'text/event-stream',
    schema: z
      .string()
      .meta({ description: 'Server-sent events: `event:`, `id:` and a JSON `data:` line per event; `: ping` comments on silence.' }),
    events,
    ...(headers ? { headers } : {}),
  };
}
