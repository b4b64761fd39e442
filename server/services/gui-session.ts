import { secretEquals } from '../ids';
import { loadOrCreateGuiSecret, sessionCookieValue, writeNewGuiSecret } from '../storage/gui-secret';

/**
 * The GUI's session: the cookie's value, derived from the data dir's secret (server/storage/gui-secret.ts), and
 * its rotation (`svc-emu gui-token rotate`). How a request signs in with it and is checked is the HTTP edge's (server/http/gui-session.ts).
 */
export const SESSION_COOKIE = 'svc_emu_session';
/** 400 days: the longest lifetime browsers keep (Chrome caps Max-Age there). */
export const SESSION_MAX_AGE_S = 400 * 24 * 60 * 60;

export class GuiSession {
  private value: string;

  private constructor(
    private readonly dataDir: string,
    secret: Buffer,
  ) {
    this.value = sessionCookieValue(secret);
  }

  /** The data dir's session (its secret made on the first start). */
  static async open(dataDir: string): Promise<GuiSession> {
    return new GuiSession(dataDir, await loadOrCreateGuiSecret(dataDir));
  }

  /** The cookie's current value (the desktop app sets it on its window's session). */
  get cookieValue(): string {
    return this.value;
  }

  accepts(value: string): boolean {
    return secretEquals(value, this.value);
  }

  /** A new secret, on disk and here at once: every browser signed in so far is signed out. */
  async rotate(): Promise<void> {
    this.value = sessionCookieValue(await writeNewGuiSecret(this.dataDir));
  }

  setCookie(secure: boolean): string {
    return `${SESSION_COOKIE}=${this.value}; Path=/; Max-Age=${SESSION_MAX_AGE_S}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
  }
}
