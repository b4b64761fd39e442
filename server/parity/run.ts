import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PARITY_REPORT_FORMAT, type ParityProbeResult, type ParityReport } from '../../contract/schemas/parity';
import { jsonLogger } from '../logger';
import { EMULATOR_VERSION } from '../version';
import { compare, Observation } from './observe';
import { PROBES, type Probe, type ProbeContext } from './probes';
import { startReceiver, type CallbackReceiver } from './receiver';
import { parityPrefix, Side } from './side';
import { workspaceProbes } from './workspace';

export interface ParityOptions {
  /** The deployment to check: its base URL (`https://svc.example.com`, without /v1). */
  target: string;
  key: string;
  workspace: string | null;
  allowDeploy: boolean;
  projectRoot: string | null;
  /** Aborted on Ctrl-C: the probes stop, what was created is still deleted. */
  signal: AbortSignal;
  /** Progress lines (stderr). */
  progress?: (line: string) => void;
}

/** The target could not be checked at all (unreachable, the key refused, not the service): exit 2. */
export class ParityConnectionError extends Error {}

/** Ctrl-C during the check: what was created was deleted (`cleanup`), and the exit is 130. */
export class ParityInterrupted extends Error {
  constructor(readonly cleanup: ParityReport['cleanup']) {
    super('interrupted');
  }
}

export const NOT_DEPLOYED = 'not deployed: needs its own snippets on the target (--allow-deploy)';

/**
 * The parity check: the target's preflight, a fresh reference emulator (a temp data dir, the `production`
 * egress profile, the same workspace), every probe on both sides (one probe at a time, both sides at once),
 * the comparison, and the clean-up of the target, whatever happened. The reference is torn down after.
 */
