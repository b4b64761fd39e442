import { randomBytes } from 'node:crypto';
import { createClient, type Client, type RawReply } from '../../contract/client';

/** Every probe request gives up after this long (the timeout probe waits about 4 s). */
export const REQUEST_TIMEOUT_MS = 30_000;

export interface Reply extends RawReply {
  /** From sending the request to the whole body read. */
  ms: number;
}

export interface SendInit {
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
  /** undefined: the side's key; null: no Authorization header; a string: that key. */
  credential?: string | null;
}

/**
 * One of the two deployments a parity check compares: the reference emulator or the target. Holds its base
 * URL and key, sends the probes' requests (each bounded by REQUEST_TIMEOUT_MS and the run's abort signal), and
 * remembers every snippet it was asked to create, so the check deletes them all at the end.
 */
export class Side {
  /** Snippet names created (or asked to be created: a request cut by Ctrl-C may still have created one). */
  readonly created: string[] = [];
  private readonly client: Client;
  private readonly fixtures = new Map<string, Promise<Fixture>>();

  constructor(
    readonly label: 'emulator' | 'target',
    readonly url: string,
    readonly key: string,
    /** `svc-parity-<random>`: the prefix of every snippet this check creates (the same on both sides). */
    readonly prefix: string,
    private readonly signal: AbortSignal,
    /** The reference's admin token (to read its workspace loader); null on the target. */
    readonly admin: string | null = null,
  ) {
    this.client = createClient({ baseUrl: url.replace(/\/+$/, ''), key });
  }

  async send(method: string, path: string, init: SendInit = {}, signal?: AbortSignal): Promise<Reply> {
    const t0 = performance.now();
    const reply = await this.client.sendPath(method, path, {
      ...(init.raw !== undefined ? { raw: init.raw } : init.body !== undefined ? { body: init.body } : {}),
      headers: { ...(init.raw !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
      ...(init.credential !== undefined ? { credential: init.credential } : {}),
      signal: signal ?? AbortSignal.any([this.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
    });
    return { ...reply, ms: performance.now() - t0 };
  }

  /** The admin-token request the reference answers (its workspace loader's status). */
  async adminGet(path: string): Promise<Reply> {
    return this.send('GET', path, { credential: this.admin });
  }

  /** The probe snippet `name` of FIXTURES, created once per side on first use. */
  fixture(name: string, make: (side: Side, snippet: string) => Promise<Fixture>): Promise<Fixture> {
    let f = this.fixtures.get(name);
    if (!f) {
      f = make(this, `${this.prefix}-${name}`);
      this.fixtures.set(name, f);
    }
    return f;
  }

  /** Deletes every snippet this check created here; never throws, never cut by the run's abort (Ctrl-C). */
  async cleanup(): Promise<{ deleted: string[]; failed: { snippet: string; error: string }[] }> {
    const deleted: string[] = [];
    const failed: { snippet: string; error: string }[] = [];
    const remove = async (name: string) => {
      try {
        const r = await this.send('DELETE', `/v1/snippets/${encodeURIComponent(name)}`, {}, AbortSignal.timeout(REQUEST_TIMEOUT_MS));
        // 404: the create never landed (refused, or cut before it did): nothing to delete.
        if (r.status === 204 || r.status === 200) deleted.push(name);
        else if (r.status !== 404) failed.push({ snippet: name, error: `DELETE answered ${r.status}` });
      } catch (err) {
        failed.push({ snippet: name, error: (err as Error).message });
      }
    };
    const done = new Set(this.created);
    for (const name of done) await remove(name);
    // A create cut by Ctrl-C may land on the server after its DELETE: the prefix is this check's alone, so any
    // snippet still named with it (in the first page of the list, by name) is ours too.
    const left = await this.send('GET', '/v1/snippets?limit=1000', {}, AbortSignal.timeout(REQUEST_TIMEOUT_MS)).catch(() => null);
    for (const s of (left?.body as { data?: { name?: unknown }[] } | undefined)?.data ?? []) {
      if (typeof s.name !== 'string' || !s.name.startsWith(`${this.prefix}-`)) continue;
      await remove(s.name);
    }
    return { deleted: [...new Set(deleted)], failed };
  }
}

/** A probe snippet as a side has it: its name, whether it runs, and how its creation went (a gate value). */
export interface Fixture {
  snippet: string;
  ok: boolean;
  /** `created`, or `<step> <status> <code>` (e.g. `version 422 limit_exceeds_tenant_cap`). */
  outcome: string;
}

/** `svc-parity-<8 random base36>`, the prefix of everything one check creates. */
export function parityPrefix(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return `svc-parity-${[...randomBytes(8)].map((b) => alphabet[b % 36]).join('')}`;
}
