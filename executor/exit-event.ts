export interface ExitStatus {
  code: number | null;
  signal: string | null;
}

/**
 * A runner's exit as an event that can be left again. A sandbox outlives many invocations: a `.then` per
 * invocation on its exit promise stays attached until the runner exits, and keeps everything the handler
 * closes over (the run's logs, timeline, reply, the caller's hooks) alive with it: about 1 MB per call that
 * logs 1 MB (docs/architecture.md, "Long-running core"). Here each run subscribes with `on` and calls the
 * function it returns when the run ends; only this one `.then` is ever attached to the promise.
 */
export class ExitEvent {
  private status: ExitStatus | null = null;
  private readonly listeners = new Set<(e: ExitStatus) => void>();

  constructor(exited: Promise<ExitStatus>) {
    void exited.then((e) => {
      this.status = e;
      const listeners = [...this.listeners];
      this.listeners.clear();
      for (const fn of listeners) fn(e);
    });
  }

  /** Listeners attached now (what a test checks is back to 0 between runs). */
  get size(): number {
    return this.listeners.size;
  }

  /**
   * Calls `fn` once, when the runner exits (in a microtask when it already has). Returns the function that
   * takes `fn` off again: call it when the run that subscribed ends.
   */
  on(fn: (e: ExitStatus) => void): () => void {
    const status = this.status;
    if (status) {
      let live = true;
      queueMicrotask(() => {
        if (live) fn(status);
      });
      return () => {
        live = false;
      };
    }
    this.listeners.add(fn);
    return () => {
      this.listeners.delete(fn);
    };
  }
}
