// The executor VM (Lima, macOS) on the Parity status page: its status from GET /_emu/vm, Create / Start /
// Stop (POST /_emu/vm/{action}, which run in the background), and the running operation's log, line by line
// from the live feed (`vm.operation`), never polled. Where Lima is not used (Linux) the reason is shown
// plainly instead.
import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { ProblemNotice } from '../ui/kit';
import type { VmOperation, VmStatus } from '../types';
import { useLiveEvent } from '../live-react';
import './parity-vm.css';

type Kind = VmOperation['kind'];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const KINDS: Kind[] = ['create', 'start', 'stop'];

/** The core's answer, typed by its schema (renderer/src/types.ts); a body that is not one is shown as an error, never a crash. */
function readStatus(body: unknown): VmStatus {
  if (!isObj(body) || typeof body.available !== 'boolean' || !isObj(body.vm)) throw new Error('GET /_emu/vm answered something unexpected');
  return body as unknown as VmStatus;
}

const BADGE: Record<string, { tone: string; label: string }> = {
  Running: { tone: 'vm-running', label: 'Running' },
  Stopped: { tone: 'vm-stopped', label: 'Stopped' },
  missing: { tone: 'vm-missing', label: 'missing' },
  Broken: { tone: 'vm-broken', label: 'Broken' },
};

const GiB = 1024 ** 3;
const size = (n: number | undefined) =>
  n === undefined ? null : n >= GiB ? `${+(n / GiB).toFixed(1)} GiB` : `${Math.round(n / 1024 ** 2)} MiB`;
const VERB: Record<Kind, { label: string; doing: string; hint: string }> = {
  create: {
    label: 'Create',
    doing: 'Creating',
    hint: 'Writes the VM’s template (Debian 12, this checkout mounted read-only) and runs limactl create.',
  },
  start: {
    label: 'Start',
    doing: 'Starting',
    hint: 'Boots the VM. The first start downloads the image and installs the pinned runtimes inside: several minutes.',
  },
  stop: { label: 'Stop', doing: 'Stopping', hint: 'Shuts the VM down; snippets cannot run behind it until it starts again.' },
};

/**
 * `check`: asks limactl again whenever it changes (the page's Check again). `executorTransport`: the
 * executor's (`none` when it could not start, e.g. behind a VM that was not running then).
 */
