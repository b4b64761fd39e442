// Prints, after vitest's own summary: every test that did not run and why (`ctx.skip(reason)`'s note, or
// the todo), the seed when the order was shuffled (so a failure can be replayed), and one last line for
// CI: `Tests: N passed, M failed, K skipped`.
// A test file that failed without a failing test (an import error, a failing hook) and every unhandled
// error count as one failure each, so the line never reads "0 failed" for a broken run.
import type { Reporter, SerializedError, TestCase, TestModule, Vitest } from 'vitest/node';

export function summarize(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const testModule of testModules) {
    let failedHere = 0;
    for (const test of testModule.children.allTests()) {
      const state = test.result().state;
      if (state === 'passed') passed++;
      else if (state === 'failed') failedHere++;
      else skipped++; // skipped, todo, or never run
    }
    if (failedHere === 0 && testModule.state() === 'failed') failedHere = 1;
    failed += failedHere;
  }
  failed += unhandledErrors.length;
  return { passed, failed, skipped };
}

export function summaryLine({ passed, failed, skipped }: { passed: number; failed: number; skipped: number }): string {
  return `Tests: ${passed} passed, ${failed} failed, ${skipped} skipped`;
}

/** Why a test that did not pass or fail did not run, as the reader of the summary needs it. */
function whyNotRun(test: TestCase): string {
  const result = test.result();
  if (result.state === 'pending') return 'never ran (the run stopped first)';
  if (test.options.mode === 'todo') return 'todo';
  if (result.state === 'skipped' && result.note) return result.note;
  return 'no reason given (skip, skipIf, or left out by a filter or .only)';
}

/**
 * `Skipped (K):` then one `file > suite > test — reason` line each, in file order; empty when every
 * collected test ran. At most `max` lines, then how many more there were.
 */
export function skipReport(testModules: ReadonlyArray<TestModule>, max = 200): string[] {
  const lines: string[] = [];
  for (const testModule of testModules) {
    for (const test of testModule.children.allTests()) {
      const state = test.result().state;
      if (state === 'passed' || state === 'failed') continue;
      lines.push(`  ${testModule.relativeModuleId} > ${test.fullName} — ${whyNotRun(test)}`);
    }
  }
  if (lines.length === 0) return [];
  const shown = lines.slice(0, max);
  if (lines.length > max) shown.push(`  … and ${lines.length - max} more`);
  return [`Skipped (${lines.length}):`, ...shown];
}

/** The line that replays a shuffled run's order, or null when the order was not shuffled. */
export function seedLine(shuffled: boolean, seed: number | null): string | null {
  if (!shuffled || seed === null) return null;
  return `Test order shuffled with seed ${seed}: replay it with npx vitest run --sequence.shuffle --sequence.seed=${seed} <files>`;
}

export default class SummaryLineReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    // Resolved, `shuffle` says whether tests are shuffled; a shuffled file order shows as the RandomSequencer.
    const sequence = this.vitest?.config.sequence;
    const shuffled = !!sequence && (!!sequence.shuffle || sequence.sequencer?.name === 'RandomSequencer');
    const seed = seedLine(shuffled, this.vitest?.getSeed() ?? null);
    const lines = [...skipReport(testModules), ...(seed ? [seed] : []), summaryLine(summarize(testModules, unhandledErrors))];
    for (const line of lines) {
      if (this.vitest) this.vitest.logger.log(line);
      else process.stdout.write(`${line}\n`);
    }
  }
}
