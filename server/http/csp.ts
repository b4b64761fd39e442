import { randomBytes } from 'node:crypto';

/**
 * The GUI's Content Security Policy: scripts and styles from the core's origin only, no 'unsafe-inline'.
 * Two libraries of the GUI create <style> elements at run time (CodeMirror's style-mod, xterm.js's DOM
 * renderer), which a policy without 'unsafe-inline' blocks; they are let through by a nonce that is new
 * for every index.html the core serves: the build leaves {@link CSP_NONCE_PLACEHOLDER} in index.html
 * (Vite's `html.cspNonce`, electron.vite.config.ts, and renderer/index.html's own meta policy), the core
 * replaces it (server/http/static-gui.ts), and the renderer stamps it on the <style> elements it creates
 * (renderer/src/csp-nonce.ts). Inline `style="…"` attributes and parser-made <style> stay blocked.
 */
export const CSP_NONCE_PLACEHOLDER = 'SVC_EMU_CSP_NONCE';

/** 144 random bits, base64: a fresh nonce for one response. */
export const newCspNonce = (): string => randomBytes(18).toString('base64');

/** The policy sent as a header with the GUI (`frame-ancestors` only works as a header). */
export function guiCsp(nonce: string | null): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    `style-src 'self'${nonce ? ` 'nonce-${nonce}'` : ''}`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** index.html with this response's nonce in place of the build's placeholder. */
export const withNonce = (html: string, nonce: string): string => html.split(CSP_NONCE_PLACEHOLDER).join(nonce);
