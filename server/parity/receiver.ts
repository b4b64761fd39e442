import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  headers: Record<string, string | undefined>;
  body: string;
}

/**
 * The parity check's callback receiver: a plain HTTP server on 127.0.0.1 (a loopback target, which production
 * refuses), answering 204 to every POST and handing each delivery to whoever waits on its path. Lives only for
 * one check: close() ends it and every wait.
 */
export interface CallbackReceiver {
  urlFor(name: string): string;
  next(url: string, ms: number): Promise<Delivery | null>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<CallbackReceiver> {
  const got = new Map<string, Delivery[]>();
  const waiting = new Map<string, (d: Delivery | null) => void>();
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 1024 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      const path = req.url ?? '/';
      const delivery: Delivery = { headers: flat(req.headers), body: Buffer.concat(chunks).toString('utf8') };
      res.writeHead(204).end();
      const w = waiting.get(path);
      if (w) {
        waiting.delete(path);
        w(delivery);
      } else got.set(path, [...(got.get(path) ?? []), delivery]);
    });
  });
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(0, '127.0.0.1', () => res());
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    urlFor: (name) => `${base}/hook/${encodeURIComponent(name)}`,
    next(url, ms) {
      const path = new URL(url).pathname;
      const queued = got.get(path);
      if (queued?.length) return Promise.resolve(queued.shift()!);
      return new Promise((res) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          waiting.delete(path);
          res(null);
        }, ms);
        timers.add(timer);
        waiting.set(path, (d) => {
          clearTimeout(timer);
          timers.delete(timer);
          res(d);
        });
      });
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const w of waiting.values()) w(null);
      waiting.clear();
      server.closeAllConnections();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
}

function flat(headers: IncomingHttpHeaders): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(headers)) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}
