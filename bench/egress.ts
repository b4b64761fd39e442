import { createServer, request as httpRequest, Agent } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EgressProxy } from '../server/egress/proxy';
import { EgressService } from '../server/services/egress';
import { stats } from './lib';

/**
 * Issue 7's proxy overhead: one GET to a loopback server, direct (keep-alive) against through the core's
 * egress proxy (a fresh unix-socket connection, the preamble, an absolute-form request: what a runner's
 * relay sends), in one run.
 */
export async function egressBench(opts: { iterations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-egress-'));
  const upstream = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok'));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  const egress = new EgressService(
    { profile: 'local', allow: [] },
    () => new Date(),
    () => null,
  );
  const proxy = new EgressProxy(egress, join(dir, 'egress.sock'));
  await proxy.listen();
  const agent = new Agent({ keepAlive: true });
  const direct = () =>
    new Promise<void>((resolve, reject) => {
      httpRequest({ agent, host: '127.0.0.1', port, path: '/' }, (res) => res.resume().on('end', resolve))
        .on('error', reject)
        .end();
    });
  const viaProxy = () =>
    new Promise<void>((resolve, reject) => {
      const c = connect(proxy.socketPath);
      let text = '';
      c.on('data', (d: Buffer) => (text += d.toString('latin1')));
      c.on('close', () => (text.startsWith('HTTP/1.1 200') ? resolve() : reject(new Error(text.slice(0, 80)))));
      c.on('error', reject);
      c.write(`SVC-EGRESS 1 -\r\nGET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    });
  try {
    const d: number[] = [];
    const p: number[] = [];
    for (let i = -50; i < opts.iterations; i++) {
      let t = performance.now();
      await direct();
      if (i >= 0) d.push(performance.now() - t);
      t = performance.now();
      await viaProxy();
      if (i >= 0) p.push(performance.now() - t);
    }
    const ds = stats(d);
    const ps = stats(p);
    return { direct_keepalive: ds, through_proxy: ps, overhead_p50_ms: Math.round((ps.p50_ms - ds.p50_ms) * 1000) / 1000 };
  } finally {
    agent.destroy();
    await proxy.close();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
