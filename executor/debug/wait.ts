import type { InitErrorFrame, ReadyFrame } from '../protocol';
import type { RunnerChannel } from '../runner-client';
import { HeldClock } from './clock';
import type { Relay } from './relay';

/** Longer than any wait here (setTimeout's ceiling): the channel's own timer never decides a debug run's start. */
const FOREVER_MS = 2 ** 31 - 1;

/**
 * A debug runner's start (executor/local-host.ts): it runs nothing until a debugger attaches, so the wait is
 * `attachTimeoutMs` for a first debugger (none: rejects with code `attach_timeout`), then the host's init budget
 * for the load, counted only while no debugger holds it (a breakpoint in the bundle's top level stops the clock).
 * The relay closing first (a cancel while waiting) rejects with code `debug_closed`; the runner's exit rejects as
 * RunnerChannel.waitReady does. Everything it set up is gone when it settles.
 */
export function waitDebugReady(
  channel: RunnerChannel,
  relay: Relay,
  o: { attachTimeoutMs: number; initTimeoutMs: number },
): Promise<ReadyFrame | InitErrorFrame> {
  return new Promise((resolve, reject) => {
    let attachTimer: NodeJS.Timeout | undefined;
    let initClock: HeldClock | null = null;
    let settled = false;
    const cleanups: (() => void)[] = [];
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(attachTimer);
      initClock?.stop();
      for (const c of cleanups) c();
      fn();
    };
    const fail = (code: string, message: string) => settle(() => reject(Object.assign(new Error(message), { code })));
    const startInit = () => {
      if (initClock || settled) return;
      clearTimeout(attachTimer);
      initClock = new HeldClock(relay, o.initTimeoutMs, () =>
        fail('ready_timeout', `the runner was not ready within ${o.initTimeoutMs} ms after the debugger attached`),
      );
    };
    channel.waitReady(FOREVER_MS).then(
      (frame) => settle(() => resolve(frame)),
      (err: Error) => settle(() => reject(err)),
    );
    cleanups.push(relay.onClose(() => fail('debug_closed', 'the debug run was ended while it waited for a debugger')));
    if (relay.attached) startInit();
    else {
      cleanups.push(relay.onHeldChange((held) => held && startInit()));
      attachTimer = setTimeout(
        () => fail('attach_timeout', `no debugger attached within ${formatMs(o.attachTimeoutMs)}`),
        o.attachTimeoutMs,
      );
    }
  });
}

export function formatMs(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000) return `${Math.round(ms / 100) / 10} s`;
  return `${ms} ms`;
}
