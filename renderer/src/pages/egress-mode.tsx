// The server's egress mode (live / record / replay, and the replay speed): the switch on the Egress page
// and the shell's badge, which shows whenever the mode is not `live` so a replayed demo never passes for a
// live one. Both read `GET /_emu/egress/mode` and follow the live feed's `egress.mode` (a switch from the
// CLI, the API or another tab shows at once, without polling). contract/schemas/cassette.ts says how a
// run's mode is chosen (run > snippet.json > server).
import { useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { useLiveLoad } from '../live-react';
import { href } from '../router';
import { ProblemNotice, Show } from '../ui/kit';
import './egress-mode.css';

export type EgressModeName = 'live' | 'record' | 'replay';

export const MODE_TEXT: Record<EgressModeName, { label: string; banner: string; help: string }> = {
  live: { label: 'Live', banner: 'Live egress', help: 'Outbound calls go out as usual; nothing is recorded.' },
  record: {
    label: 'Record',
    banner: 'Recording',
    help: 'Calls go out, and each call with its answer and the timing of every chunk is written to the snippet’s cassette.',
  },
  replay: {
    label: 'Replay',
    banner: 'Replaying from cassettes',
    help: 'Nothing goes out: each call is answered from the snippet’s cassette at the recorded pace; a call with no recording fails, naming the closest one.',
  },
};

/** The server's setting, kept current by the live feed. */
export function useEgressMode() {
  const { api } = useApp();
  return useLiveLoad(async () => await api.client.call(operations.emuGetEgressMode), [api], ['egress.mode']);
}

/** The shell's badge: nothing while `live`; "Recording" / "Replaying from cassettes" otherwise. */
export function EgressModeBadge() {
  const [loaded] = useEgressMode();
  if (loaded.state !== 'ok' || loaded.data.mode === 'live') return null;
  const { mode, replay_speed } = loaded.data;
  return (
    <a
      className={`egm-badge egm-${mode}`}
      href={href('egress')}
      data-testid="egress-mode-badge"
      data-mode={mode}
      role="status"
      title={`${MODE_TEXT[mode].help} Switch it on the Egress page.`}
    >
      <span className="egm-dot" aria-hidden="true" />
      {MODE_TEXT[mode].banner}
      {mode === 'replay' && replay_speed !== 1 && (
        <span className="egm-speed"> · {replay_speed === 0 ? 'no waits' : `${replay_speed}×`}</span>
      )}
    </a>
  );
}

const SPEEDS = [0, 0.5, 1, 2, 5, 10];
const MODES = ['live', 'record', 'replay'] as const;

/** The Egress page's switch: live / record / replay for every run that does not choose its own, and the replay speed. */
export function EgressModeSwitch() {
  const { api } = useApp();
  const [loaded, reload] = useEgressMode();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function set(body: { mode?: EgressModeName; replay_speed?: number }) {
    setBusy(true);
    setError(null);
    try {
      await api.client.call(operations.emuSetEgressMode, { body });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
      reload();
    }
  }

  return (
    <section className="card" aria-labelledby="egress-mode-title" data-testid="egress-mode">
      <div className="op-card-head">
        <h2 id="egress-mode-title">Record and replay</h2>
        <span className="op-hint">
          For every run that does not choose its own (the Run panel’s choice, <code>X-Emu-Egress-Mode</code>, or <code>egress.mode</code> in
          its <code>snippet.json</code>). Also <code>svc-emu serve --egress-mode</code>.
        </span>
      </div>
      <Show loaded={loaded}>
        {(s) => (
          <>
            <div
              className="egm-switch"
              role="radiogroup"
              aria-label="Server egress mode"
              onKeyDown={(e) => {
                // A radio group: one tab stop, the arrow keys move the choice (and switch).
                const step = e.key === 'ArrowRight' || e.key === 'ArrowDown' ? 1 : e.key === 'ArrowLeft' || e.key === 'ArrowUp' ? -1 : 0;
                if (!step || busy || !(e.target instanceof HTMLButtonElement)) return;
                e.preventDefault();
                const next = MODES[(MODES.indexOf(s.mode) + step + MODES.length) % MODES.length]!;
                e.currentTarget.querySelector<HTMLButtonElement>(`[data-testid="egress-mode-${next}"]`)?.focus();
                void set({ mode: next });
              }}
            >
              {MODES.map((m) => (
                <button
                  key={m}
                  type="button"
                  role="radio"
                  aria-checked={s.mode === m}
                  tabIndex={s.mode === m ? 0 : -1}
                  className={`egm-choice egm-${m}${s.mode === m ? ' egm-on' : ''}`}
                  aria-disabled={busy || undefined}
                  onClick={() => !busy && s.mode !== m && void set({ mode: m })}
                  data-testid={`egress-mode-${m}`}
                >
                  {MODE_TEXT[m].label}
                </button>
              ))}
              <label className="egm-speed-field">
                <span>Replay speed</span>
                <select
                  value={String(s.replay_speed)}
                  disabled={busy}
                  onChange={(e) => void set({ replay_speed: Number(e.target.value) })}
                  data-testid="egress-replay-speed"
                >
                  {(SPEEDS.includes(s.replay_speed) ? SPEEDS : [...SPEEDS, s.replay_speed].sort((a, b) => a - b)).map((v) => (
                    <option key={v} value={String(v)}>
                      {v === 0 ? 'no waits' : v === 1 ? '1× (as recorded)' : `${v}×`}
                    </option>
                  ))}
                </select>
              </label>
            </div>
            <p className="egm-help" data-testid="egress-mode-help">
              {MODE_TEXT[s.mode].help}
            </p>
          </>
        )}
      </Show>
      {error !== null && <ProblemNotice error={error} title="Could not switch the egress mode" />}
    </section>
  );
}