export async function runParity(opts: ParityOptions): Promise<ParityReport> {
  const started = new Date();
  const t0 = performance.now();
  const progress = opts.progress ?? (() => {});
  await preflight(opts);
  const prefix = parityPrefix();
  const dataDir = await mkdtemp(join(tmpdir(), 'svc-emu-parity-'));
  const referenceLogs: string[] = [];
  let reference: Awaited<ReturnType<typeof startReference>> | null = null;
  let receiver: Promise<CallbackReceiver> | null = null;
  const target = new Side('target', opts.target, opts.key, prefix, opts.signal);
  let cleanup: ParityReport['cleanup'] | undefined;
  const results: ParityProbeResult[] = [];
  try {
    progress(
      `svc-emu parity: starting a reference emulator (egress profile production${opts.workspace ? `, workspace ${opts.workspace}` : ''})`,
    );
    reference = await startReference(dataDir, opts, referenceLogs).catch((err: unknown) => {
      const tail = referenceLogs.slice(-5).join('').trim();
      throw new Error(`the reference emulator did not start: ${(err as Error).message}${tail ? `\n${tail}` : ''}`);
    });
    const emulator = new Side('emulator', reference.url, reference.key, prefix, opts.signal, reference.admin);
    const ctx: ProbeContext = { receiver: () => (receiver ??= startReceiver()) };
    const probes = [...PROBES, ...(opts.workspace ? await workspaceProbes(opts.workspace) : [])];
    progress(
      `svc-emu parity: ${probes.length} probes against ${opts.target}${opts.allowDeploy ? ` (creating ${prefix}-* snippets there)` : ''}`,
    );
    for (const probe of probes) {
      if (opts.signal.aborted) break;
      results.push(await runProbe(probe, emulator, target, ctx, opts));
    }
  } finally {
    cleanup = { created: [...new Set(target.created)], ...(await target.cleanup()) };
    if (receiver) await (await (receiver as Promise<CallbackReceiver>).catch(() => null))?.close();
    await reference?.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
  cleanup ??= { created: [], deleted: [], failed: [] };
  if (opts.signal.aborted) throw new ParityInterrupted(cleanup);
  const count = (s: ParityProbeResult['status']) => results.filter((r) => r.status === s).length;
  const summary = { same: count('same'), differs: count('differs'), skipped: count('skipped'), error: count('error') };
  return {
    format: PARITY_REPORT_FORMAT,
    target: opts.target,
    reference: { emulator_version: EMULATOR_VERSION, egress_profile: 'production', workspace: opts.workspace },
    allow_deploy: opts.allowDeploy,
    started_at: started.toISOString(),
    duration_ms: Math.round(performance.now() - t0),
    result: summary.differs || summary.error ? 'differs' : 'same',
    summary,
    probes: results,
    cleanup,
  };
}

async function runProbe(probe: Probe, emulator: Side, target: Side, ctx: ProbeContext, opts: ParityOptions): Promise<ParityProbeResult> {
  const base = { name: probe.name, group: probe.group, description: probe.description };
  if (probe.needs === 'deploy' && !opts.allowDeploy) {
    return { ...base, status: 'skipped', reason: NOT_DEPLOYED, differences: [], notes: [], emulator: {}, target: {} };
  }
  const obs = { emulator: new Observation(), target: new Observation() };
  const [e, t] = await Promise.allSettled([probe.run(emulator, obs.emulator, ctx), probe.run(target, obs.target, ctx)]);
  const notes = [...obs.emulator.notes, ...obs.target.notes];
  const seen = { emulator: obs.emulator.toRecord(), target: obs.target.toRecord() };
  if (e.status === 'rejected' || t.status === 'rejected') {
    const why = (side: string, r: PromiseSettledResult<void>) =>
      r.status === 'rejected' ? [`${side}: ${r.reason instanceof Error ? describeError(r.reason) : String(r.reason)}`] : [];
    const reason = [...why('emulator', e), ...why('target', t)].join('; ');
    return { ...base, status: 'error', reason, differences: [], notes, ...seen };
  }
  const differences = compare(obs.emulator, obs.target);
  return { ...base, status: differences.length ? 'differs' : 'same', reason: null, differences, notes, ...seen };
}

function describeError(err: Error): string {
  if (err.name === 'TimeoutError') return 'no answer within 30 s';
  if (err.name === 'AbortError') return 'interrupted';
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ? `${err.message} (${cause.code})` : err.message;
}

/** Before anything starts: the target answers /v1 and takes the key. */
async function preflight(opts: ParityOptions): Promise<void> {
  const side = new Side('target', opts.target, opts.key, 'svc-parity-preflight', opts.signal);
  let r;
  try {
    r = await side.send('GET', '/v1/tenant/runtime-limits', {}, AbortSignal.any([opts.signal, AbortSignal.timeout(15_000)]));
  } catch (err) {
    throw new ParityConnectionError(`cannot reach the target at ${opts.target}: ${describeError(err as Error)}`);
  }
  if (r.status === 401 || r.status === 403) {
    const code = (r.body as { code?: string } | undefined)?.code ?? 'no code';
    throw new ParityConnectionError(
      `the target at ${opts.target} refused the key (${r.status} ${code}): check --key (a tenant's API key, svc_…)`,
    );
  }
  if (r.status !== 200) {
    throw new ParityConnectionError(
      `the target at ${opts.target} does not answer like the service: GET /v1/tenant/runtime-limits answered ${r.status} (give the base URL, without /v1)`,
    );
  }
}

/** A fresh core on port 0, production egress rules, the workspace if given; not listed among running emulators. */
async function startReference(dataDir: string, opts: ParityOptions, logs: string[]) {
  const { startEmulator } = await import('../index');
  const emu = await startEmulator({
    dataDir,
    port: 0,
    egressProfile: 'production',
    workspace: opts.workspace,
    projectRoot: opts.projectRoot,
    spares: 'plain',
    coresDir: null,
    logger: jsonLogger((l) => void logs.push(l), { level: 'warn' }),
  });
  if (!emu.localApiKey) {
    await emu.stop();
    throw new Error('the reference emulator has no API key to show (a fresh data dir always has one: a bug)');
  }
  return { url: emu.url, key: emu.localApiKey, admin: emu.adminToken, stop: () => emu.stop() };
}
