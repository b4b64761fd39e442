import type { DebugSession } from '../../contract/schemas/debug';
import type { EventBus } from '../events/bus';

/**
 * Debug runs in progress (X-Emu-Debug; contract/schemas/debug.ts): one session per run, from the moment its
 * debugger listens until the run ends. Every change is announced as a `debug.session` event; `end` removes it,
 * so nothing outlives the run.
 */
export class DebugSessions {
  private readonly sessions = new Map<string, DebugSession>();

  constructor(private readonly events: EventBus) {}

  list(): DebugSession[] {
    return [...this.sessions.values()];
  }

  get(invocationId: string): DebugSession | undefined {
    return this.sessions.get(invocationId);
  }

  /** Records the session's new state and announces it. */
  update(session: DebugSession): void {
    this.sessions.set(session.invocation_id, session);
    this.events.publish('debug.session', session);
  }

  /** The run ended: announced as `ended`, then forgotten. */
  end(invocationId: string): void {
    const s = this.sessions.get(invocationId);
    if (!s) return;
    this.sessions.delete(invocationId);
    this.events.publish('debug.session', { ...s, state: 'ended' });
  }
}
