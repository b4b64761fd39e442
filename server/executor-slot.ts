import { UnavailableExecutor, type BuiltExecutor, type Executor, type PrewarmJob, type PrewarmResult } from '../executor';
import type { Logger } from './logger';

/**
 * The core's executor, replaceable while the core runs. Behind the Lima VM the agent can only connect
 * once the VM runs: when the VM is started from the app, the slot connects and the next run uses it;
 * when it is stopped, runs fail with that reason instead of with a broken pipe.
 */
export class ExecutorSlot implements Executor {
  private built: BuiltExecutor;

  constructor(
    initial: BuiltExecutor,
    private readonly opts: { create: () => Promise<BuiltExecutor>; logger: Logger },
  ) {
    this.built = initial;
  }

  get info() {
    return this.built.executor.info;
  }
  get available(): boolean {
    return !(this.built.executor instanceof UnavailableExecutor);
  }
  /** What the runtime report says now (`/_emu/executor`). */
  runtime(): Promise<unknown> {
    return this.built.runtime();
  }
  run(...args: Parameters<Executor['run']>) {
    return this.built.executor.run(...args);
  }
  /** The current executor's prewarm; one without it starts the sandbox on the first run instead. */
  async prewarm(job: PrewarmJob): Promise<PrewarmResult> {
    return (await this.built.executor.prewarm?.(job)) ?? { outcome: 'skipped' };
  }
  retire(...args: Parameters<Executor['retire']>) {
    return this.built.executor.retire(...args);
  }
  stats() {
    return this.built.executor.stats();
  }
  async housekeep(): Promise<{ groups: number; files: number }> {
    return (await this.built.executor.housekeep?.()) ?? { groups: 0, files: 0 };
  }
  close() {
    return this.built.executor.close();
  }

  /** Connects again (after the VM started); keeps the current executor if that fails, and says why. */
  async reconnect(): Promise<void> {
    const next = await this.opts.create();
    if (next.executor instanceof UnavailableExecutor) {
      const reason = next.executor.info.parity.reasons.join('; ');
      this.opts.logger.log('warn', 'the executor could not connect', { reason });
      throw new Error(`the emulator could not connect to the VM's agent: ${reason}`);
    }
    await this.replace(next);
    this.opts.logger.log('info', 'executor connected', { transport: next.executor.info.transport });
  }

  /** Runs fail with `reason` from now on (the VM was stopped: its agent is gone). */
  async disconnect(reason: string): Promise<void> {
    await this.replace({ executor: new UnavailableExecutor(reason), validateCode: null, runtime: async () => ({ error: reason }) });
  }

  private async replace(next: BuiltExecutor): Promise<void> {
    const old = this.built;
    this.built = next;
    await old.executor.close().catch(() => {});
  }
}
