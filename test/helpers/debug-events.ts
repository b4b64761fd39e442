import net from 'node:net';
import type { DebugEvent, ExecutorEvents } from '../../executor/types';

/** A debug run's events as they come (ExecutorEvents.onDebug → push); next(state) waits for the first of a state. */
export function debugEvents() {
  const seen: DebugEvent[] = [];
  const waiters: (() => void)[] = [];
  return {
    seen,
    push(e: DebugEvent) {
      seen.push(e);
      for (const w of waiters.splice(0)) w();
    },
    async next(state: DebugEvent['state'], timeoutMs = 15_000): Promise<DebugEvent> {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const e = seen.find((x) => x.state === state);
        if (e) return e;
        if (Date.now() > end)
          throw new Error(`no ${state} debug event within ${timeoutMs} ms (saw ${seen.map((x) => x.state).join(', ')})`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, Math.max(1, end - Date.now()));
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
    },
  };
}

/** A debug run's executor events: its debug events to `onDebug`; no host calls (the test snippets make none). */
export function debugRunEvents(onDebug: (e: DebugEvent) => void): ExecutorEvents {
  return {
    onDebug,
    onCall: async () => {
      throw new Error('no host calls here');
    },
  };
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
