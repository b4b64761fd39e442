import type { Middleware } from 'koa';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { guiCsp, newCspNonce, withNonce } from './csp';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Snippet Emulator</title>
<p>The GUI is not built in this checkout. Run <code>npm run build</code> (or <code>npm start</code>), then reload.</p>
<p>The API is served here: <a href="/openapi.json">/openapi.json</a>.</p>`;

/**
 * Serves the built GUI (`out/renderer`) at `/`: index.html for `/`, files under it by path. The
 * admin token never sits in a page: the GUI reads it from `?token=` or the desktop bridge.
 */
export function staticGui(rendererDir: string | null): Middleware {
  const dir = rendererDir === null ? null : resolve(rendererDir);
  return async (ctx, next) => {
    // Not the GUI's: on down the chain (Koa types `next` as Promise<any>; this keeps what the middleware returns void).
    const onward = async (): Promise<void> => {
      await next();
    };
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return onward();
    if (ctx.path.startsWith('/v1/') || ctx.path.startsWith('/_emu/')) return onward();
    let rel: string;
    try {
      rel = ctx.path === '/' ? 'index.html' : decodeURIComponent(ctx.path.slice(1));
    } catch {
      return onward(); // a malformed %-escape names no file: 404
    }
    if (!dir) {
      if (ctx.path !== '/') return onward();
      ctx.state.routeTemplate = '/';
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Content-Security-Policy', guiCsp(null));
      ctx.body = NOT_BUILT;
      return;
    }
    const file = normalize(join(dir, rel));
    if (!file.startsWith(dir + sep)) return onward();
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) {
      if (ctx.path !== '/') return onward();
      ctx.state.routeTemplate = '/';
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Content-Security-Policy', guiCsp(null));
      ctx.body = NOT_BUILT;
      return;
    }
    const isIndex = rel === 'index.html';
    ctx.state.routeTemplate = isIndex ? '/' : '/(gui asset)';
    ctx.set('Cache-Control', isIndex ? 'no-store' : 'public, max-age=3600');
    // No 'unsafe-inline': index.html gets a nonce of its own for the <style> elements the GUI creates (./csp.ts).
    const nonce = isIndex ? newCspNonce() : null;
    ctx.set('Content-Security-Policy', guiCsp(nonce));
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.type = TYPES[extname(file)] ?? 'application/octet-stream';
    ctx.body = nonce ? withNonce(await readFile(file, 'utf8'), nonce) : await readFile(file);
  };
}
