import type { InitErrorFrame, ReadyFrame } from '../protocol';
import type { RunnerChannel } from '../runner-client';
import { HeldClock } from './clock';
import type { Relay } from './relay';

/** Longer than any wait here (setTimeout's ceiling): the channel's own timer never decides a debug run's start. */
const FOREVER_MS = 2 ** 31 - 1;

/**
 * A debug runner's start (executor/local-host.ts): it runs nothing until a debugger attaches and lets it go
 * (Bun: `Inspector.initialized`; debugpy: `configurationDone`), and a debugger that holds it while the bundle
 * loads stops the clock. So the start may spend `attachTimeoutMs` with no debugger connected, in all: a first
 * debugger that never comes, or one that left before letting the program run (another may attach meanwhile),
 * ends it with code `attach_timeout`. The relay closing first (a cancel while waiting) rejects with code
 * `debug_closed`; the runner's exit rejects as RunnerChannel.waitReady does. Everything it set up is gone when it settles.
 */
export function waitDebugReady(channel: RunnerChannel, relay: Relay, o: { attachTimeoutMs: number }): Promise<ReadyFrame | InitErrorFrame> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const cleanups: (() => void)[] = [];
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      for (const c of cleanups) c();
      fn();
    };
    const fail = (code: string, message: string) => settle(() => reject(Object.assign(new Error(message), { code })));
    channel.waitReady(FOREVER_MS).then(
      (frame) => settle(() => resolve(frame)),
      (err: Error) => settle(() => reject(err)),
    );
    cleanups.push(relay.onClose(() => fail('debug_closed', 'the debug run was ended while it waited for a debugger')));
    if (settled) return; // the relay was closed already
    const clock = new HeldClock(relay, o.attachTimeoutMs, () =>
      fail(
        'attach_timeout',
        relay.attached
          ? `no debugger held the run for ${formatMs(o.attachTimeoutMs)} before its program started (the debugger left before letting it run)`
          : `no debugger attached within ${formatMs(o.attachTimeoutMs)}`,
      ),
    );
    cleanups.push(() => clock.stop());
  });
}

export function formatMs(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000) return `${Math.round(ms / 100) / 10} s`;
  return `${ms} ms`;
}
