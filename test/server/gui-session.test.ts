// The GUI's session cookie (server/http/gui-session.ts, server/storage/gui-secret.ts): the sign-in redirect,
// the cookie as admin credential on /_emu and never on /v1, the CSRF refusals, rotation, and a restart.
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Context } from 'koa';
import { cookieValues, sessionAuthenticates } from '../../server/http/gui-session';
import { GuiSession, SESSION_COOKIE, SESSION_MAX_AGE_S } from '../../server/services/gui-session';
import { GUI_SECRET_FILE, loadOrCreateGuiSecret, sessionCookieValue } from '../../server/storage/gui-secret';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const newDir = async () => {
  const d = await tempDir();
  dirs.push(d);
  return d;
};

/** A GET that does not follow redirects (fetch's `manual`), with the given headers. */
async function raw(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { redirect: 'manual', ...init });
}

function cookieOf(res: Response): string {
  const header = res.headers.get('set-cookie');
  expect(header, 'a Set-Cookie header').toBeTruthy();
  return header!.split(';')[0]!; // name=value
}

describe('cookieValues', () => {
  it('finds every value of a name, and nothing of names that only end with it', () => {
    expect(cookieValues('a=1; svc_emu_session=x; b=2; svc_emu_session="y"', SESSION_COOKIE)).toEqual(['x', 'y']);
    expect(cookieValues('my_svc_emu_session=x; svc_emu_session', SESSION_COOKIE)).toEqual([]);
    expect(cookieValues('', SESSION_COOKIE)).toEqual([]);
  });
});

describe('sessionAuthenticates (the guard, on its own)', () => {
  const ctxOf = (method: string, headers: Record<string, string>) =>
    ({ method, get: (name: string) => headers[name.toLowerCase()] ?? '' }) as unknown as Context;

  it('accepts the current cookie from the GUI’s own page or a typed URL, and nothing else', async () => {
    const session = await GuiSession.open(await newDir());
    const good = `${SESSION_COOKIE}=${session.cookieValue}`;
    expect(sessionAuthenticates(ctxOf('GET', { cookie: good }), session)).toBe(true); // no Sec-Fetch-*: not a browser
    expect(sessionAuthenticates(ctxOf('GET', { cookie: good, 'sec-fetch-site': 'same-origin' }), session)).toBe(true);
    expect(sessionAuthenticates(ctxOf('GET', { cookie: good, 'sec-fetch-site': 'none' }), session)).toBe(true);
    expect(sessionAuthenticates(ctxOf('POST', { cookie: good, origin: 'http://127.0.0.1:7070' }), session)).toBe(true);
    expect(sessionAuthenticates(ctxOf('GET', {}), session)).toBe(false);
    expect(sessionAuthenticates(ctxOf('GET', { cookie: `${SESSION_COOKIE}=x; other=${session.cookieValue}` }), session)).toBe(false);
    for (const site of ['same-site', 'cross-site']) {
      expect(() => sessionAuthenticates(ctxOf('GET', { cookie: good, 'sec-fetch-site': site }), session)).toThrow(/Sec-Fetch-Site/);
    }
    expect(() => sessionAuthenticates(ctxOf('DELETE', { cookie: good }), session)).toThrow(/Origin/);
    // A stale cookie is not an error (the caller answers 401): only a current one from the wrong place is refused.
    expect(sessionAuthenticates(ctxOf('POST', { cookie: `${SESSION_COOKIE}=stale`, 'sec-fetch-site': 'cross-site' }), session)).toBe(false);
    const before = session.cookieValue;
    await session.rotate();
    expect(sessionAuthenticates(ctxOf('GET', { cookie: good }), session)).toBe(false);
    expect(session.cookieValue).not.toBe(before);
  });
});

describe('the GUI session secret on disk', () => {
  it('is made once, 0600, and read back the same; a damaged file is replaced', async () => {
    const dir = await newDir();
    const first = await loadOrCreateGuiSecret(dir);
    const again = await loadOrCreateGuiSecret(dir);
    expect(again.equals(first)).toBe(true);
    expect((await stat(join(dir, GUI_SECRET_FILE))).mode & 0o777).toBe(0o600);
    await writeFile(join(dir, GUI_SECRET_FILE), 'garbage', { mode: 0o644 });
    const fresh = await loadOrCreateGuiSecret(dir);
    expect(fresh.equals(first)).toBe(false);
    expect((await stat(join(dir, GUI_SECRET_FILE))).mode & 0o777).toBe(0o600);
  });
});

