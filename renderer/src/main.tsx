// The GUI: signed in by the core's session cookie (renderer/src/session.ts), then the pages of
// pages/registry.tsx in a sidebar layout, on hash routes. It talks to the core over HTTP only.
// Keyboard: a "Skip to content" link first, focus on the new page's h1 after every page switch, `g`
// shortcuts and a `?` overlay (ui/shortcuts.tsx). Narrow windows get a top bar with a menu button.
import './zod-jitless'; // first: before any contract schema is built
import { StrictMode, Suspense, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import './styles.css'; // first: the pages' own CSS, imported below, wins ties with the shell's
import { dropRejectedToken, fetchInfo, isSignedIn, signInThroughBridge, type EmulatorInfo } from './session';
import { pageNonce, stampStyleNonces } from './csp-nonce';
import { createApi } from './api';
import { AppProviders, LiveIndicator } from './live-react';
import { href, navigate, useRoute } from './router';
import { PAGES } from './pages/registry';
import { EgressModeBadge } from './pages/egress-mode';
import { EmptyState, Loading } from './ui/kit';
import { goShortcuts, ShortcutsHelp, useShortcuts } from './ui/shortcuts';

type State =
  | { kind: 'loading' }
  | { kind: 'signed-out'; staleLink: boolean }
  | { kind: 'error'; message: string }
  | { kind: 'ok'; info: EmulatorInfo };

function App() {
  const [state, setState] = useState<State>({ kind: 'loading' });

  useEffect(() => {
    let live = true;
    void (async () => {
      // A `?token=` still here is one the core did not take (it redirects a good one away).
      const staleLink = dropRejectedToken({ location: window.location, history: window.history });
      // Asked first, so a browser that is not signed in sees the sign-in page without a failed request.
      const result = (await isSignedIn()) === false ? ({ kind: 'rejected' } as const) : await fetchInfo();
      if (!live) return;
      if (result.kind === 'rejected') {
        // The desktop app, signed out while it ran (a rotation): its bridge signs it in again.
        const replaced = await signInThroughBridge(window.svcEmu, { location: window.location, storage: window.sessionStorage });
        if (live && !replaced) setState({ kind: 'signed-out', staleLink });
      } else setState(result);
    })();
    return () => {
      live = false;
    };
  }, []);

  if (state.kind === 'ok') return <Shell info={state.info} />;
  return (
    <main>
      <header>
        <h1>Snippet Emulator</h1>
      </header>
      {state.kind === 'loading' && <Loading label="Connecting…" />}
      {state.kind === 'signed-out' && (
        <section className="notice" role="alert" data-testid="sign-in">
          <h2>Sign in</h2>
          {state.staleLink && <p>That link’s admin token is not this run’s: the admin token changes every time the emulator starts.</p>}
          <p>
            Open the URL that <code>npm start</code> (or <code>svc-emu serve</code>) printed, which carries the admin token as{' '}
            <code>?token=…</code>. It signs this browser in once: every tab, bookmarks and later starts stay signed in.
          </p>
          <p>
            Lost it, or signed out? Run <code>svc-emu gui-token rotate</code>: it prints a new sign-in URL (and signs every other browser
            out).
          </p>
        </section>
      )}
      {state.kind === 'error' && (
        <section className="notice" role="alert">
          <h2>Cannot reach the emulator</h2>
          <p>{state.message}</p>
        </section>
      )}
    </main>
  );
}

/** The signed-in app: a sidebar of pages and the page the hash route names. */
function Shell({ info }: { info: EmulatorInfo }) {
  const api = useMemo(() => createApi({ key: info.localApiKey }), [info.localApiKey]);
  const route = useRoute();
  const def = PAGES.find((p) => p.page === route.page);
  const Page = def?.component;
  const active = route.page === 'snippet' ? 'snippets' : route.page === 'invocation' ? 'invocations' : route.page;
  const pageKey = route.page + '/' + route.params.join('/');
  const main = useRef<HTMLElement>(null);
  const menuButton = useRef<HTMLButtonElement>(null);
  const [menuOpen, setMenuOpen] = useState(false);
  const [helpOpen, setHelpOpen] = useState(false);
  const shortcuts = useMemo(() => goShortcuts(PAGES), []);

  // A page switch: back to the top, the menu closed, and focus on the new page's h1 once it shows.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    setMenuOpen(false);
    window.scrollTo(0, 0);
    return main.current ? focusHeading(main.current) : undefined;
  }, [pageKey]);

  const go = useCallback((page: string) => {
    const target = href(...(page ? [page] : []));
    if (window.location.hash.split('?')[0] === target || (!page && window.location.hash === '')) {
      if (main.current) focusHeading(main.current); // already there: land on its heading
    } else navigate(...(page ? [page] : []));
  }, []);
  const toggleHelp = useCallback(() => setHelpOpen((o) => !o), []);
  useShortcuts({ shortcuts, go, toggleHelp });

  return (
    <AppProviders value={{ api, info }}>
      <a
        className="skip-link"
        href="#content"
        onClick={(e) => {
          e.preventDefault();
          if (main.current) focusHeading(main.current, true);
        }}
      >
        Skip to content
      </a>
      <div className="shell">
        <nav
          className="sidebar"
          aria-label="Pages"
          data-open={menuOpen}
          onKeyDown={(e) => {
            if (e.key === 'Escape' && menuOpen) {
              setMenuOpen(false);
              menuButton.current?.focus();
            }
          }}
        >
          <div className="sidebar-top">
            <a className="brand" href={href()}>
              Snippet Emulator
            </a>
            <LiveIndicator />
            <EgressModeBadge />
            <button
              ref={menuButton}
              type="button"
              className="menu-button"
              aria-expanded={menuOpen}
              aria-controls="nav-pages"
              data-testid="menu-button"
              onClick={() => setMenuOpen((o) => !o)}
            >
              <span className="menu-icon" aria-hidden="true" />
              Menu
            </button>
          </div>
          <ul id="nav-pages">
            {PAGES.filter((p) => p.nav).map((p) => (
              <li key={p.page}>
                <a href={href(...(p.page ? [p.page] : []))} aria-current={active === p.page ? 'page' : undefined}>
                  {p.nav}
                </a>
              </li>
            ))}
          </ul>
          <div className="sidebar-foot">
            <button type="button" className="shortcuts-button" onClick={() => setHelpOpen(true)} aria-haspopup="dialog">
              Keyboard shortcuts <kbd>?</kbd>
            </button>
          </div>
        </nav>
        <main className="content" id="content" ref={main} tabIndex={-1}>
          {Page ? (
            <Suspense fallback={<Loading />}>
              <Page key={pageKey} params={route.params} />
            </Suspense>
          ) : (
            <EmptyState title="No such page">
              <a href={href()}>Back to the overview</a>
            </EmptyState>
          )}
        </main>
      </div>
      <ShortcutsHelp open={helpOpen} onClose={() => setHelpOpen(false)} shortcuts={shortcuts} />
    </AppProviders>
  );
}

