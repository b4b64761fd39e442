// The GUI runs under a Content Security Policy without 'unsafe-inline' (server/http/csp.ts). CodeMirror and
// xterm.js create <style> elements at run time, which that policy blocks unless they carry the nonce the
// core put into this index.html. Neither library takes a nonce for all of its elements (xterm.js takes none),
// so the document's createElement stamps it on every <style> it creates, before the element is inserted:
// the one call both libraries share. Parser-made <style> and style="…" attributes stay blocked.

/** The nonce of this page (Vite's `<meta property="csp-nonce">`), or null when the page has none. */
export function pageNonce(doc: Document): string | null {
  const meta = doc.querySelector<HTMLMetaElement>('meta[property="csp-nonce"]');
  // Browsers hide a nonce attribute from the DOM once a header policy applies: the property keeps it.
  const nonce = meta?.nonce || meta?.getAttribute('nonce') || '';
  return /^[A-Za-z0-9+/=_-]{16,}$/.test(nonce) ? nonce : null;
}

/** From now on every <style> created through `doc.createElement` carries `nonce`. */
export function stampStyleNonces(doc: Document, nonce: string): void {
  const create: (tagName: string, options?: ElementCreationOptions) => HTMLElement = doc.createElement.bind(doc);
  doc.createElement = function createElement(tagName: string, options?: ElementCreationOptions): HTMLElement {
    const element = create(tagName, options);
    if (element.localName === 'style') element.setAttribute('nonce', nonce);
    return element;
  };
}
