/**
 * test/reporter.ts: the summary after vitest's own names every test that did not run and why, prints the seed
 * of a shuffled order, and ends with the `Tests: N passed, M failed, K skipped` line CI reads. Judged on a
 * real vitest run of test/fixtures/reporter-sample.fixture.ts.
 */
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { createVitest, type TestModule } from 'vitest/node';
import { seedLine, skipReport, summarize, summaryLine } from './reporter';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIXTURE = 'test/fixtures/reporter-sample.fixture.ts';

let modules: ReadonlyArray<TestModule>;
beforeAll(async () => {
  const exitCode = process.exitCode;
  const vitest = await createVitest('test', {
    root: ROOT,
    config: false,
    include: [FIXTURE],
    reporters: [{}], // silent: its failing test would read like a failure of this run
    watch: false,
    pool: 'threads',
    sequence: { shuffle: false },
  });
  try {
    await vitest.start([FIXTURE]);
    modules = vitest.state.getTestModules();
  } finally {
    await vitest.close();
  }
  process.exitCode = exitCode; // the fixture's failing test is meant to fail; it must not fail this run
}, 60_000);

describe('test/reporter.ts', () => {
  it('counts passed, failed and skipped (todo and skipIf included)', () => {
    expect(summaryLine(summarize(modules, []))).toBe('Tests: 1 passed, 1 failed, 3 skipped');
    expect(summaryLine(summarize(modules, [new Error('unhandled')]))).toBe('Tests: 1 passed, 2 failed, 3 skipped');
  });

  it('lists each test that did not run with its reason, and nothing when all ran', () => {
    expect(skipReport(modules)).toEqual([
      'Skipped (3):',
      `  ${FIXTURE} > kinds > skips with a reason — no widget on this host`,
      `  ${FIXTURE} > kinds > skips without one — no reason given (skip, skipIf, or left out by a filter or .only)`,
      `  ${FIXTURE} > kinds > is still to write — todo`,
    ]);
    expect(skipReport(modules, 1)).toEqual([
      'Skipped (3):',
      `  ${FIXTURE} > kinds > skips with a reason — no widget on this host`,
      '  … and 2 more',
    ]);
    expect(skipReport([])).toEqual([]);
  });

  it('prints the seed only for a shuffled order', () => {
    expect(seedLine(true, 1234)).toBe(
      'Test order shuffled with seed 1234: replay it with npx vitest run --sequence.shuffle --sequence.seed=1234 <files>',
    );
    expect(seedLine(false, 1234)).toBeNull();
    expect(seedLine(true, null)).toBeNull();
  });
});
