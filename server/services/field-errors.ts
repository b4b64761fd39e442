import type { z } from 'zod';
import type { FieldError } from '../domain/errors';

/**
 * zod issues → `{location, message}` a person can act on. Record-key issues carry the useful message
 * one level down (zod's own is "Invalid key in record"), so it is lifted up with the key in the path.
 */
export function fieldErrors(error: z.ZodError, where: string): FieldError[] {
  return error.issues.map((issue) => {
    const location = [where, ...issue.path.map(String)].join('.');
    if (issue.code === 'invalid_key' && issue.issues.length) {
      return { location, message: `key ${JSON.stringify(String(issue.path.at(-1)))} ${issue.issues.map((i) => i.message).join('; ')}` };
    }
    return { location, message: issue.message };
  });
}
