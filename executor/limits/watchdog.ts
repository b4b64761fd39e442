import { monoMs } from './common';
import type { UsageSample } from './types';

/**
 * Watches a group's memory and says "OOM" as soon as the evidence is there, so the executor can kill the
 * group itself instead of waiting for the kernel: under a tight CPU quota the kernel's reclaim-then-OOM
 * path can run throttled: docs/host-facts.md records ~39 s to kill a 300 MB allocation under 64 MiB at 10% CPU.
 * (Kernels differ: on kernel 6.18 / cgroup v1 the same case was killed in ~0.4 s, so here the kernel
 * usually wins and the watchdog reports `kernel_oom_kill`; with the kernel's OOM killer held off it
 * trips 50–100 ms after usage reaches the limit.)
 *
 * It trips on either:
 *   - `kernel_oom_kill`: the group's oom-kill counter rose (the kernel already killed something), or
 *   - `at_limit`: for `consecutive` (default 2) samples in a row usage is at the limit (≥ `atLimitRatio`,
 *     default 97%) and, when the backend reports it, anonymous memory is ≥ `anonRatio` (default 95%) of the
 *     limit — without swap anon cannot be reclaimed, so a group whose usage is mostly page cache (reclaimed
 *     at the limit, which is normal) never trips — and the limit-hit counter (v1 failcnt, v2 memory.events
 *     max) rose since the sample before that run began. "Rose since", not "rose at every sample": a task
 *     blocked in the kernel's OOM path stops retrying its charge, so the counter stalls exactly when the
 *     group is stuck (measured on v1 with the OOM killer held off: failcnt froze at 1914, usage at the limit).
 *
 * Every sample also goes to `onSample`, so the same poll feeds the invocation's memory/CPU timeline.
 */

export type OomReason = 'kernel_oom_kill' | 'at_limit';

export interface OomEvidence {
  reason: OomReason;
  /** Bytes in use at the sample that tripped. */
  usage: number;
  limit: number;
  limit_hits: number;
  oom_kills: number;
  /** Anonymous memory at that sample, when known. */
  anon?: number;
  /** Monotonic ms of that sample. */
  at_ms: number;
  /** ms from start() to the trip. */
  after_ms: number;
}

export interface MemoryWatchdogOptions {
  sample: () => Promise<UsageSample>;
  limitBytes: number;
  onOom: (evidence: OomEvidence) => void;
  onSample?: (sample: UsageSample) => void;
  /** A failed sample (the group went away); the watchdog keeps polling until stopped. */
  onError?: (err: unknown) => void;
  intervalMs?: number;
  atLimitRatio?: number;
  anonRatio?: number;
  consecutive?: number;
  /** Counters to compare the first sample against (e.g. sampled right after create()); else the first sample is the baseline. */
  baseline?: UsageSample;
  /**
   * The first poll comes after this many ms instead of at once: a caller that sampled the group just
   * before start() (the executor's `first`, given as the baseline) need not read it again (default 0).
   */
  firstAfterMs?: number;
}

export class MemoryWatchdog {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private startedAt = 0;
  private prev: UsageSample | null = null;
  private streak = 0;
  private hitsBeforeStreak = 0;
  private trippedWith: OomEvidence | null = null;
  private readonly intervalMs: number;
  private readonly atLimitRatio: number;
  private readonly anonRatio: number;
  private readonly consecutive: number;

  constructor(private readonly opts: MemoryWatchdogOptions) {
    this.intervalMs = opts.intervalMs ?? 50;
    this.atLimitRatio = opts.atLimitRatio ?? 0.97;
    this.anonRatio = opts.anonRatio ?? 0.95;
    this.consecutive = opts.consecutive ?? 2;
    this.prev = opts.baseline ?? null;
  }

  get tripped(): OomEvidence | null {
    return this.trippedWith;
  }

  /** Starts polling; the first sample is the baseline unless one was given (counters that were already up do not trip). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.startedAt = monoMs();
    if (this.opts.firstAfterMs) this.schedule(this.opts.firstAfterMs);
    else void this.tick();
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Feeds one sample (exposed for tests); returns the evidence when this sample trips the watchdog. */
  observe(s: UsageSample): OomEvidence | null {
    const prev = this.prev;
    this.prev = s;
    if (this.trippedWith || !prev) return null;
    const limit = this.opts.limitBytes;
    let reason: OomReason | null = null;
    if (s.oom_kills > prev.oom_kills) {
      reason = 'kernel_oom_kill';
    } else {
      const atLimit =
        s.memory_bytes >= this.atLimitRatio * limit && (s.memory_anon_bytes === undefined || s.memory_anon_bytes >= this.anonRatio * limit);
      if (!atLimit) {
        this.streak = 0;
      } else {
        if (this.streak === 0) this.hitsBeforeStreak = prev.limit_hits;
        this.streak += 1;
        if (this.streak >= this.consecutive && s.limit_hits > this.hitsBeforeStreak) reason = 'at_limit';
      }
    }
    if (!reason) return null;
    this.trippedWith = {
      reason,
      usage: s.memory_bytes,
      limit,
      limit_hits: s.limit_hits,
      oom_kills: s.oom_kills,
      ...(s.memory_anon_bytes !== undefined ? { anon: s.memory_anon_bytes } : {}),
      at_ms: s.at_ms,
      after_ms: s.at_ms - this.startedAt,
    };
    return this.trippedWith;
  }

  private async tick(): Promise<void> {
    if (!this.running) return;
    try {
      const s = await this.opts.sample();
      if (!this.running) return;
      this.opts.onSample?.(s);
      const hit = this.observe(s);
      if (hit) {
        this.stop();
        this.opts.onOom(hit);
        return;
      }
    } catch (err) {
      this.opts.onError?.(err);
    }
    if (!this.running) return;
    this.schedule(this.intervalMs);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }
}
