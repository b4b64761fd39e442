import { Agent, request } from 'node:http';

/**
 * The one lean client the speed suite times every target with (the emulator, Miniflare, a bare Bun.serve):
 * node:http over a keep-alive Agent, a pre-encoded body, no schema checks, so the client costs the same
 * whichever server answers. The contract's client (bench/lib.ts) stays for set-up calls, where its cost
 * does not matter.
 */
export interface Target {
  /** Short name, as the table shows it. */
  name: string;
  url: string;
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Judges an answer: a wrong answer fails the run (a fast error is not a fast hello). */
  expect: (status: number, body: string) => boolean;
}

export interface Reply {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface LeanClient {
  send(extraHeaders?: Record<string, string>): Promise<Reply>;
  /** One request, judged by the target's `expect`; throws on a wrong answer. */
  hit(): Promise<void>;
  close(): void;
}

/** A client of one target with up to `sockets` keep-alive connections (1 for a sequential loop). */
export function leanClient(target: Target, sockets = 1): LeanClient {
  const u = new URL(target.url);
  const agent = new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  const body = target.body === undefined ? null : Buffer.from(JSON.stringify(target.body));
  const baseHeaders: Record<string, string> = {
    ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}),
    ...target.headers,
  };
  const send = (extraHeaders?: Record<string, string>) =>
    new Promise<Reply>((resolve, reject) => {
      const req = request(
        {
          agent,
          host: u.hostname,
          port: u.port,
          method: target.method,
          path: target.path,
          headers: extraHeaders ? { ...baseHeaders, ...extraHeaders } : baseHeaders,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  return {
    send,
    async hit() {
      const r = await send();
      if (!target.expect(r.status, r.body)) throw new Error(`${target.name}: unexpected answer ${r.status} ${r.body.slice(0, 300)}`);
    },
    close: () => agent.destroy(),
  };
}

/** `{ hello: 'bench' }` as JSON with a 200: the hello every target answers to `{ name: 'bench' }`. */
export const helloAnswer = (status: number, body: string) => {
  if (status !== 200) return false;
  try {
    return (JSON.parse(body) as { hello?: unknown }).hello === 'bench';
  } catch {
    return false; // not JSON: a wrong answer, reported as one
  }
};
