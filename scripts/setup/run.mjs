// Running the steps: which apply, which are done (the quick path takes no lock and prints nothing), the lock,
// and the one line each step that did work prints.
//
// Each step is { name, title, applies(ctx), isDone(ctx), run(ctx) }: a step that applies and is not done
// runs. Keep isDone() cheap (stat a stamp, hash a small file), since it runs on every start.
import { acquireLock } from './lock.mjs';
import { ROOT } from './paths.mjs';
import { relockRuntimes } from './relock.mjs';

/** @typedef {{ root: string, quiet: boolean, forTest: boolean, forVm?: boolean, build: boolean, log: (line: string) => void, notice: (line: string) => void, aptUpdated?: boolean }} Ctx */
/** @typedef {{ name: string, title: string, applies?: (ctx: Ctx) => boolean, isDone: (ctx: Ctx) => boolean, run: (ctx: Ctx) => Promise<string | void> }} Step */

/**
 * Runs every step of `steps` that applies and is not done, in order, under the set-up lock, and reports each
 * one that did work in one line (live on a terminal). Resolves to the names of the steps that ran.
 * `acquire` takes the lock (lock.mjs's; a test passes its own).
 * @param {{ quiet?: boolean, forTest?: boolean, forVm?: boolean, build?: boolean, relockRuntimes?: boolean }} [options]
 */
export async function runSteps(steps, options = {}, { acquire = acquireLock } = {}) {
  const quiet = options.quiet ?? false;
  const noticed = new Set();
  /** @type {Ctx} */
  const ctx = {
    root: ROOT,
    quiet,
    forTest: options.forTest ?? false,
    forVm: options.forVm ?? false,
    build: options.build ?? true,
    aptUpdated: false,
    log: (line) => {
      if (!quiet) process.stdout.write(`${line}\n`);
    },
    notice: (line) => {
      if (quiet || noticed.has(line)) return;
      noticed.add(line);
      process.stderr.write(`${line}\n`);
    },
  };
  const applicable = steps.filter((s) => !s.applies || s.applies(ctx));
  // Fast path: nothing to do, no lock, no output (beyond a step's notice).
  if (!options.relockRuntimes && applicable.every((s) => s.isDone(ctx))) return [];

  const release = await acquire(ctx);
  const ran = [];
  try {
    if (options.relockRuntimes) await relockRuntimes(ctx);
    for (const step of applicable) {
      // Checked again under the lock: another set-up may have done it meanwhile.
      if (step.isDone(ctx)) continue;
      const started = Date.now();
      const live = !quiet && process.stdout.isTTY;
      if (live) process.stdout.write(`setup: ${step.title}…`);
      let summary;
      try {
        summary = await step.run(ctx);
      } catch (error) {
        if (live) process.stdout.write('\n');
        throw error;
      }
      const took = `${((Date.now() - started) / 1000).toFixed(1)}s`;
      if (live) process.stdout.write(summary ? ` done (${took})\n` : ` done\n`);
      else if (summary) ctx.log(`setup: ${summary} (${took})`);
      ran.push(step.name);
    }
  } finally {
    release();
  }
  return ran;
}

/** The steps that would run, without running them. */
export function pendingSteps(steps, options = {}) {
  const ctx = { root: ROOT, quiet: true, forTest: options.forTest ?? false, build: options.build ?? true, log() {}, notice() {} };
  return steps.filter((s) => (!s.applies || s.applies(ctx)) && !s.isDone(ctx)).map((s) => s.name);
}