describe('sign in once (a real core)', () => {
  let core: TestCore;
  /** Signs in (the tests run in any order, so each one signs in itself). */
  const signIn = async () => cookieOf(await raw(`${core.url}/?token=${core.admin}`));
  beforeAll(async () => {
    core = await startTestCore({ keepDir: true });
  });
  afterAll(async () => {
    await core?.stop();
    if (core) await rm(core.dataDir, { recursive: true, force: true });
  });

  it('?token= on a GUI path answers 303 to the same URL without it, with the session cookie and its flags', async () => {
    const res = await raw(`${core.url}/?token=${core.admin}`);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const header = res.headers.get('set-cookie')!;
    const attrs = header.split(';').map((p) => p.trim());
    expect(attrs[0]).toMatch(new RegExp(`^${SESSION_COOKIE}=[A-Za-z0-9_-]{43}$`));
    expect(attrs).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Path=/', `Max-Age=${SESSION_MAX_AGE_S}`]));
    expect(attrs).not.toContain('Secure'); // plain http: a Secure cookie would never be sent back
    // Deep links keep their path and other parameters; a doubled slash cannot make it another site.
    const deep = await raw(`${core.url}/some/page?tab=runs&token=${core.admin}&x=1`);
    expect(deep.status).toBe(303);
    expect(deep.headers.get('location')).toBe('/some/page?tab=runs&x=1');
    const sneaky = await raw(`${core.url}//evil.example/?token=${core.admin}`);
    expect(sneaky.headers.get('location')).toBe('/evil.example/');
  });

  it('a token that is not this run’s admin token sets nothing (the GUI says so)', async () => {
    const res = await raw(`${core.url}/?token=emu_wrong`);
    expect(res.status).not.toBe(303);
    expect(res.headers.get('set-cookie')).toBeNull();
  });

  it('the cookie authenticates /_emu like the admin token, and never /v1', async () => {
    const cookie = await signIn();
    const info = await raw(`${core.url}/_emu/info`, { headers: { cookie } });
    expect(info.status).toBe(200);
    const session = await raw(`${core.url}/_emu/gui-session`, { headers: { cookie, 'sec-fetch-site': 'same-origin' } });
    expect(await session.json()).toEqual({ signed_in: true, via: 'cookie', admin_token: core.admin });
    // Asked without a session (the GUI's first question): a plain no, not a 401.
    const none = await raw(`${core.url}/_emu/gui-session`);
    expect([none.status, await none.json()]).toEqual([200, { signed_in: false, via: null, admin_token: null }]);
    const stale = await raw(`${core.url}/_emu/gui-session`, { headers: { cookie: `${SESSION_COOKIE}=forged` } });
    expect(await stale.json()).toMatchObject({ signed_in: false });
    expect((await raw(`${core.url}/_emu/info`)).status).toBe(401);
    expect((await raw(`${core.url}/_emu/info`, { headers: { cookie: `${SESSION_COOKIE}=forged` } })).status).toBe(401);
    const v1 = await raw(`${core.url}/v1/snippets`, { headers: { cookie } });
    expect(v1.status).toBe(401);
  });

  it('refuses the cookie from another site, another port of this host, or a change without an Origin', async () => {
    const cookie = await signIn();
    const port = new URL(core.url).port;
    const foreign = await raw(`${core.url}/_emu/info`, { headers: { cookie, origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { code: string }).code).toBe('forbidden_origin');
    const otherPort = await raw(`${core.url}/_emu/info`, { headers: { cookie, origin: `http://127.0.0.1:${Number(port) + 1}` } });
    expect(otherPort.status).toBe(403);
    // No-CORS requests from a page on another port carry no Origin, but Sec-Fetch-Site says same-site.
    const sameSite = await raw(`${core.url}/_emu/info`, { headers: { cookie, 'sec-fetch-site': 'same-site' } });
    expect(sameSite.status).toBe(403);
    const noOrigin = await raw(`${core.url}/_emu/gui-session/rotate`, { method: 'POST', headers: { cookie } });
    expect(noOrigin.status).toBe(403);
    expect(((await noOrigin.json()) as { detail: string }).detail).toMatch(/Origin/);
  });

  it('rotation signs every browser out at once and answers the sign-in URL; the new one works', async () => {
    const cookie = await signIn();
    const res = await raw(`${core.url}/_emu/gui-session/rotate`, { method: 'POST', headers: { cookie, origin: core.url } });
    expect(res.status).toBe(200);
    const { sign_in_url } = (await res.json()) as { sign_in_url: string };
    expect(sign_in_url).toBe(`${core.url}/?token=${core.admin}`);
    expect((await raw(`${core.url}/_emu/info`, { headers: { cookie } })).status).toBe(401);
    const again = await raw(sign_in_url);
    const fresh = cookieOf(again);
    expect(fresh).not.toBe(cookie);
    expect((await raw(`${core.url}/_emu/info`, { headers: { cookie: fresh } })).status).toBe(200);
  });

  it('the secret is a 0600 file of its own, never in db.json, and the cookie survives a restart', async () => {
    const cookie = await signIn();
    const secretFile = join(core.dataDir, GUI_SECRET_FILE);
    expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
    const secret = await loadOrCreateGuiSecret(core.dataDir);
    expect(`${SESSION_COOKIE}=${sessionCookieValue(secret)}`).toBe(cookie);
    const db = await readFile(join(core.dataDir, 'db.json'), 'utf8');
    expect(db).not.toContain(cookie.split('=')[1]);
    expect(db).not.toContain((await readFile(secretFile, 'utf8')).trim());
    const dataDir = core.dataDir;
    const oldAdmin = core.admin;
    await core.stop();
    core = await startTestCore({ dataDir });
    expect(core.admin).not.toBe(oldAdmin); // a new admin token…
    expect((await raw(`${core.url}/_emu/info`, { headers: { cookie } })).status).toBe(200); // …the same session
    expect(core.emu.guiCookie()).toEqual({ name: SESSION_COOKIE, value: cookie.split('=')[1] });
  });
});
