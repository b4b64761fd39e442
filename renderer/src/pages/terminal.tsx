// The Terminal page: real shells of the core's machine in the GUI (xterm.js over the core's ptys). A
// shell in the workspace (with SVC_EMU_URL and SVC_EMU_DATA_DIR set, so `svc-emu` in it talks to this
// emulator) or in the Lima VM where there is one. Shells outlive the page: coming back reconnects and
// replays what they printed. One tab per shell; the shown one holds the only output connection.
import { useCallback, useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { EmptyState, Loading, PageHeader, ProblemNotice } from '../ui/kit';
import { baseName, describeExit, type TerminalExit, type TerminalList, type TerminalSession, type TerminalTarget } from './terminal-data';
import { TermView } from './terminal-view';
import './operator.css';
import './terminal.css';
import { useLiveRefresh } from '../live-react';

const SELECTED_KEY = 'svc-emu.terminal.selected';

const targetName = (t: TerminalTarget) => (t === 'vm' ? 'VM' : 'Workspace');

function remembered(): string | null {
  try {
    return window.sessionStorage.getItem(SELECTED_KEY);
  } catch {
    return null;
  }
}
function remember(id: string | null) {
  try {
    if (id) window.sessionStorage.setItem(SELECTED_KEY, id);
    else window.sessionStorage.removeItem(SELECTED_KEY);
  } catch {
    /* storage refused: selection is kept for this visit only */
  }
}

export function Terminal(_props: { params: string[] }) {
  const { api, info } = useApp();
  const [list, setList] = useState<TerminalList | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [selected, setSelected] = useState<string | null>(remembered);
  const [busy, setBusy] = useState<TerminalTarget | 'close' | null>(null);
  // Focus the terminal when the user chose it (a new shell, a tab), not on arriving at the page.
  const [focusId, setFocusId] = useState<string | null>(null);
  const tabs = useRef<HTMLDivElement>(null);

  const load = useCallback(async () => {
    try {
      setList(await api.client.call(operations.emuListTerminals));
      setLoadError(null);
    } catch (err) {
      setLoadError(err);
    }
  }, [api]);

  useEffect(() => {
    void load();
  }, [load]);
  // Shells opened in another tab, exited or closed: the live feed says so (no polling).
  useLiveRefresh(load, ['terminal.changed']);

  const sessions = list?.data ?? [];
  const shown = sessions.find((s) => s.id === selected) ?? sessions.at(-1) ?? null;
  useEffect(() => {
    if (list) remember(shown?.id ?? null);
  }, [list, shown?.id]);

  const select = (id: string) => {
    setSelected(id);
    setFocusId(id);
  };

  async function openShell(target: TerminalTarget) {
    setBusy(target);
    setActionError(null);
    try {
      const r = await api.client.call(operations.emuOpenTerminal, { body: { target } });
      setList((l) => (l ? { ...l, data: [...l.data.filter((s) => s.id !== r.id), r] } : l));
      select(r.id);
    } catch (err) {
      setActionError(err);
    } finally {
      setBusy(null);
    }
  }

  async function close(s: TerminalSession) {
    setBusy('close');
    setActionError(null);
    const i = sessions.findIndex((x) => x.id === s.id);
    const next = sessions[i + 1] ?? sessions[i - 1] ?? null;
    try {
      await api.client.call(operations.emuCloseTerminal, { params: { id: s.id } });
    } catch (err) {
      if (!(err instanceof ProblemError && err.status === 404)) setActionError(err); // already gone: fine
    } finally {
      setBusy(null);
    }
    setList((l) => (l ? { ...l, data: l.data.filter((x) => x.id !== s.id) } : l));
    setSelected(next?.id ?? null);
    if (next) setFocusId(next.id);
  }

  const onExit = useCallback((id: string, exit: TerminalExit) => {
    setList((l) =>
      l ? { ...l, data: l.data.map((s) => (s.id === id && s.status === 'running' ? { ...s, ...exit, status: 'exited' } : s)) } : l,
    );
  }, []);
  const onResize = useCallback((id: string, size: { cols: number; rows: number }) => {
    setList((l) => (l ? { ...l, data: l.data.map((s) => (s.id === id ? { ...s, ...size } : s)) } : l));
  }, []);

  // Arrow keys move along the tabs (the tablist pattern); Home and End go to the ends.
  const onTabKey = (e: KeyboardEvent<HTMLDivElement>) => {
    if (!shown) return;
    const i = sessions.findIndex((s) => s.id === shown.id);
    const to =
      e.key === 'ArrowRight' ? i + 1 : e.key === 'ArrowLeft' ? i - 1 : e.key === 'Home' ? 0 : e.key === 'End' ? sessions.length - 1 : null;
    if (to === null) return;
    e.preventDefault();
    const target = sessions[(to + sessions.length) % sessions.length];
    if (!target) return;
    setSelected(target.id);
    tabs.current?.querySelector<HTMLButtonElement>(`[data-id="${target.id}"]`)?.focus();
  };

  if (loadError !== null && !list) {
    const off = loadError instanceof ProblemError && loadError.code === 'terminal_disabled';
    return (
      <div className="term-page">
        <PageHeader title="Terminal" />
        <ProblemNotice error={loadError} title={off ? 'Terminals are off on this emulator' : 'Could not load the terminals'} />
      </div>
    );
  }
  if (!list) {
    return (
      <div className="term-page">
        <PageHeader title="Terminal" />
        <Loading />
      </div>
    );
  }

  const running = sessions.filter((s) => s.status === 'running').length;
  const full = running >= list.max_live;
  const vm = list.targets.vm;
  const where = info.workspace ?? info.dataDir;
  const labels = new Map(sessions.map((s, i) => [s.id, `${targetName(s.target)} ${i + 1}`]));

  return (
    <div className="term-page">
      <PageHeader title="Terminal">
        <button
          type="button"
          className="op-btn op-primary"
          data-testid="open-workspace"
          disabled={busy !== null || full || !list.targets.workspace.available}
          onClick={() => void openShell('workspace')}
        >
          {busy === 'workspace' ? 'Opening…' : 'New workspace shell'}
        </button>
        <button
          type="button"
          className="op-btn"
          data-testid="open-vm"
          disabled={busy !== null || full || !vm.available}
          aria-describedby={vm.available ? undefined : 'term-vm-reason'}
          onClick={() => void openShell('vm')}
        >
          {busy === 'vm' ? 'Opening…' : 'New VM shell'}
        </button>
      </PageHeader>
      <p className="op-intro term-intro">
        A shell on the emulator’s machine, in <code>{where}</code>, with <code>SVC_EMU_URL</code> and <code>SVC_EMU_DATA_DIR</code> set so{' '}
        <code>npx svc-emu …</code> in it talks to this emulator. Shells keep running when you leave this page and end when you close them or
        the emulator stops.
      </p>
      {!vm.available && vm.reason && (
        <p className="term-note" id="term-vm-reason" data-testid="vm-reason">
          <strong>No VM shell:</strong> {vm.reason}.
        </p>
      )}
      {full && (
        <p className="term-note" data-testid="term-full">
          {list.max_live} shells are running: close one to open another.
        </p>
      )}
      {actionError !== null && <ProblemNotice error={actionError} title="That did not work" />}

      {sessions.length === 0 ? (
        <EmptyState title="No shells open">
          <p>Open a workspace shell to run commands beside the emulator: the CLI, git, your editor’s tools.</p>
        </EmptyState>
      ) : (
        <div className="term-frame">
          <div className="term-tabs" role="tablist" aria-label="Open shells" ref={tabs} onKeyDown={onTabKey} data-testid="term-tabs">
            {sessions.map((s) => {
              const on = s.id === shown?.id;
              return (
                <button
                  key={s.id}
                  type="button"
                  role="tab"
                  id={`term-tab-${s.id}`}
                  data-id={s.id}
                  data-status={s.status}
                  aria-selected={on}
                  aria-controls="term-panel"
                  tabIndex={on ? 0 : -1}
                  className="term-tab"
                  onClick={() => select(s.id)}
                >
                  <span className={`term-dot term-dot-${s.status}`} aria-hidden="true" />
                  {labels.get(s.id)}
                  <span className="term-tab-sub">
                    {s.status === 'running' ? baseName(s.shell.split(' ')[0] ?? s.shell) : describeExit(s)}
                  </span>
                </button>
              );
            })}
          </div>
          {shown && (
            <div className="term-panel" role="tabpanel" id="term-panel" aria-labelledby={`term-tab-${shown.id}`}>
              <div className="term-bar">
                <span className="term-status" data-testid="term-status" data-status={shown.status}>
                  {shown.status === 'running' ? (
                    <>
                      <span className="term-live">running</span> <code>{shown.shell}</code> · pid {shown.pid} · {shown.cols}×{shown.rows}
                    </>
                  ) : (
                    <span className={shown.exit_code === 0 ? 'term-exit-ok' : 'term-exit-bad'}>{describeExit(shown)}</span>
                  )}
                </span>
                <button
                  type="button"
                  className="op-btn op-small"
                  data-testid="term-close"
                  disabled={busy === 'close'}
                  onClick={() => void close(shown)}
                >
                  {shown.status === 'running' ? 'Close (ends the shell)' : 'Close'}
                </button>
              </div>
              <TermView
                key={shown.id}
                session={shown}
                label={`${labels.get(shown.id) ?? 'Terminal'}: ${shown.shell}`}
                autoFocus={focusId === shown.id}
                onExit={(exit) => onExit(shown.id, exit)}
                onResize={(size) => onResize(shown.id, size)}
                onLeave={() => tabs.current?.querySelector<HTMLElement>('[role="tab"][aria-selected="true"]')?.focus()}
              />
            </div>
          )}
        </div>
      )}
    </div>
  );
}
