// One terminal on screen: an xterm.js bound to a session of the core. Its output arrives as SSE (the
// scrollback first, so coming back to a terminal shows what it printed), keystrokes go to the input
// route (coalesced, in order), and the pty follows the box's size (fit addon → resize route).
import { useEffect, useRef, useState } from 'react';
import { Terminal as XTerm } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import '@xterm/xterm/css/xterm.css';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { ProblemNotice } from '../ui/kit';
import { InputQueue } from './terminal-input';
import { DARK_QUERY, TERMINAL_FONT, themeFor } from './terminal-theme';
import { describeExit, type TerminalExit, type TerminalSession } from './terminal-data';

type Conn = 'connecting' | 'open' | 'ended' | 'lost';

/** A refusal because the terminal has just exited: the exit event says so, not an error notice. */
const exitedMeanwhile = (err: unknown) => err instanceof ProblemError && err.code === 'terminal_exited';

export function TermView({
  session,
  label,
  autoFocus,
  onExit,
  onResize,
  onLeave,
}: {
  session: TerminalSession;
  label: string;
  autoFocus: boolean;
  onExit: (exit: TerminalExit) => void;
  /** Shift+Escape in the terminal: focus goes back to the page (Tab itself belongs to the shell). */
  onLeave: () => void;
  /** The pty took a new size. */
  onResize: (size: { cols: number; rows: number }) => void;
}) {
  const { api } = useApp();
  const box = useRef<HTMLDivElement>(null);
  const [conn, setConn] = useState<Conn>('connecting');
  const [problem, setProblem] = useState<unknown>(null);
  const [attempt, setAttempt] = useState(0);
  // What the effect reads once per connection, without reconnecting whenever the list is polled.
  const latest = useRef({ session, onExit, onResize, onLeave, autoFocus });
  latest.current = { session, onExit, onResize, onLeave, autoFocus };

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const initial = latest.current.session;
    const params = { id: initial.id };
    const scheme = window.matchMedia(DARK_QUERY);
    const token = (name: string) => getComputedStyle(document.documentElement).getPropertyValue(name);
    const term = new XTerm({
      fontFamily: TERMINAL_FONT,
      fontSize: 13,
      lineHeight: 1.15,
      cursorBlink: true,
      scrollback: 5000,
      theme: themeFor(scheme.matches, token),
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    let exited = initial.status === 'exited';
    let disposed = false;

    const queue = new InputQueue(
      async (data) => {
        await api.client.call(operations.emuTerminalInput, { params, body: { data } });
      },
      (err) => !exitedMeanwhile(err) && setProblem(err),
    );
    if (exited) {
      queue.close();
      term.options.disableStdin = true;
    }
    const typed = term.onData((data) => queue.push(data));
    // Keyboard users are never trapped: Tab goes to the shell (completion), Shift+Escape leaves.
    term.attachCustomKeyEventHandler((e) => {
      if (e.key !== 'Escape' || !e.shiftKey) return true;
      if (e.type === 'keydown') latest.current.onLeave();
      return false;
    });

    // The size: the box decides (fit addon); the pty is told once the size settles.
    let sent = { cols: initial.cols, rows: initial.rows };
    let resizeTimer: number | undefined;
    const sendSize = () => {
      if (exited || disposed || (term.cols === sent.cols && term.rows === sent.rows)) return;
      const size = { cols: term.cols, rows: term.rows };
      sent = size;
      api.client.call(operations.emuResizeTerminal, { params, body: size }).then(
        () => !disposed && latest.current.onResize(size),
        (err: unknown) => !exitedMeanwhile(err) && setProblem(err),
      );
    };
    const resized = term.onResize(() => {
      window.clearTimeout(resizeTimer);
      resizeTimer = window.setTimeout(sendSize, 60);
    });
    let frame = 0;
    const refit = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        if (!disposed && el.clientWidth > 0 && el.clientHeight > 0) fit.fit();
      });
    };
    const observer = new ResizeObserver(refit);
    observer.observe(el);
    if (el.clientWidth > 0 && el.clientHeight > 0) fit.fit();
    sendSize();

    const onScheme = (e: MediaQueryListEvent) => {
      term.options.theme = themeFor(e.matches, token);
    };
    scheme.addEventListener('change', onScheme);

    const ac = new AbortController();
    setConn('connecting');
    setProblem(null);
    void (async () => {
      try {
        // An error answer throws ProblemError (its code and detail shown below the terminal).
        const events = await api.client.stream(operations.emuTerminalOutput, { params, signal: ac.signal });
        setConn('open');
        for await (const e of events) {
          if (e.event === 'output') term.write(e.data.data);
          else if (e.event === 'exit') {
            const exit: TerminalExit = e.data;
            exited = true;
            queue.close();
            term.options.disableStdin = true;
            term.write(`\r\n\x1b[2m[${describeExit(exit)}]\x1b[0m\r\n\x1b[?25l`); // and no cursor: nothing more can be typed
            latest.current.onExit(exit);
          }
        }
        if (!ac.signal.aborted) setConn(exited ? 'ended' : 'lost');
      } catch (err) {
        if (ac.signal.aborted) return;
        setConn('lost');
        setProblem(err);
      }
    })();
    if (latest.current.autoFocus) term.focus();

    return () => {
      disposed = true;
      ac.abort();
      queue.close();
      typed.dispose();
      resized.dispose();
      observer.disconnect();
      cancelAnimationFrame(frame);
      window.clearTimeout(resizeTimer);
      scheme.removeEventListener('change', onScheme);
      term.dispose();
    };
  }, [api, session.id, attempt]);

  return (
    <div className="term-view">
      {conn === 'lost' && (
        <div className="notice term-lost" role="alert" data-testid="term-lost">
          <span>
            <strong>Disconnected from this terminal.</strong> It may still be running.
          </span>
          <button type="button" className="op-btn op-small" onClick={() => setAttempt((a) => a + 1)}>
            Reconnect
          </button>
        </div>
      )}
      {problem !== null && <ProblemNotice error={problem} title={conn === 'lost' ? 'Why' : 'The terminal did not take that'} />}
      <div
        ref={box}
        className="term-screen"
        data-testid="term-screen"
        data-conn={conn}
        role="group"
        aria-label={label}
        aria-describedby="term-keys"
      />
      <p className="term-keys muted" id="term-keys">
        <kbd>Tab</kbd> completes in the shell · <kbd>Shift</kbd>+<kbd>Esc</kbd> leaves the terminal
      </p>
    </div>
  );
}
