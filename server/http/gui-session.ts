import type { Context, Middleware } from 'koa';
import { ApiError } from '../errors';
import { secretEquals } from '../ids';
import { SESSION_COOKIE, type GuiSession } from '../services/gui-session';

/**
 * Sign in once: opening any GUI path with `?token=<admin token>` answers a redirect to the same URL without
 * the token and sets the session cookie; the cookie then authenticates `/_emu` requests from the GUI (in every
 * tab, and across restarts: its value comes from the data dir's secret, server/storage/gui-secret.ts). It is
 * never accepted on `/v1` (tenant keys only there: server/http/app.ts asks only for admin routes).
 *
 * Defences beside the host and origin checks every request meets (./guards.ts): the cookie is HttpOnly (no
 * script reads it) and SameSite=Strict (no other site's page makes the browser send it); a request carrying
 * it with `Sec-Fetch-Site` other than `same-origin` or `none` is refused (a page on another port of the same
 * host is "same-site", and cookies are not per port); a change (any method but GET/HEAD) made with it must
 * carry an `Origin` (which ./guards.ts has checked is this server's).
 */
/** Every value of cookie `name` in a `Cookie` header (a browser may send one name twice, for two paths). */
export function cookieValues(header: string, name: string): string[] {
  const out: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name)
      out.push(
        part
          .slice(eq + 1)
          .trim()
          .replace(/^"(.*)"$/, '$1'),
      );
  }
  return out;
}

const SAFE_METHODS = new Set(['GET', 'HEAD']);

const refused = (detail: string) => new ApiError(403, 'forbidden_origin', 'Forbidden origin', detail);

/**
 * Whether the request is an admin's by its session cookie: false without a current one; a cookie that came
 * from a page that is not the GUI's own is refused (403 `forbidden_origin`), never just ignored.
 */
export function sessionAuthenticates(ctx: Context, session: GuiSession): boolean {
  const values = cookieValues(ctx.get('cookie'), SESSION_COOKIE);
  if (!values.some((v) => session.accepts(v))) return false;
  const site = ctx.get('sec-fetch-site');
  if (site && site !== 'same-origin' && site !== 'none') {
    throw refused(`the GUI's session is accepted only from the GUI's own pages (Sec-Fetch-Site: ${site})`);
  }
  if (!SAFE_METHODS.has(ctx.method) && !ctx.get('origin')) {
    throw refused('a change made with the GUI’s session must come from the GUI’s own page (with an Origin header)');
  }
  return true;
}

/**
 * `?token=<admin token>` on a GUI path (anything the API routes did not take): 303 to the same URL without
 * `token`, with the session cookie. A token that is not this run's admin token is left to the GUI, which says
 * so (renderer/src/session.ts).
 */
export function guiSignIn(session: GuiSession, adminToken: string): Middleware {
  return async (ctx, next) => {
    if (!SAFE_METHODS.has(ctx.method) || ctx.path.startsWith('/v1/') || ctx.path.startsWith('/_emu/')) {
      await next();
      return;
    }
    const query = new URLSearchParams(ctx.querystring);
    const token = query.get('token');
    if (token === null || !secretEquals(token, adminToken)) {
      await next();
      return;
    }
    query.delete('token');
    const rest = query.toString();
    // `//evil.example` as a path would be a redirect to another site: one leading slash only.
    const path = '/' + ctx.path.replace(/^\/+/, '');
    ctx.state.routeTemplate = '/(sign-in)';
    ctx.status = 303;
    ctx.set('Location', rest ? `${path}?${rest}` : path);
    ctx.set('Set-Cookie', session.setCookie(ctx.secure));
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.body = '';
  };
}
