import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import Koa from 'koa';
import { staticGui } from '../../server/http/static-gui';
import { CSP_NONCE_PLACEHOLDER } from '../../server/http/csp';

describe('staticGui', () => {
  let dir: string;
  const servers: Server[] = [];
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-emu-gui-'));
    await mkdir(join(dir, 'assets'));
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>gui</title>');
    await writeFile(join(dir, 'assets', 'app.js'), 'console.log(1)');
    await writeFile(join(dir, '..', 'outside.txt'), 'secret').catch(() => {});
  });
  afterAll(async () => {
    for (const s of servers) s.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(rendererDir: string | null): Promise<string> {
    const app = new Koa();
    app.use(staticGui(rendererDir));
    const handle = app.callback(); // Koa answers its own errors: nothing waits on the promise it returns per request
    const server = createServer((req, res) => void handle(req, res)).listen(0, '127.0.0.1');
    servers.push(server);
    await new Promise((r) => server.once('listening', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it.each([
    ['a clean path', () => dir],
    ['a trailing slash', () => dir + '/'],
    ['a relative path', () => relative(process.cwd(), dir)],
  ])('serves index.html and assets from %s', async (_, pathOf) => {
    const url = await serve(pathOf());
    const index = await fetch(url + '/');
    expect(index.status).toBe(200);
    expect(await index.text()).toContain('<title>gui</title>');
    const asset = await fetch(url + '/assets/app.js');
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toContain('javascript');
  });

  it('never serves outside the directory, and a bad %-escape is a 404, not a crash', async () => {
    const url = await serve(dir);
    for (const path of ['/..%2Foutside.txt', '/%2e%2e/outside.txt', '/%zz']) {
      expect((await fetch(url + path)).status, path).toBe(404);
    }
  });

  it('index.html gets a fresh CSP nonce per response in place of the build placeholder; no policy allows unsafe-inline', async () => {
    const nonceDir = await mkdtemp(join(tmpdir(), 'svc-emu-gui-nonce-'));
    await writeFile(
      join(nonceDir, 'index.html'),
      `<meta http-equiv="Content-Security-Policy" content="style-src 'self' 'nonce-${CSP_NONCE_PLACEHOLDER}'"><meta property="csp-nonce" nonce="${CSP_NONCE_PLACEHOLDER}">`,
    );
    await mkdir(join(nonceDir, 'assets'));
    await writeFile(join(nonceDir, 'assets', 'a.css'), `/* ${CSP_NONCE_PLACEHOLDER} */`);
    const url = await serve(nonceDir);
    const [a, b] = [await fetch(url + '/'), await fetch(url + '/')];
    const nonceOf = (res: Response) => /'nonce-([^']+)'/.exec(res.headers.get('content-security-policy') ?? '')?.[1];
    expect(nonceOf(a)).toMatch(/^[A-Za-z0-9+/]{24}$/);
    expect(nonceOf(a)).not.toBe(nonceOf(b));
    expect(await a.text()).toBe(
      `<meta http-equiv="Content-Security-Policy" content="style-src 'self' 'nonce-${nonceOf(a)}'"><meta property="csp-nonce" nonce="${nonceOf(a)}">`,
    );
    const css = await fetch(url + '/assets/a.css');
    expect(await css.text()).toBe(`/* ${CSP_NONCE_PLACEHOLDER} */`); // only index.html is rewritten
    for (const res of [a, b, css, await fetch((await serve(null)) + '/')]) {
      expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self';/);
      expect(res.headers.get('content-security-policy')).not.toContain('unsafe-inline');
    }
    await rm(nonceDir, { recursive: true, force: true });
  });

  it('without a build, / says how to build it', async () => {
    const url = await serve(null);
    const res = await fetch(url + '/');
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('npm run build');
  });
});