export function ExecutorVm({
  check = 0,
  executorTransport = null,
  onExecutorChanged,
}: {
  check?: number;
  executorTransport?: string | null;
  /** An operation ended or the agent connected: the executor may be another now (the page reads it again). */
  onExecutorChanged?: () => void;
}) {
  const { api } = useApp();
  const wasRunning = useRef(false);
  const [connecting, setConnecting] = useState(false);
  const [status, setStatus] = useState<VmStatus | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [pending, setPending] = useState<Kind | null>(null);
  const [tick, setTick] = useState(0);
  const reloading = useRef(false);
  const reloadAgain = useRef(false);

  // Load; then the live feed says when an operation (from here or `svc-emu lima start`) begins, prints a
  // line (appended here, no request) or ends (read again).
  useEffect(() => {
    let live = true;
    const load = async () => {
      try {
        const s = readStatus(await api.client.call(operations.emuVmStatus));
        if (!live) return;
        setStatus(s);
        setLoadError(null);
        const running = s.operation?.state === 'running';
        if (wasRunning.current && !running) onExecutorChanged?.(); // a start connects the core to the VM
        wasRunning.current = running;
      } catch (err) {
        if (live) setLoadError(err);
      }
      if (!live) return;
      reloading.current = false;
      if (reloadAgain.current) {
        reloadAgain.current = false;
        again();
      }
    };
    void load();
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [api, tick, check]);

  const shown = useRef(status);
  shown.current = status;
  /** Reads the status again: once in flight and at most once more after it, however many events come. */
  function again() {
    if (reloading.current) {
      reloadAgain.current = true;
      return;
    }
    reloading.current = true;
    setTick((t) => t + 1);
  }
  useLiveEvent(
    ['vm.operation'],
    (e) => {
      if (e.type !== 'vm.operation') return;
      const { line, state, started_at, log_total } = e.data;
      const op = shown.current?.operation;
      // A read in flight may have been answered before this line was logged, and its answer would drop the line
      // appended here: read once more after it instead.
      if (reloading.current) return again();
      if (line !== null && state === 'running' && op?.state === 'running' && op.started_at === started_at) {
        // The operation shown printed a line: add it (the core keeps the last 500 lines; so does this view). Added
        // to the state as it is when React applies it, so two lines before a render are both kept.
        setStatus((s) => {
          const cur = s?.operation;
          if (!s || !cur || cur.state !== 'running' || cur.started_at !== started_at) return s;
          return { ...s, operation: { ...cur, log: [...cur.log, line].slice(-500), log_total } };
        });
        return;
      }
      again();
    },
    { onReset: again },
  );

  const connect = async () => {
    setConnecting(true);
    setActionError(null);
    try {
      await api.client.call(operations.emuVmConnect);
      onExecutorChanged?.();
    } catch (err) {
      setActionError(err);
    } finally {
      setConnecting(false);
    }
  };

  const act = async (kind: Kind) => {
    setPending(kind);
    setActionError(null);
    try {
      await api.client.call({ create: operations.emuVmCreate, start: operations.emuVmStart, stop: operations.emuVmStop }[kind]);
    } catch (err) {
      setActionError(err);
    } finally {
      setPending(null);
      setTick((t) => t + 1);
    }
  };

  return (
    <section className="card vm-card" aria-labelledby="parity-vm-title" data-testid="parity-vm">
      <div className="op-card-head">
        <h2 id="parity-vm-title">Executor VM</h2>
        {status?.available && <VmBadge status={status.vm.status} />}
      </div>
      {loadError !== null && <ProblemNotice error={loadError} title="Could not read the VM’s status" />}
      {status === null && loadError === null && <p className="muted">Asking limactl…</p>}
      {status && !status.available && <Unavailable status={status} />}
      {status && status.available && <Manage status={status} pending={pending} onAct={(k) => void act(k)} />}
      {status?.available && status.vm.status === 'Running' && executorTransport === 'none' && (
        <div className="op-warnbox vm-restart" role="status" data-testid="vm-restart">
          <p>
            The VM runs, but this emulator is not connected to its agent, so snippets cannot run: the VM was started outside the app, or
            connecting after Start failed (see the log). Connect now; if that fails too, restart the emulator.
          </p>
          <button type="button" onClick={() => void connect()} disabled={connecting} data-testid="vm-connect">
            {connecting ? 'Connecting…' : 'Connect'}
          </button>
        </div>
      )}
      {actionError !== null && <ProblemNotice error={actionError} title="The VM did not take that" />}
      {status?.operation && <OperationLog op={status.operation} />}
    </section>
  );
}

function VmBadge({ status }: { status: string }) {
  const b = BADGE[status] ?? { tone: status === 'unknown' ? 'vm-missing' : 'vm-broken', label: status };
  return (
    <span className={`vm-badge ${b.tone}`} data-testid="vm-status" data-status={status}>
      <span className="vm-dot" aria-hidden="true" />
      {b.label}
    </span>
  );
}

function Unavailable({ status }: { status: VmStatus }) {
  const notNeeded = /only used on macOS/.test(status.reason ?? '');
  return (
    <div className={notNeeded ? 'vm-note' : 'op-warnbox'} role="status" data-testid="vm-unavailable">
      <p className="vm-note-title">{notNeeded ? 'Not needed on this host' : 'Lima is not installed'}</p>
      <p>{status.reason ?? 'limactl is unknown here.'}</p>
      <p className="op-hint">
        {notNeeded
          ? 'On macOS snippets run inside a Lima VM (named svc-emu) so that memory, CPU and process limits bite as in production; this section creates and starts it there.'
          : 'Install Lima, then come back here to create and start the VM (or run svc-emu lima create, then svc-emu lima start).'}
      </p>
    </div>
  );
}

function Manage({ status, pending, onAct }: { status: VmStatus; pending: Kind | null; onAct: (k: Kind) => void }) {
  const vm = status.vm;
  const running = status.operation?.state === 'running';
  const busy = running || pending !== null;
  const known = !status.error;
  const can: Record<Kind, boolean> = {
    create: known && vm.status === 'missing',
    start: known && vm.status !== 'missing' && vm.status !== 'Running' && vm.status !== 'unknown',
    stop: known && vm.status !== 'missing' && vm.status !== 'Stopped' && vm.status !== 'unknown',
  };
  const facts = [
    vm.cpus !== undefined ? `${vm.cpus} CPUs` : null,
    size(vm.memory) && `${size(vm.memory)} memory`,
    size(vm.disk) && `${size(vm.disk)} disk`,
    vm.arch,
    vm.vm_type,
  ].filter(Boolean);
  const now = running ? status.operation!.kind : pending;
  return (
    <>
      <p className="op-hint vm-intro">
        On macOS (no cgroups there) snippets run inside this Lima VM, where limits and the sandbox work as in production.{' '}
        {vm.status === 'missing' && 'It does not exist yet: create it, then start it.'}
        {vm.status === 'Stopped' && 'It is stopped: start it before running snippets.'}
        {vm.status === 'Running' && 'It is running.'}
      </p>
      {status.error && (
        <div className="op-warnbox" role="alert" data-testid="vm-error">
          limactl did not say what state the VM is in: {status.error}
        </div>
      )}
      <dl className="vm-facts" data-testid="vm-facts">
        <dt>VM</dt>
        <dd>
          <code>{vm.name}</code>
          {facts.length > 0 && <span className="op-hint"> · {facts.join(' · ')}</span>}
        </dd>
        <dt>limactl</dt>
        <dd>
          <code>{status.limactl}</code>
          {status.limactl_version && <span className="op-hint"> · {status.limactl_version}</span>}
        </dd>
        {vm.message && (
          <>
            <dt>Lima says</dt>
            <dd>{vm.message}</dd>
          </>
        )}
        {(vm.errors ?? []).length > 0 && (
          <>
            <dt>Errors</dt>
            <dd>
              <ul className="op-list">
                {vm.errors!.map((e) => (
                  <li key={e}>{e}</li>
                ))}
              </ul>
            </dd>
          </>
        )}
      </dl>
      <div className="op-actions vm-actions" role="group" aria-label="VM actions">
        {KINDS.map((k) => (
          <button
            key={k}
            type="button"
            className={`op-btn ${k === 'stop' ? '' : can[k] && !busy ? 'op-primary' : ''}`}
            disabled={!can[k] || busy}
            title={VERB[k].hint}
            aria-describedby="vm-action-hint"
            onClick={() => onAct(k)}
            data-testid={`vm-${k}`}
          >
            {now === k ? `${VERB[k].doing}…` : VERB[k].label}
          </button>
        ))}
        <span className="op-hint" id="vm-action-hint">
          {busy
            ? `${VERB[now ?? 'create'].doing} the VM: one operation at a time.`
            : can.create
              ? VERB.create.hint
              : can.start
                ? VERB.start.hint
                : can.stop
                  ? VERB.stop.hint
                  : ''}
        </span>
      </div>
    </>
  );
}

function OperationLog({ op }: { op: VmOperation }) {
  const ref = useRef<HTMLPreElement>(null);
  const stick = useRef(true);
  // Follow the tail unless the reader scrolled up to read.
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [op.log_total, op.state]);
  const dropped = op.log_total - op.log.length;
  const when = (iso?: string) => (iso ? new Date(iso).toLocaleTimeString() : '');
  return (
    <div className="vm-op" data-testid="vm-operation" data-state={op.state} data-kind={op.kind}>
      <div className="vm-op-head">
        <h3 id="vm-log-title">{op.state === 'running' ? `${VERB[op.kind].doing} the VM…` : `Last operation: ${op.kind}`}</h3>
        <span
          className={`vm-badge ${op.state === 'succeeded' ? 'vm-running' : op.state === 'failed' ? 'vm-broken' : 'vm-busy'}`}
          data-testid="vm-operation-state"
        >
          {op.state === 'running' && <span className="vm-spinner" aria-hidden="true" />}
          {op.state}
          {op.exit_code !== null && op.exit_code !== undefined && op.state !== 'running' ? ` · exit ${op.exit_code}` : ''}
        </span>
        <span className="op-hint">
          started {when(op.started_at)}
          {op.finished_at ? `, ended ${when(op.finished_at)}` : ''}
        </span>
      </div>
      {op.error && (
        <p className="vm-op-error" role="alert">
          {op.error}
        </p>
      )}
      <pre
        ref={ref}
        className="vm-log"
        role="log"
        aria-live="polite"
        aria-labelledby="vm-log-title"
        tabIndex={0}
        data-testid="vm-log"
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {dropped > 0 && (
          <span className="vm-log-dropped">
            … {dropped} earlier lines not kept{'\n'}
          </span>
        )}
        {op.log.join('\n')}
      </pre>
    </div>
  );
}
