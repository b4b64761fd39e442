// The GUI: signs in with the admin token (URL, desktop bridge or session), then the pages of
// pages/registry.tsx in a sidebar layout, on hash routes. It talks to the core over HTTP only.
import { StrictMode, useEffect, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';
import './styles.css'; // first: the pages' own CSS, imported below, wins ties with the shell's
import { acquireToken, fetchInfo, TOKEN_STORAGE_KEY, type EmulatorInfo } from './session';
import { createApi } from './api';
import { Ctx } from './context';
import { href, useRoute } from './router';
import { PAGES } from './pages/registry';
import { EmptyState } from './ui/kit';

type State =
  | { kind: 'loading' }
  | { kind: 'no-token' }
  | { kind: 'rejected' }
  | { kind: 'error'; message: string }
  | { kind: 'ok'; info: EmulatorInfo; token: string };

const HINT = (
  <p>
    Open the URL printed by <code>npm start</code>, which carries <code>?token=…</code>
  </p>
);

function App() {
  const [state, setState] = useState<State>({ kind: 'loading' });

  useEffect(() => {
    let live = true;
    void (async () => {
      const token = await acquireToken({ location: window.location, history: window.history, storage: window.sessionStorage, bridge: window.svcEmu });
      if (!token) {
        if (live) setState({ kind: 'no-token' });
        return;
      }
      const result = await fetchInfo(token);
      if (!live) return;
      if (result.kind === 'rejected') {
        window.sessionStorage.removeItem(TOKEN_STORAGE_KEY);
        setState({ kind: 'rejected' });
      } else if (result.kind === 'ok') setState({ ...result, token });
      else setState(result);
    })();
    return () => {
      live = false;
    };
  }, []);

  if (state.kind === 'ok') return <Shell info={state.info} token={state.token} />;
  return (
    <main>
      <header>
        <h1>Snippet Emulator</h1>
      </header>
      {state.kind === 'loading' && <p className="muted">Connecting…</p>}
      {state.kind === 'no-token' && (
        <section className="notice" role="alert">
          <h2>No admin token</h2>
          {HINT}
        </section>
      )}
      {state.kind === 'rejected' && (
        <section className="notice" role="alert">
          <h2>The admin token was rejected</h2>
          {HINT}
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
function Shell({ info, token }: { info: EmulatorInfo; token: string }) {
  const api = useMemo(() => createApi({ token, key: info.localApiKey }), [token, info.localApiKey]);
  const route = useRoute();
  const def = PAGES.find((p) => p.page === route.page);
  const Page = def?.component;
  const active = route.page === 'snippet' ? 'snippets' : route.page === 'invocation' ? 'invocations' : route.page;
  return (
    <Ctx.Provider value={{ api, info }}>
      <div className="shell">
        <nav className="sidebar" aria-label="Pages">
          <a className="brand" href={href()}>
            Snippet Emulator
          </a>
          <ul>
            {PAGES.filter((p) => p.nav).map((p) => (
              <li key={p.page}>
                <a href={href(...(p.page ? [p.page] : []))} aria-current={active === p.page ? 'page' : undefined}>
                  {p.nav}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main className="content">
          {Page ? (
            <Page key={route.page + route.params.join('/')} params={route.params} />
          ) : (
            <EmptyState title="No such page">
              <a href={href()}>Back to the overview</a>
            </EmptyState>
          )}
        </main>
      </div>
    </Ctx.Provider>
  );
}

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
