/**
 * @svc/store: the tenant's key-value store, from inside a snippet.
 *
 *   import { store } from "@svc/store";
 *   await store.set("greeting", { hello: "world" }, { ttlSeconds: 60 });
 *   const v = await store.get("greeting");   // the value, or null
 *
 * Every call is a host call through the runner (`globalThis[Symbol.for("svc.host")]`); a failed call
 * rejects with an Error whose `code` says why (e.g. `payload_too_large`).
 */

export interface HostCallError extends Error {
  code: string;
}

interface Host {
  call(op: string, args: Record<string, unknown>): Promise<unknown>;
}

function host(): Host {
  const h = (globalThis as Record<symbol, unknown>)[Symbol.for('svc.host')] as Host | undefined;
  if (!h || typeof h.call !== 'function') {
    const err = new Error('@svc/store works only inside a snippet runner') as HostCallError;
    err.code = 'no_runner';
    throw err;
  }
  return h;
}

export interface SetOptions {
  /** Seconds until the key expires; absent = never. */
  ttlSeconds?: number;
}

export interface ListOptions {
  prefix?: string;
}

export const store = {
  /** The value stored under `key`, or null when there is none (or it expired). */
  async get<T = unknown>(key: string): Promise<T | null> {
    const value = await host().call('store.get', { key });
    return (value ?? null) as T | null;
  },

  /** Stores any JSON value under `key`. */
  async set(key: string, value: unknown, options: SetOptions = {}): Promise<void> {
    const args: Record<string, unknown> = { key, value };
    const ttl = options.ttlSeconds as unknown;
    if (typeof ttl === 'number' && !Number.isFinite(ttl)) {
      // JSON has no NaN or Infinity (they would arrive as null, "no TTL"): refused here, in the host's words.
      const err = new Error(`store.set.ttl_seconds: must be an integer (got ${ttl})`) as HostCallError;
      err.code = 'validation_failed';
      throw err;
    }
    if (ttl !== undefined && ttl !== null) args.ttl_seconds = ttl;
    await host().call('store.set', args);
  },

  /** Removes `key`; resolves to whether the host reported that a key was removed. */
  async delete(key: string): Promise<boolean> {
    const removed = await host().call('store.delete', { key });
    return removed === true;
  },

  /** The keys (as the host lists them) starting with `prefix`. */
  async list<T = unknown>(options: ListOptions = {}): Promise<T[]> {
    const items = await host().call('store.list', { prefix: options.prefix ?? '' });
    return (items ?? []) as T[];
  },
};

export default store;
