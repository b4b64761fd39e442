import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EmulatorConfigSchema, type EmulatorConfig } from './config';
import { DataDirError } from './errors';
import { newAdminToken } from './ids';
import { jsonLogger, type Logger } from './logger';
import { createApp } from './http/app';
import { answerProtocolErrors } from './http/protocol-errors';
import { selfEndpoint, type SelfEndpoint } from './webhooks/own-inbox';
import { Metrics } from './http/metrics';
import { allRoutes } from './api/routes';
import { buildOpenApi } from '../contract/openapi';
import { createServices, egressService, type Services } from './services';
import { InvocationService } from './services/invocations';
import { providerCallsOf } from './services/provider-calls';
import { acquireDataDir, dataDirPaths } from './storage/data-dir';
import { recordCore } from './storage/running-cores';
import { openState } from './open-state';
import { quarantineDir, quarantinedBlobs } from './storage/quarantine';
import { runDoctor } from './doctor';
import { EMULATOR_VERSION } from './version';
import { createExecutor, detectLimactl, LimaManager, pidAlive, VM_NAME } from '../executor';
import { EgressProxy, egressSocketPath } from './egress/proxy';
import { EgressCa } from './egress/tls/ca';
import { TlsTerminator } from './egress/tls/terminate';
import { WorkspaceLoader } from './workspace/loader';
import { ExecutorSlot } from './executor-slot';
import { terminalAccess } from './terminal/setup';
import { Housekeeper, sweepDataDir } from './housekeeping';
import { join } from 'node:path';
import { GuiSession, SESSION_COOKIE } from './services/gui-session';
import { EventBus } from './events/bus';
import { StateService } from './state/service';
import { liveParts } from './state/wiring';
import { ReportService, reportCassetteWriter } from './report';

export type { EmulatorConfig } from './config';
export { DataDirError, DataDirInUseError } from './errors';
export { EMULATOR_VERSION } from './version';
export { keyFileProvider, keychainKeyPath, type SecretKeyProvider } from './crypto/secret-box';
export { dataDirPaths } from './storage/data-dir';
export { coresDir } from './storage/running-cores';
export { executorAgentFor, type ExecutorChoice } from './executor-choice';
export { terminalLogging } from './terminal-lines';

export interface RunningEmulator {
  url: string;
  port: number;
  adminToken: string;
  /** The local tenant's key (null if it cannot be shown: a data dir moved without its key file). */
  localApiKey: string | null;
  /** True when this start created the data dir's state. */
  firstStart: boolean;
  dataDir: string;
  services: Services;
  /** The GUI's session cookie as it is now (it changes at a rotation): the desktop app sets it on its window. */
  guiCookie(): { name: string; value: string };
  /** Every change as it happens (the same events as GET /_emu/events): subscribe for terminal lines and tests. */
  events: EventBus;
  /** Sweeps what dead cores left (temp files, limit groups) at start and every `housekeepingMs`; emits `swept`. */
  housekeeping: Housekeeper;
  stop(): Promise<void>;
}

const hostForUrl = (host: string) => (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host);

/**
 * Starts the core on a data dir: takes the data dir's lock, opens the state, ensures the local tenant,
 * listens, and records `{port, pid, admin_token}` in `emulator.json` (0600). `stop()` undoes all of it.
 */
