import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { sweepLeftovers, type LeftoverPolicy } from '../executor';
import type { Logger } from './logger';

/**
 * What a core killed with SIGKILL (or a power loss) leaves behind, removed at start and then on a timer
 * while the core runs, so a long-running core never piles it up:
 *   - in the data dir: the temp files of atomic writes (`.<name>.<pid>.<rand>.tmp`, storage/atomic-file.ts:
 *     db.json, emulator.json, the inbox and quarantine files) and the Lima template dirs
 *     (`svc-emu-lima-<pid>-…`); blobs' temp files go with the blob garbage collection (storage/blobs.ts);
 *   - where sandboxes live (the executor's `housekeep`): limit groups of dead cores, temp bundle dirs,
 *     spare dirs.
 * An entry is removed only when nothing uses it: the process named in it is gone (and is not us), or it
 * was not modified for `maxAgeMs` (a pid may have been reused).
 */

export interface SweepReport {
  /** Limit groups (cgroups) removed. */
  groups: number;
  /** Temp files and dirs removed. */
  files: number;
}

/** An atomic write's temp file: `.<target name>.<pid>.<8 hex>.tmp`. */
const ATOMIC_TMP = /^\..+\.(?<pid>\d+)\.[0-9a-f]{8}\.tmp$/;
/** `limactl create`'s template dir (executor/lima/manager.ts): removed only when its core is gone. */
const LIMA_TMP = /^svc-emu-lima-(?<pid>\d+)-/;

/** The data dir's leftovers (see the top of this file). Returns how many entries went. */
export async function sweepDataDir(root: string, rules: LeftoverPolicy): Promise<number> {
  return (
    (await sweepLeftovers(root, ATOMIC_TMP, rules, true)) +
    (await sweepLeftovers(join(root, 'inbox'), ATOMIC_TMP, rules, true)) +
    (await sweepLeftovers(join(root, 'quarantine'), ATOMIC_TMP, rules, true)) +
    (await sweepLeftovers(root, LIMA_TMP, rules, false))
  );
}

export interface HousekeeperOptions {
  /** The sweeps: each returns what it removed. */
  sweeps: Array<() => Promise<Partial<SweepReport>>>;
  intervalMs: number;
  logger: Logger;
  /** Runs `fn` every `ms` until cancelled (default: an unref'd setInterval); tests pass their own. */
  every?: (fn: () => void, ms: number) => { cancel(): void };
}

const everyInterval = (fn: () => void, ms: number) => {
  const timer = setInterval(fn, ms);
  timer.unref();
  return { cancel: () => clearInterval(timer) };
};

/**
 * Runs the sweeps now (`run`) and every `intervalMs` after `start` (an unref'd timer, cleared by `stop`).
 * Emits `swept` with the report after each round, so a test waits on the event, not on a clock.
 */
export class Housekeeper extends EventEmitter<{ swept: [SweepReport] }> {
  private timer: { cancel(): void } | null = null;
  private running: Promise<SweepReport> | null = null;
  private stopped = false;

  constructor(private readonly opts: HousekeeperOptions) {
    super();
  }

  /** One round (a round already running is joined). A failing sweep is logged and counts nothing. */
  run(): Promise<SweepReport> {
    this.running ??= (async () => {
      const report: SweepReport = { groups: 0, files: 0 };
      for (const sweep of this.opts.sweeps) {
        try {
          const r = await sweep();
          report.groups += r.groups ?? 0;
          report.files += r.files ?? 0;
        } catch (err) {
          this.opts.logger.log('warn', 'housekeeping sweep failed', { error: String(err) });
        }
      }
      if (report.groups || report.files) this.opts.logger.log('info', 'housekeeping removed leftovers of dead processes', { ...report });
      this.emit('swept', report);
      return report;
    })().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = (this.opts.every ?? everyInterval)(() => void this.run(), this.opts.intervalMs);
  }

  /** Clears the timer and waits for a round in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = null;
    await this.running?.catch(() => {});
  }
}
