// Prints one last line after vitest's own summary, for CI: `Tests: N passed, M failed, K skipped`.
// A test file that failed without a failing test (an import error, a failing hook) and every unhandled
// error count as one failure each, so the line never reads "0 failed" for a broken run.
import type { Reporter, SerializedError, TestModule, Vitest } from 'vitest/node';

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

export default class SummaryLineReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    const line = summaryLine(summarize(testModules, unhandledErrors));
    if (this.vitest) this.vitest.logger.log(line);
    else process.stdout.write(`${line}\n`);
  }
}