export async function startEmulator(input: EmulatorConfig): Promise<RunningEmulator> {
  const config = EmulatorConfigSchema.parse(input);
  const logger: Logger = input.logger ?? jsonLogger((line) => process.stderr.write(line));
  const paths = dataDirPaths(config.dataDir);
  const lock = await acquireDataDir(paths, 'core', EMULATOR_VERSION);
  const cleanup: (() => Promise<void> | void)[] = [() => lock.release()];
  const runCleanup = async () => {
    for (const fn of cleanup.reverse()) await Promise.resolve(fn()).catch(() => {});
  };
  try {
    // One bus per core: services publish every change on it (docs/architecture.md, "The event bus and the live feed").
    const events = new EventBus(input.clock ?? (() => new Date()), (err) =>
      logger.log('warn', 'an event listener threw and was dropped', { error: String(err) }),
    );
    const { deps } = await openState(config.dataDir, { secretKeyProvider: input.secretKeyProvider, clock: input.clock, events });
    const quarantined = deps.repo.quarantined;
    if (quarantined) {
      // Loud on purpose: the core starts, but without what is listed here (doctor and the Parity page list it too).
      const whole = quarantined.items.some((i) => i.collection === null);
      logger.log(
        'error',
        whole
          ? 'db.json could not be used: the state starts EMPTY; the file is kept in the quarantine'
          : 'records that failed validation were quarantined',
        {
          quarantine: join(quarantineDir(paths.root), quarantined.file),
          copies: quarantined.copies,
          items: quarantined.items.slice(0, 20).map((i) => `${i.source}: ${i.label}: ${i.problems.join('; ')}`),
          count: quarantined.items.length,
        },
      );
    }
    const adminToken = newAdminToken();
    // The GUI's sign-in survives restarts: its secret is the data dir's (server/storage/gui-secret.ts).
    const guiSession = await GuiSession.open(paths.root);
    let url = '';
    let self: SelfEndpoint | null = null; // set once the core listens
    // The way out for snippets' own HTTP clients: listening before any sandbox starts (runners relay to it).
    const egressRules = { profile: config.egressProfile, allow: config.egressAllow };
    // Services are built in dependency order: the invocations first (the egress path records warnings on them).
    const invocations = new InvocationService(deps, config.historyLimit);
    const egress = egressService(deps, egressRules, (id, text) => invocations.addParityWarning(id, text));
    // Record and replay of HTTPS: the data dir's CA (server/egress/tls/ca.ts); runners trust its bundle. Without
    // it (an unwritable data dir) recording runs' HTTPS passes through unrecorded and replaying runs' is refused.
    const ca = await EgressCa.open(paths.root).then(
      (made) => ({ made, error: null }),
      (err: Error) => {
        logger.log('warn', 'the egress CA could not be made: HTTPS cannot be recorded or replayed', { error: err.message });
        return { made: null, error: err.message };
      },
    );
    const proxy = new EgressProxy(egress, egressSocketPath(paths.root), {
      terminator: new TlsTerminator(ca.made, ca.error),
      note: (id, text) => {
        logger.log('warn', text, { invocation_id: id });
        invocations.addParityWarning(id, text);
      },
    });
    await proxy.listen();
    cleanup.push(() => proxy.close());
    // Spare runners start once the core listens (CreateExecutorOptions.sparesAfter), not during its start.
    let listened!: () => void;
    const listening = new Promise<void>((resolve) => (listened = resolve));
    const create = () =>
      createExecutor({
        projectRoot: config.projectRoot,
        workDir: join(paths.root, 'sandboxes'),
        logger,
        agentArgv: config.executorAgent,
        egressSocket: proxy.socketPath,
        caBundle: ca.made?.bundlePath ?? null,
        spares: config.spares,
        sparesAfter: listening,
      });
    const built = input.executor
      ? {
          executor: input.executor,
          validateCode: input.validateCode ?? null,
          runtime: async () => ({ note: 'executor supplied by the caller' }),
        }
      : await create();
    const executor = new ExecutorSlot(built, { create, logger });
    cleanup.push(() => deps.repo.close()); // what the runs' last moments recorded
    cleanup.push(() => executor.close());
    // Leftovers of cores killed with SIGKILL: swept now, and on a timer while this core runs.
    const housekeeping = new Housekeeper({
      intervalMs: config.housekeepingMs,
      logger,
      sweeps: [
        async () => {
          const rules = { pid: process.pid, alive: pidAlive, now: () => Date.now(), maxAgeMs: config.leftoverAgeMs };
          return { files: await sweepDataDir(paths.root, rules) };
        },
        () => executor.housekeep(),
      ],
    });
    await housekeeping.run();
    housekeeping.start();
    cleanup.push(() => housekeeping.stop());
    const domain = createServices(deps, {
      executor,
      logger,
      validateCode: input.validateCode ?? built.validateCode,
      invocations,
      egress: egressRules,
      egressService: egress,
      asyncWorkers: config.asyncWorkers,
      callbackRetryScale: config.callbackRetryScale,
      callbackTimeoutMs: config.callbackTimeoutMs,
      inboxDir: join(paths.root, 'inbox'),
      streamPingMs: config.streamPingMs,
      self: () => self,
      // The agent run view's model calls: assembled from the bodies the egress path keeps (services/provider-calls.ts).
      providerCalls: providerCallsOf({ egress, invocations }),
      egressMode: { mode: config.egressMode, replay_speed: config.replaySpeed },
      dataDir: paths.root,
      workspace: config.workspace,
    });
    const terminals = terminalAccess({
      enabled: config.terminal,
      host: config.host,
      workspace: config.workspace,
      dataDir: paths.root,
      url: () => url,
      vmName: VM_NAME,
      limactl: config.limactl,
      logger,
      onChange: (id, state) => events.publish('terminal.changed', { id, state }),
    });
    // The executor VM (macOS): managed through limactl from the GUI and `svc-emu lima`.
    const vm = new LimaManager({
      limactl: config.limactl === undefined ? detectLimactl() : config.limactl,
      projectRoot: config.projectRoot,
      hostBackend: built.executor.info.backend,
      tmpDir: paths.root,
      onChange: (op, line) => events.publish('vm.operation', { ...op, line }),
      // Behind the VM (--executor lima), its agent can only connect while it runs: connect after a start,
      // and say why runs fail after a stop.
      onSucceeded:
        config.executorAgent && !input.executor
          ? async (kind) => {
              if (kind === 'start' && !executor.available) await executor.reconnect();
              if (kind === 'stop')
                await executor.disconnect('the executor VM was stopped: start it on the Parity status page or with `svc-emu lima start`');
            }
          : undefined,
    });
    // After ensureLocal (below) the loader writes versions for the local tenant.
    const loader = config.workspace
      ? new WorkspaceLoader({
          dir: config.workspace,
          tenants: domain.tenants,
          snippets: domain.snippets,
          logger,
          // Every loader result (loaded, unchanged, error with file:line:col, deleted) goes on the live feed.
          onStatus: (status) => events.publish('workspace.folder', status),
          prewarm: (job) => executor.prewarm(job),
          dropPrewarm: (job) =>
            void executor.retire({
              tenantId: job.tenantId,
              snippetId: job.snippetId,
              bundle: { version: job.version, sha256: job.bundle.sha256 },
            }),
        })
      : null;
    // Export and import of the whole state while this core runs (server/state/).
    const state = new StateService(deps, liveParts(domain, { rules: egressRules, dataDir: paths.root }));
    const services: Services = {
      ...domain,
      state,
      events,
      executor,
      facts: {
        version: EMULATOR_VERSION,
        dataDir: paths.root,
        workspace: config.workspace,
        startedAt: new Date().toISOString(),
        url: () => url,
        doctor: async () => ({
          ...(await runDoctor({ electronPathFile: config.electronPathFile, projectRoot: config.projectRoot, dataDir: paths.root })),
          executor: executor.info,
        }),
        adminToken,
        guiSession,
        runtime: () => executor.runtime(),
        ready: () => {
          const reasons: string[] = [];
          if (deps.repo.writeError) reasons.push(`the data dir cannot be written: ${deps.repo.writeError.message}`);
          return { ready: reasons.length === 0, reasons };
        },
      },
      workspace: loader,
      vm,
      connectAgent: config.executorAgent && !input.executor ? () => executor.reconnect() : null,
      terminals,
      report: new ReportService(deps, domain, { emulator: EMULATOR_VERSION, writeCassette: () => reportCassetteWriter(domain) }),
    };
    cleanup.push(() => vm.close()); // a create or start in the middle is stopped with the core
    cleanup.push(() => terminals.sessions?.closeAll()); // every shell killed (SIGHUP, then SIGKILL)
    // Stop taking async jobs and callbacks before the executor goes (runs in the middle stay `running`).
    cleanup.push(() => {
      services.async.close();
      services.callbacks.close();
    });
    // What an import on the files (svc-emu import, no core running) left for this start: fault rules, inbox answers, cassettes.
    for (const note of await state.applyPending()) logger.log('warn', 'state import', { note });
    await services.async.recover();
    const local = await services.tenants.ensureLocal();
    if (loader) {
      // The first load of every folder is awaited, so the core answers with the workspace's snippets from its first request.
      await loader.start();
      cleanup.push(() => loader.stop());
      await loader.settled();
    }
    // Blobs named by quarantined records stay too: restoring a record must find its value.
    const keptAside = await quarantinedBlobs(quarantineDir(paths.root));
    const liveBlobs = () =>
      deps.repo.read(
        (db) =>
          new Set([
            ...services.snippets.liveBlobs(db),
            ...services.store.liveBlobs(db),
            ...services.invocations.liveBlobs(db),
            ...keptAside,
          ]),
      );
    await deps.blobs
      .collectGarbage(liveBlobs())
      .catch((err) => logger.log('warn', 'blob garbage collection failed', { error: String(err) }));

    let openapi: unknown;
    const metrics = new Metrics();
    metrics.gauge('svc_emu_process_resident_memory_bytes', 'Resident memory of the core process.', () => process.memoryUsage().rss);
    metrics.gauge('svc_emu_async_jobs_queued', 'Async jobs waiting for a worker or a tenant slot.', () => services.async.stats().queued);
    metrics.gauge('svc_emu_async_jobs_running', 'Async jobs running.', () => services.async.stats().running);
    const app = createApp({
      services,
      routes: allRoutes,
      logger,
      metrics,
      hostPolicy: { boundHost: config.host, allowedHosts: config.allowedHosts },
      adminToken,
      guiSession,
      openapi: () => (openapi ??= buildOpenApi(allRoutes, EMULATOR_VERSION)),
      rendererDir: config.rendererDir,
    });
    // Koa's handler answers its own errors (ctx.onerror), so the promise it returns per request needs no one waiting on it.
    const handle = app.callback();
    const server = createServer((req, res) => void handle(req, res));
    answerProtocolErrors(server); // what Node refuses before Koa sees it still answers problem+json
    await listen(server, config.port, config.host);
    listened();
    cleanup.push(() => closeServer(server));
    const port = (server.address() as AddressInfo).port;
    url = `http://${hostForUrl(config.host)}:${port}`;
    self = selfEndpoint(server.address() as AddressInfo, url);
    await lock.update({ port, url, admin_token: adminToken });
    if (config.coresDir) {
      // The per-user list of running emulators (server/storage/running-cores.ts): how the CLI finds this core from any folder.
      const unrecord = await recordCore(
        config.coresDir,
        { url, data_dir: paths.root, workspace: config.workspace, started_at: new Date().toISOString(), version: EMULATOR_VERSION },
        port,
      );
      cleanup.push(unrecord);
    }
    services.async.start();

    const sweeper = setInterval(() => {
      services.store.sweep().catch((err) => logger.log('warn', 'store sweep failed', { error: String(err) }));
    }, config.storeSweepMs);
    sweeper.unref();
    cleanup.push(() => clearInterval(sweeper));
    // While it runs too: blobs of invocations trimmed from the history (logs, outputs over 8 KiB), of
    // overwritten store values and deleted versions would otherwise stay until the next start.
    const blobSweeper = setInterval(() => {
      deps.blobs.sweep(liveBlobs).catch((err) => logger.log('warn', 'blob sweep failed', { error: String(err) }));
    }, config.blobSweepMs);
    blobSweeper.unref();
    cleanup.push(() => clearInterval(blobSweeper));
    cleanup.push(() => deps.repo.flush().catch(() => {}));

    logger.log('info', 'emulator started', { url, data_dir: paths.root, version: EMULATOR_VERSION, first_start: local.created });
    let stopping: Promise<void> | null = null;
    return {
      url,
      port,
      adminToken,
      localApiKey: local.key,
      firstStart: local.created,
      dataDir: paths.root,
      services,
      guiCookie: () => ({ name: SESSION_COOKIE, value: guiSession.cookieValue }),
      events,
      housekeeping,
      stop: () => (stopping ??= runCleanup().then(() => logger.log('info', 'emulator stopped', {}))),
    };
  } catch (err) {
    await runCleanup();
    throw err;
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE')
        reject(new DataDirError(`${host}:${port}`, 'is already in use', 'Pass --port to choose another port (0 picks a free one).'));
      else if (err.code === 'EADDRNOTAVAIL') reject(new DataDirError(host, 'is not an address of this machine', 'Pass --host 127.0.0.1.'));
      else reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
