import { appendFile, mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { newId } from '../ids';
import { jsonDepth, JSON_MAX_DEPTH } from '../json-text';
import { writeFileAtomic } from '../storage/atomic-file';
import { verify } from '../webhooks/sign';
import type { Clock } from '../core-deps';
import type { TenantService } from './tenants';
import type { EventBus } from '../events/bus';

/** Deliveries kept per inbox (older ones are dropped), and the part of each body kept. */
export const INBOX_KEEP = 200;
export const INBOX_BODY_KEEP_BYTES = 256 * 1024;

export interface InboxResponse {
  /** What the inbox answers with. */
  status: number;
  /** For this many deliveries, then back to 200 (null: until changed). */
  times: number | null;
  /** Sent as `Retry-After` (seconds) with a non-2xx answer. */
  retry_after_seconds: number | null;
}

export interface InboxDelivery {
  id: string;
  received_at: string;
  method: string;
  /** The query string the sender used (`?status=500` picks the answer). */
  query: string;
  headers: Record<string, string>;
  body: string;
  body_truncated: boolean;
  /** The body parsed as JSON, or null when it is not JSON. */
  json: unknown;
  signature: {
    /** True when a signature matches a tenant's webhook secret and the timestamp is fresh. */
    verified: boolean;
    /** The tenant whose secret signed it. */
    tenant: string | null;
    timestamp_ok: boolean;
    reason: string | null;
  };
  answered: number;
}

export interface InboxSummary {
  name: string;
  deliveries: number;
  last_received_at: string | null;
  response: InboxResponse;
}

const DEFAULT_RESPONSE: InboxResponse = { status: 200, times: null, retry_after_seconds: null };

/**
 * The callback inbox: a built-in webhook receiver at `/_emu/inbox/{name}`. Each delivery is recorded
 * with its headers and body and whether its Standard Webhooks signature verifies with one of the
 * tenants' secrets; the answer is the status the user picked (to rehearse retries). Deliveries are kept
 * in `<data-dir>/inbox/<name>.jsonl`, the last INBOX_KEEP of each inbox.
 */
export class InboxService {
  private readonly cache = new Map<string, Promise<InboxDelivery[]>>();
  private readonly responses = new Map<string, InboxResponse>();
  /** Appends and trims of one inbox run one after another. */
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(
    private readonly dir: string,
    private readonly tenants: TenantService,
    private readonly clock: Clock,
    /** Where each delivery is announced (GET /_emu/events). */
    private readonly events: EventBus,
  ) {}

  async receive(
    name: string,
    req: {
      method: string;
      query: string;
      statusParam: number | undefined;
      headers: Record<string, string | string[] | undefined>;
      body: Buffer;
    },
  ): Promise<{ status: number; retryAfter: number | null; delivery: InboxDelivery }> {
    const text = req.body.subarray(0, INBOX_BODY_KEEP_BYTES).toString('utf8');
    const fullText = req.body.toString('utf8');
    let json: unknown = null;
    // Deeper than the API accepts: kept as text only (JSON.stringify of the delivery would overflow the stack).
    if (jsonDepth(fullText) <= JSON_MAX_DEPTH) {
      try {
        json = JSON.parse(fullText);
      } catch {
        /* not JSON: kept as text */
      }
    }
    const response = this.responses.get(name) ?? DEFAULT_RESPONSE;
    const status = req.statusParam ?? response.status;
    if (req.statusParam === undefined && response.times !== null) {
      if (response.times <= 1) this.responses.delete(name);
      else this.responses.set(name, { ...response, times: response.times - 1 });
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
    const delivery: InboxDelivery = {
      id: newId('dlv'),
      received_at: this.clock().toISOString(),
      method: req.method,
      query: req.query,
      headers,
      body: text,
      body_truncated: req.body.length > INBOX_BODY_KEEP_BYTES,
      json: req.body.length > INBOX_BODY_KEEP_BYTES ? null : json,
      signature: this.check(headers, fullText),
      answered: status,
    };
    await this.serial(name, async () => {
      const list = await this.load(name);
      list.push(delivery);
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      if (list.length > INBOX_KEEP * 1.5) {
        list.splice(0, list.length - INBOX_KEEP);
        await writeFileAtomic(this.file(name), list.map((d) => JSON.stringify(d) + '\n').join(''), 0o600);
      } else {
        await appendFile(this.file(name), JSON.stringify(delivery) + '\n', { mode: 0o600 });
      }
    });
    this.events.publish('inbox.delivery', {
      inbox: name,
      delivery_id: delivery.id,
      verified: delivery.signature.verified,
      answered: delivery.answered,
    });
    const retryAfter = status >= 300 ? (req.statusParam === undefined ? response.retry_after_seconds : null) : null;
    return { status, retryAfter, delivery };
  }

  /** Newest first. */
  async deliveries(name: string): Promise<InboxDelivery[]> {
    return [...(await this.load(name))].reverse().slice(0, INBOX_KEEP);
  }

  async list(): Promise<InboxSummary[]> {
    const names = new Set<string>(this.responses.keys());
    for (const file of await readdir(this.dir).catch(() => [] as string[])) if (file.endsWith('.jsonl')) names.add(file.slice(0, -6));
    const out: InboxSummary[] = [];
    for (const name of [...names].sort()) {
      const list = await this.load(name);
      out.push({
        name,
        deliveries: Math.min(list.length, INBOX_KEEP),
        last_received_at: list.at(-1)?.received_at ?? null,
        response: this.response(name),
      });
    }
    return out;
  }

  async clear(name: string): Promise<void> {
    await this.serial(name, async () => {
      this.cache.set(name, Promise.resolve([]));
      await rm(this.file(name), { force: true });
    });
  }

  response(name: string): InboxResponse {
    return { ...(this.responses.get(name) ?? DEFAULT_RESPONSE) };
  }

  setResponse(name: string, response: InboxResponse): InboxResponse {
    if (response.status === 200 && response.times === null && response.retry_after_seconds === null) this.responses.delete(name);
    else this.responses.set(name, { ...response });
    return this.response(name);
  }

  /** For a state export: each inbox's file as it stands between two appends (read under its chain), and the chosen answers. */
  async snapshot(): Promise<{ files: Map<string, Buffer>; responses: Record<string, InboxResponse> }> {
    const files = new Map<string, Buffer>();
    const names = (await readdir(this.dir).catch(() => [] as string[])).filter((f) => f.endsWith('.jsonl')).map((f) => f.slice(0, -6));
    for (const name of names.sort()) {
      const data = await this.serial(name, () => readFile(this.file(name)).catch(() => null));
      if (data) files.set(name, data);
    }
    return { files, responses: Object.fromEntries([...this.responses].map(([k, v]) => [k, { ...v }])) };
  }

  /** After a state import into a running core: the inboxes as the archive had them (the files are in place already, or given here). */
  async restore(files: Map<string, Buffer> | null, responses: Record<string, InboxResponse>): Promise<void> {
    const names = new Set([...this.cache.keys(), ...(files?.keys() ?? [])]);
    for (const name of names) {
      await this.serial(name, async () => {
        this.cache.delete(name);
        if (!files) return;
        await rm(this.file(name), { force: true });
        const data = files.get(name);
        if (data) {
          await mkdir(this.dir, { recursive: true, mode: 0o700 });
          await writeFileAtomic(this.file(name), data, 0o600);
        }
      });
    }
    this.responses.clear();
    for (const [name, r] of Object.entries(responses)) this.responses.set(name, { ...r });
  }

  /** Tries every tenant's signing secrets: the inbox does not know whose callback it got. */
  private check(headers: Record<string, string>, body: string): InboxDelivery['signature'] {
    const now = Math.floor(this.clock().getTime() / 1000);
    let first: ReturnType<typeof verify> | null = null;
    for (const tenant of this.tenants.list()) {
      const result = verify(this.tenants.signingSecrets(tenant.id), headers, body, now);
      if (result.matched !== null)
        return { verified: result.verified, tenant: tenant.name, timestamp_ok: result.timestamp_ok, reason: result.reason };
      first ??= result;
    }
    return {
      verified: false,
      tenant: null,
      timestamp_ok: first?.timestamp_ok ?? false,
      reason: first?.reason?.replace('the tenant’s secret', 'any tenant’s secret') ?? 'no tenant to check the signature against',
    };
  }

  private file(name: string): string {
    return join(this.dir, `${name}.jsonl`);
  }

  private load(name: string): Promise<InboxDelivery[]> {
    let list = this.cache.get(name);
    if (!list) {
      list = readFile(this.file(name), 'utf8').then(
        (text) =>
          text.split('\n').flatMap((line) => {
            try {
              return line ? [JSON.parse(line) as InboxDelivery] : [];
            } catch {
              return []; // a line cut short by a crash
            }
          }),
        () => [],
      );
      this.cache.set(name, list);
    }
    return list;
  }

  private serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.chains.get(name) ?? Promise.resolve()).then(fn, fn);
    this.chains.set(
      name,
      run.catch(() => {}),
    );
    return run;
  }
}