/**
 * Focuses the page's h1 (made focusable with tabindex=-1) as soon as it shows: pages that load first
 * render it a moment later. Leaves focus alone if the user has meanwhile moved into the page. With
 * `orMain`, focuses the main region itself when the page has no h1 yet. Returns a cancel function.
 */
function focusHeading(region: HTMLElement, orMain = false): () => void {
  const started = document.activeElement;
  const attempt = (): boolean => {
    const active = document.activeElement;
    if (active && active !== started && active !== document.body && active !== region && region.contains(active)) return true; // the user got there first
    const h1 = region.querySelector('h1');
    if (!h1) return false;
    if (!h1.hasAttribute('tabindex')) h1.setAttribute('tabindex', '-1');
    h1.focus({ preventScroll: true });
    return true;
  };
  if (attempt()) return () => {};
  if (orMain) region.focus({ preventScroll: true });
  const observer = new MutationObserver(() => {
    if (attempt()) stop();
  });
  const timer = window.setTimeout(() => stop(), 5000);
  function stop() {
    observer.disconnect();
    window.clearTimeout(timer);
  }
  observer.observe(region, { childList: true, subtree: true });
  return stop;
}

// Before anything renders: the <style> elements CodeMirror and xterm.js create need this page's CSP nonce.
const nonce = pageNonce(document);
if (nonce) stampStyleNonces(document, nonce);

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
