/**
 * Structured JSON logs, one object a line. Callers pass fields, never request bodies or headers: the
 * logger is given no secret to leak. `redact` is a last line of defence for values that look like keys.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  log(level: LogLevel, msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const SECRETISH = /\b(svc|emu)_[0-9A-Za-z]{16,}\b|whsec_[0-9A-Za-z+/=]{16,}/g;
export const redact = (text: string) => text.replace(SECRETISH, (m) => `${m.slice(0, 4)}…[redacted]`);

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function jsonLogger(write: (line: string) => void, opts: { level?: LogLevel; base?: LogFields; now?: () => Date } = {}): Logger {
  const min = ORDER[opts.level ?? 'info'];
  const now = opts.now ?? (() => new Date());
  const make = (base: LogFields): Logger => ({
    log(level, msg, fields) {
      if (ORDER[level] < min) return;
      write(redact(JSON.stringify({ ts: now().toISOString(), level, msg, ...base, ...fields })) + '\n');
    },
    child: (fields) => make({ ...base, ...fields }),
  });
  return make(opts.base ?? {});
}

export const silentLogger: Logger = { log() {}, child: () => silentLogger };
