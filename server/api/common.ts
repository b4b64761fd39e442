import { z } from 'zod';
import { Problem } from './schemas';
import type { ResponseSpec } from '../http/route';

const PROBLEM_TEXT: Record<number, string> = {
  400: 'Malformed request (bad JSON, query or path).',
  401: 'Missing or invalid credentials.',
  404: 'Not found (another tenant’s resource answers exactly the same).',
  409: 'Conflicts with the current state.',
  413: 'Body or code bundle too large.',
  415: 'The body is not JSON.',
  422: 'Validation failed; `errors` lists each problem with its location.',
};

/** Problem responses for the OpenAPI document. */
export function problems(...statuses: number[]): Record<number, ResponseSpec> {
  return Object.fromEntries(
    statuses.map((s) => [s, { description: PROBLEM_TEXT[s] ?? 'Error.', schema: Problem, contentType: 'application/problem+json' }]),
  );
}

export const ok = (description: string, schema?: z.ZodType): ResponseSpec => ({ description, schema });
export const noContent: ResponseSpec = { description: 'Done; no body.' };

export const IdParam = z.object({ id: z.string().meta({ description: 'Snippet id (`snp_…`) or name.' }) });
