// Keystrokes on their way to a terminal: what is typed within a few milliseconds goes in one POST, POSTs
// go one at a time (what is typed meanwhile waits and follows in the next), so order always holds. No
// React or DOM here beyond timers, so it can be tested under Node.

/** The core takes at most 64 Ki characters per input; stay well below. */
const MAX_CHUNK = 16 * 1024;

export class InputQueue {
  private buffer = '';
  private timer: ReturnType<typeof setTimeout> | null = null;
  private sending = false;
  private closed = false;

  constructor(
    private readonly send: (data: string) => Promise<void>,
    private readonly onError: (error: unknown) => void,
    private readonly delayMs = 5,
  ) {}

  push(data: string): void {
    if (this.closed || !data) return;
    this.buffer += data;
    if (this.timer === null && !this.sending) this.timer = setTimeout(() => void this.flush(), this.delayMs);
  }

  /** Drops what is waiting and sends nothing more (the terminal exited or the view went away). */
  close(): void {
    this.closed = true;
    this.buffer = '';
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private async flush(): Promise<void> {
    this.timer = null;
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.buffer && !this.closed) {
        let end = Math.min(this.buffer.length, MAX_CHUNK);
        // Never split a surrogate pair between two POSTs.
        if (end < this.buffer.length && /[\uD800-\uDBFF]/.test(this.buffer.charAt(end - 1))) end -= 1;
        const chunk = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end);
        try {
          await this.send(chunk);
        } catch (err) {
          this.onError(err);
        }
      }
    } finally {
      this.sending = false;
    }
  }
}
