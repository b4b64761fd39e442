import type { DebugEvent } from '../../executor/types';

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
