import type { DebugPort } from './types';

type Holder = Pick<DebugPort, 'held' | 'onHeldChange'>;

/**
 * A deadline that stands still while a debugger holds the run (DebugPort.held) and goes on with the time left
 * when it leaves: `ms` of un-held time, then `onExpire` (once). stop() ends it (and its subscription).
 */
export class HeldClock {
  private left: number;
  private since = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly off: () => void;
  private done = false;

  constructor(
    private readonly port: Holder,
    ms: number,
    private readonly onExpire: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.left = ms;
    this.off = port.onHeldChange((held) => (held ? this.pause() : this.resume()));
    if (!port.held) this.resume();
  }

  /** ms of un-held time left. */
  remaining(): number {
    return Math.max(0, this.timer ? this.left - (this.now() - this.since) : this.left);
  }

  private pause(): void {
    if (this.done || !this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.left = Math.max(0, this.left - (this.now() - this.since));
  }

  private resume(): void {
    if (this.done || this.timer) return;
    this.since = this.now();
    this.timer = setTimeout(() => {
      this.stop();
      this.onExpire();
    }, this.left);
  }

  stop(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.off();
  }
}

/** How long a debugger has held a run: the sum of its held spans, the current one included. stop() unsubscribes. */
export class HoldMeter {
  private total = 0;
  private since: number | null = null;
  private readonly off: () => void;

  constructor(
    port: Holder,
    private readonly now: () => number = () => performance.now(),
    onChange?: (held: boolean) => void,
  ) {
    if (port.held) this.since = this.now();
    this.off = port.onHeldChange((held) => {
      if (held && this.since === null) this.since = this.now();
      if (!held && this.since !== null) {
        this.total += this.now() - this.since;
        this.since = null;
      }
      onChange?.(held);
    });
  }

  get ms(): number {
    return Math.round(this.total + (this.since !== null ? this.now() - this.since : 0));
  }

  stop(): void {
    if (this.since !== null) {
      this.total += this.now() - this.since;
      this.since = null;
    }
    this.off();
  }
}
