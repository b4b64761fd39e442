import { PassThrough } from 'node:stream';
import type { StreamEvent } from '../services/stream-log';

export type { StreamEvent } from '../services/stream-log';

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  // Proxies in front of the emulator (nginx) must not buffer: each event goes out as it is written.
  'X-Accel-Buffering': 'no',
} as const;

export const formatEvent = (e: StreamEvent) => `id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;

/**
 * One SSE response body: frames written as they come (no buffering on our side), and a `: ping`
 * comment whenever nothing was written for `pingMs`, so proxies and clients keep the connection.
 */
export class SseBody {
  readonly stream = new PassThrough();
  private lastWrite = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(pingMs: number) {
    // Checked five times per period, and sent a check early: silence never lasts longer than pingMs.
    const every = Math.max(5, Math.floor(pingMs / 5));
    this.timer = setInterval(() => {
      if (Date.now() - this.lastWrite >= pingMs - every) this.write(': ping\n\n');
    }, every);
    this.timer.unref();
    this.stream.on('close', () => clearInterval(this.timer));
  }

  send(e: StreamEvent): void {
    this.write(formatEvent(e));
  }

  /** Any other named event (e.g. a terminal's `output` and `exit`). */
  sendFrame(event: string, data: unknown, id?: number | string): void {
    this.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  end(): void {
    clearInterval(this.timer);
    if (!this.stream.writableEnded) this.stream.end();
  }

  private write(text: string): void {
    if (this.stream.writableEnded || this.stream.destroyed) return;
    this.lastWrite = Date.now();
    this.stream.write(text);
  }
}
