// The edge's table of domain refusals (server/http/problem.ts) and the contract's problem registry
// (contract/problems.ts) must agree: every code a service can refuse with is registered, with every status
// the edge answers it with, and the same title.
import { describe, expect, it } from 'vitest';
import { PROBLEMS, isProblemCode } from '../../contract/problems';
import { DOMAIN_CODES, type DomainErrorKind } from '../../server/domain/errors';
import { DOMAIN_PROBLEMS, domainProblemStatuses } from '../../server/http/problem';

/** Titles that differ from the registry's on purpose, with why. */
const TITLE_EXCEPTIONS: Record<string, string> = {
  // A 400 validation_failed is titled 'Bad request', as the edge titles the path and query parameters' 400s
  // (server/http/app.ts); the registry gives the code its 422 title.
  'invalid_request/validation_failed': 'Bad request',
};

describe('the domain table and the contract registry', () => {
  it('registers every domain code with every status the edge answers it with', () => {
    const statuses = domainProblemStatuses();
    expect(Object.keys(statuses).length).toBeGreaterThan(10);
    for (const [code, answered] of Object.entries(statuses)) {
      expect(isProblemCode(code), `${code} is not in contract/problems.ts`).toBe(true);
      if (!isProblemCode(code)) continue;
      const registered: readonly number[] = PROBLEMS[code].statuses;
      for (const status of answered) expect(registered, `${code} answers ${status}`).toContain(status);
    }
  });

  it('gives each domain code the registry title', () => {
    for (const kind of Object.keys(DOMAIN_CODES) as DomainErrorKind[]) {
      for (const code of DOMAIN_CODES[kind]) {
        const title = (DOMAIN_PROBLEMS[kind].titles as Record<string, string>)[code];
        const expected = TITLE_EXCEPTIONS[`${kind}/${code}`] ?? (isProblemCode(code) ? PROBLEMS[code].title : '(unregistered)');
        expect(title, `${kind}/${code}`).toBe(expected);
      }
    }
  });
});
