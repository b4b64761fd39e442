import { parseArgs } from 'node:util';
import { EgressAllowEntry } from '../egress/policy';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { ApiError, DataDirError } from '../errors';
import { DomainError } from '../domain/errors';
import { dataDirPaths } from '../storage/data-dir';
import { ResourceName } from '../../contract/schemas/common';
import { CapsPatch } from '../../contract/schemas/emu';
import { runDoctor, type DoctorReport } from '../doctor';
import { quarantineDir, readQuarantine } from '../storage/quarantine';
import { EMULATOR_VERSION } from '../version';
import { openOperator, openOperatorAt, type Operator } from './operator';
import { CLIENT_ACCEPTS, CLIENT_OPTIONS, CLIENT_USAGE, isClientCommand, runClient } from './client';
import { isReportCommand, REPORT_ACCEPTS, REPORT_OPTIONS, REPORT_USAGE, runReportCommand } from './report';
import { isStateCommand, runStateCommand, STATE_ACCEPTS, STATE_OPTIONS, STATE_USAGE } from './state';
import { terminalLogging } from '../terminal-lines';
import { executorAgentFor } from '../executor-choice';
import { LIMA_USAGE, runLima } from './lima';
import { GUI_TOKEN_USAGE, runGuiToken } from './gui-token';
import { checkFlags, FlagError, oneOf, type CommandFlags } from './flags';
import { locate, LocateError, type Target } from './locate';
import { coresDir } from '../storage/running-cores';
import { INIT_OPTIONS, INIT_USAGE, runInit } from './init';
import { COMPLETION_USAGE, completionScript, completeWords } from './completion';
import { PARITY_ACCEPTS, PARITY_OPTIONS, PARITY_USAGE, runParityCommand } from './parity';
import { MCP_ACCEPTS, MCP_OPTIONS, MCP_USAGE, McpUsageError, runMcpCommand } from './mcp';
import type { TenantView } from '../services/tenants';

export interface CliIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
  /** Resolves when the process is asked to stop (serve waits on it). */
  untilSignal: () => Promise<string>;
}

const defaultIO = (): CliIO => ({
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  cwd: process.cwd(),
  untilSignal: () =>
    new Promise((res) => {
      for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(sig, () => res(sig));
    }),
});

const USAGE = `svc-emu ${EMULATOR_VERSION} — the Snippet Emulator's headless core and operator CLI

Usage:
  svc-emu --version
  svc-emu serve [--port N] [--host ADDR] [--allow-host NAME]… [--workspace DIR] [--executor local|lima]
                [--egress-profile local|production] [--egress-allow HOST:PORT]… [--async-workers N]
                [--egress-mode live|record|replay] [--replay-speed N]  (outbound calls: go out, recorded to cassettes, or
                                             replayed from them; N: replayed chunks come N times faster, 0 = no waits)
                [--callback-retry-scale F]   (1 = production's callback retry schedule; 0.001 compresses it for QA)
                [--terminal | --no-terminal]  (the GUI's Terminal page; default: on when listening on loopback only)
                [--spares all|plain|none]  (runners started ahead; all: plain and framework-imported, the default)
                [--log-level error|warn|info|debug]  (info: a line per compile, deploy, failed run or callback; debug adds requests)
                [--log-format pretty|json]  (pretty: human lines, coloured on a terminal unless NO_COLOR; json: one object a line)
  svc-emu tenant list
  svc-emu tenant create NAME
  svc-emu tenant limits NAME [--timeout-ms N] [--max-memory-mb N] [--max-cpu-percent N] [--max-concurrency N]
  svc-emu key create --tenant NAME
  svc-emu doctor
${LIMA_USAGE}
${GUI_TOKEN_USAGE}
${CLIENT_USAGE}
${REPORT_USAGE}
${STATE_USAGE}
${INIT_USAGE}
${COMPLETION_USAGE}
${PARITY_USAGE}
${MCP_USAGE}

Every command takes --data-dir DIR and --json. Without --data-dir the emulator is found from any folder:
$SVC_EMU_DATA_DIR (set in the GUI's terminals), else $SVC_EMU_URL with $SVC_EMU_ADMIN_TOKEN, else ./.svc-emu,
else the running emulator whose workspace holds this folder (or the only one running); serve uses ./.svc-emu.
Operator commands go through the running emulator when one owns the data dir, else edit its files.
invoke, list, invocations, logs and deploy need a running emulator, and act as its local tenant over /v1.
With --json every answer is JSON on stdout, errors too: one object {code, detail, …}, and a non-zero exit.
invoke prints the output (its run on stderr) and exits 1 on a failed outcome; with --json, the invocation record.
`;

class UsageError extends Error {}

const OPTIONS = {
  'data-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  port: { type: 'string' },
  host: { type: 'string' },
  'allow-host': { type: 'string', multiple: true },
  workspace: { type: 'string' },
  executor: { type: 'string' },
  'egress-profile': { type: 'string' },
  'egress-allow': { type: 'string', multiple: true },
  'async-workers': { type: 'string' },
  'callback-retry-scale': { type: 'string' },
  limactl: { type: 'string' },
  terminal: { type: 'boolean' },
  'no-terminal': { type: 'boolean' },
  spares: { type: 'string' },
  'log-level': { type: 'string' },
  'log-format': { type: 'string' },
  tenant: { type: 'string' },
  'timeout-ms': { type: 'string' },
  'max-memory-mb': { type: 'string' },
  'max-cpu-percent': { type: 'string' },
  'max-concurrency': { type: 'string' },
  'replay-speed': { type: 'string' },
  ...CLIENT_OPTIONS,
  ...REPORT_OPTIONS,
  ...STATE_OPTIONS,
  ...INIT_OPTIONS,
  ...PARITY_OPTIONS,
  ...MCP_OPTIONS,
} as const;

const GLOBAL_FLAGS = ['data-dir', 'json', 'help'] as const;

/** The flags each command takes beyond the global ones (server/cli/flags.ts); a command not listed here is not checked. */
const COMMAND_FLAGS: Record<string, readonly string[]> = {
  'tenant list': [],
  'tenant create': [],
  'tenant limits': ['timeout-ms', 'max-memory-mb', 'max-cpu-percent', 'max-concurrency'],
  'key create': ['tenant'],
  doctor: [],
  lima: ['limactl'],
  init: Object.keys(INIT_OPTIONS),
  completion: [],
  'gui-token': [],
  mcp: MCP_ACCEPTS,
  ...PARITY_ACCEPTS,
  ...CLIENT_ACCEPTS,
  ...REPORT_ACCEPTS,
  ...STATE_ACCEPTS,
};
/** serve takes every flag no other command claims (so a flag added for serve needs no entry here), --egress-mode (invoke's too) and --workspace (parity's too). */
const SERVE_FLAGS = [
  ...Object.keys(OPTIONS).filter(
    (f) => !(GLOBAL_FLAGS as readonly string[]).includes(f) && !Object.values(COMMAND_FLAGS).some((flags) => flags.includes(f)),
  ),
  'egress-mode',
  'workspace',
];

function commandFlags(positionals: string[]): CommandFlags | null {
  const [cmd, sub] = positionals;
  if (cmd === 'serve') return { command: 'serve', flags: SERVE_FLAGS };
  if (cmd === 'lima') return { command: `lima${sub ? ` ${sub}` : ''}`, flags: COMMAND_FLAGS.lima! };
  const two = `${cmd} ${sub}`;
  if (COMMAND_FLAGS[two]) return { command: two, flags: COMMAND_FLAGS[two] };
  if (cmd && COMMAND_FLAGS[cmd] && !['tenant', 'key'].includes(cmd)) return { command: cmd, flags: COMMAND_FLAGS[cmd] };
  return null;
}

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** Runs one CLI command; returns the exit code (0 ok, 1 failed, 2 usage). Never throws. */
export async function main(argv: string[], io: CliIO = defaultIO()): Promise<number> {
  // `--version` alone (`--json` beside it is fine): elsewhere `--version V` names a snippet version (invoke, deploy).
  if (argv.length && argv.every((a) => a === '--version' || a === '-V' || a === '--json') && argv.some((a) => a !== '--json')) {
    io.stdout(argv.includes('--json') ? `${JSON.stringify({ version: EMULATOR_VERSION })}\n` : `svc-emu ${EMULATOR_VERSION}\n`);
    return 0;
  }
  let values: Values;
  let positionals: string[];
  try {
    checkFlags(argv, OPTIONS, GLOBAL_FLAGS, commandFlags);
    ({ values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true }));
  } catch (err) {
    // Before parsing, --json is whatever the user typed: with it, the one JSON error on stdout.
    return report(new UsageError((err as Error).message), io, argv.includes('--json'));
  }
  if (values.help || positionals.length === 0) {
    if (!values.help && values.json) return report(new UsageError('no command given (svc-emu --help lists them)'), io, true);
    (values.help ? io.stdout : io.stderr)(USAGE);
    return values.help ? 0 : 2;
  }
  // serve owns its data dir (./.svc-emu by default); every other command finds the emulator (server/cli/locate.ts).
  const dataDir = resolve(io.cwd, values['data-dir'] ?? (process.env.SVC_EMU_DATA_DIR || '.svc-emu'));
  let located: Promise<Target> | null = null;
  const target = () => (located ??= locate({ dataDir: values['data-dir'], env: process.env, cwd: io.cwd }));
  const targetDir = async () => {
    const t = await target();
    return t.kind === 'dir' ? t.dataDir : null;
  };
  const out: Out = (human, json) => io.stdout(values.json ? JSON.stringify(json) + '\n' : human);
  try {
    const [cmd, sub, ...rest] = positionals;
    const command = [cmd, sub].filter(Boolean).join(' ');
    switch (cmd) {
      case 'serve':
        expectArgs(positionals, 1);
        return await serve(values, dataDir, io);
      case 'lima': {
        const t = await target();
        return await runLima(
          positionals.slice(1),
          {
            json: values.json === true,
            limactl: values.limactl && resolve(io.cwd, values.limactl),
            dataDir: t.kind === 'dir' ? t.dataDir : dataDir,
            ...(t.kind === 'url' && t.adminToken ? { core: { url: t.url, token: t.adminToken } } : {}),
            projectRoot: projectRoot(),
          },
          io,
        );
      }
      case 'gui-token': {
        // server/cli/gui-token.ts: through the running core when one runs, else on the data dir's secret file.
        const t = await target();
        const core = t.kind === 'url' && t.adminToken ? { core: { url: t.url, token: t.adminToken } } : {};
        const opts = { json: values.json === true, dataDir: t.kind === 'dir' ? t.dataDir : dataDir, ...core };
        return await runGuiToken(positionals.slice(1), opts, io);
      }
      case 'doctor': {
        expectArgs(positionals, 1);
        const report = await runDoctor({
          electronPathFile: electronPathFile(),
          projectRoot: projectRoot(),
          dataDir: (await targetDir()) ?? dataDir,
        });
        out(formatDoctor(report), report);
        return 0;
      }
      case 'init':
        return await runInit(positionals.slice(1), values, io);
      case 'completion': {
        const [shell, ...extra] = positionals.slice(1);
        if (extra.length) throw new UsageError(`unexpected argument '${extra[0]}'`);
        if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`usage: svc-emu completion bash|zsh (not '${shell ?? ''}')`);
        io.stdout(completionScript(shell, { options: OPTIONS, commands: completionCommands() }));
        return 0;
      }
      case 'mcp':
        // Stdout is the MCP protocol's from here on (server/mcp/server.ts): every message goes to stderr.
        return await runMcpCommand(positionals.slice(1), values, target, io);
      case 'parity':
        // server/cli/parity.ts: its own exit codes (0 same, 1 differs, 2 usage or target unreachable, 130 Ctrl-C).
        return await runParityCommand(positionals.slice(1), values, io, { projectRoot: projectRoot() });
      case '__complete':
        // For the completion scripts: candidates one a line, nothing (and exit 0) when there are none.
        io.stdout(await completeWords(positionals.slice(1), target).catch(() => ''));
        return 0;
      case 'tenant':
      case 'key': {
        // Every argument is checked before the data dir is touched: a typo must not create state.
        const run = operatorCommand(command, positionals, rest, values);
        const t = await target();
        if (t.kind === 'url') {
          if (!t.adminToken)
            throw new DataDirError(
              t.url,
              'needs the admin token',
              'Set SVC_EMU_ADMIN_TOKEN (it is in <data-dir>/emulator.json beside the emulator).',
            );
          await run(openOperatorAt(t.url, t.adminToken), out);
          return 0;
        }
        const dataDir = t.dataDir;
        if (!existsSync(dataDir)) {
          throw new DataDirError(
            dataDir,
            'does not exist',
            'Start the emulator once with `svc-emu serve --data-dir …`, or check --data-dir.',
          );
        }
        const op = await openOperator(dataDirPaths(dataDir), io.stderr);
        try {
          await run(op, out);
        } finally {
          await op.close();
        }
        return 0;
      }
      default:
        if (isClientCommand(cmd)) return await runClient(cmd, positionals.slice(1), values, target, io);
        if (isReportCommand(cmd)) return await runReportCommand(cmd, positionals.slice(1), values, target, io);
        if (isStateCommand(cmd)) return await runStateCommand(cmd, positionals.slice(1), values, target, io);
        throw new UsageError(`unknown command '${cmd}'`);
    }
  } catch (err) {
    return report(err, io, values.json === true);
  }
}

/** Every failure: a line on stderr, or with --json ONE object `{code, detail, …}` on stdout; 2 for usage, else 1. */
function report(err: unknown, io: CliIO, json: boolean): number {
  const fail = (code: number, human: string, obj: { code: string; detail: string } & Record<string, unknown>) => {
    if (json) io.stdout(JSON.stringify(obj) + '\n');
    else io.stderr(human);
    return code;
  };
  if (err instanceof UsageError || err instanceof FlagError || err instanceof McpUsageError) {
    return fail(2, `svc-emu: ${err.message}\nRun \`svc-emu --help\` for usage.\n`, { code: 'usage', detail: err.message });
  }
  if (err instanceof ApiError || err instanceof DomainError) {
    const extra = err instanceof ApiError ? err.extra : err.data;
    return fail(1, `svc-emu: ${err.message} (${err.code})\n`, { ...extra, code: err.code, detail: err.message });
  }
  if (err instanceof DataDirError) {
    return fail(1, `svc-emu: ${err.message}\n`, { code: 'data_dir', detail: err.problem, path: err.path, hint: err.hint ?? null });
  }
  if (err instanceof LocateError) {
    return fail(1, `svc-emu: ${err.message}\n`, { ...err.extra, code: err.code, detail: err.message });
  }
  const detail = err instanceof Error ? err.message : String(err);
  return fail(1, `svc-emu: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`, {
    code: 'internal',
    detail,
  });
}

/** Commands and subcommands, for the completion scripts. */
function completionCommands(): Record<string, { subs?: string[]; flags: readonly string[]; snippetArg?: boolean }> {
  const flagsOf = (c: string) => [...(COMMAND_FLAGS[c] ?? []), ...GLOBAL_FLAGS];
  return {
    serve: { flags: [...SERVE_FLAGS, ...GLOBAL_FLAGS] },
    tenant: { subs: ['list', 'create', 'limits'], flags: [...flagsOf('tenant limits')] },
    key: { subs: ['create'], flags: flagsOf('key create') },
    doctor: { flags: flagsOf('doctor') },
    lima: { subs: ['template', 'status', 'create', 'start', 'stop'], flags: flagsOf('lima') },
    init: { flags: flagsOf('init') },
    completion: { subs: ['bash', 'zsh'], flags: [] },
    parity: { flags: flagsOf('parity') },
    mcp: { flags: flagsOf('mcp') },
    invoke: { flags: flagsOf('invoke'), snippetArg: true },
    deploy: { flags: flagsOf('deploy'), snippetArg: true },
    logs: { flags: flagsOf('logs') },
    list: { flags: flagsOf('list') },
    invocations: { flags: flagsOf('invocations') },
    cassettes: { flags: flagsOf('cassettes'), snippetArg: true },
    report: { flags: flagsOf('report') },
    'import-report': { flags: flagsOf('import-report') },
    export: { flags: flagsOf('export') },
    import: { flags: flagsOf('import') },
  };
}

type Out = (human: string, json: unknown) => void;

/** Validates an operator command's arguments and returns what to do once the data dir is open. */
function operatorCommand(
  command: string,
  positionals: string[],
  rest: string[],
  values: Values,
): (op: Operator, out: Out) => Promise<void> {
  switch (command) {
    case 'tenant list':
      expectArgs(positionals, 2);
      return async (op, out) => {
        const tenants = await op.listTenants();
        out(tenants.map(formatTenant).join('\n') || 'no tenants\n', { data: tenants });
      };
    case 'tenant create': {
      const name = decode(ResourceName, needArgs(rest, 1, 'tenant create NAME')[0], 'NAME');
      return async (op, out) => {
        const tenant = await op.createTenant(name);
        out(`created tenant ${tenant.name}\n${formatTenant(tenant)}`, tenant);
      };
    }
    case 'tenant limits': {
      const [name] = needArgs(rest, 1, 'tenant limits NAME') as [string];
      const patch = capsFrom(values);
      return async (op, out) => {
        const caps = Object.keys(patch).length ? await op.setCaps(name, patch) : (await op.getTenant(name)).caps;
        out(formatCaps(caps), { tenant: name, caps });
      };
    }
    case 'key create': {
      expectArgs(positionals, 2);
      const tenant = values.tenant;
      if (!tenant) throw new UsageError('key create needs --tenant NAME');
      return async (op, out) => {
        const key = await op.createKey(tenant);
        // The key alone on stdout, so `KEY=$(svc-emu key create --tenant t)` works.
        out(`${key.key}\n`, key);
      };
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

function expectArgs(positionals: string[], n: number) {
  if (positionals.length > n) throw new UsageError(`unexpected argument '${positionals[n]}'`);
}
function needArgs(rest: string[], n: number, form: string): string[] {
  if (rest.length < n) throw new UsageError(`usage: svc-emu ${form}`);
  if (rest.length > n) throw new UsageError(`unexpected argument '${rest[n]}'`);
  return rest;
}

function decode<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new UsageError(
    r.error.issues.map((i) => `${i.path.length ? `--${String(i.path[0]).replace(/_/g, '-')}` : what}: ${i.message}`).join('; '),
  );
}

function capsFrom(values: Values) {
  const raw: Record<string, number> = {};
  const map = {
    'timeout-ms': 'timeout_ms',
    'max-memory-mb': 'max_memory_mb',
    'max-cpu-percent': 'max_cpu_percent',
    'max-concurrency': 'max_concurrency',
  } as const;
  for (const [flag, field] of Object.entries(map)) {
    const v = values[flag as keyof typeof map];
    if (v === undefined) continue;
    if (!/^-?\d+$/.test(v)) throw new UsageError(`--${flag}: must be an integer, got '${v}'`);
    raw[field] = Number(v);
  }
  return decode(CapsPatch, raw, 'limits');
}

async function serve(values: Values, dataDir: string, io: CliIO): Promise<number> {
  const { startEmulator } = await import('../index');
  const port = values.port === undefined ? 7070 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port: must be 0–65535, got '${values.port}'`);
  const host = values.host ?? '127.0.0.1';
  if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
    io.stderr(
      `svc-emu: warning: listening on ${host}, beyond this machine. Anyone who can reach it and has a key or the admin token can use it.${values.terminal ? ' The Terminal page is on (--terminal): a shell for anyone with the admin token.' : ' The Terminal page is off (--terminal turns it on).'}\n`,
    );
  }
  const root = projectRoot();
  const executor = values.executor;
  if (executor !== undefined && executor !== 'local' && executor !== 'lima')
    throw new UsageError(`--executor: local or lima, not '${executor}'`);
  const limactl = values.limactl ? resolve(io.cwd, values.limactl) : undefined;
  const egressProfile = values['egress-profile'] ?? 'local';
  if (egressProfile !== 'local' && egressProfile !== 'production')
    throw new UsageError(`--egress-profile: local or production, not '${egressProfile}'`);
  const egressAllow = values['egress-allow'] ?? [];
  for (const entry of egressAllow) {
    const checked = EgressAllowEntry.safeParse(entry);
    if (!checked.success) throw new UsageError(`--egress-allow '${entry}': ${checked.error.issues[0]?.message ?? 'must be HOST:PORT'}`);
  }
  const egressMode = oneOf('egress-mode', values['egress-mode'] ?? 'live', ['live', 'record', 'replay'] as const);
  const replaySpeed = values['replay-speed'] === undefined ? 1 : Number(values['replay-speed']);
  if (!(replaySpeed >= 0 && replaySpeed <= 1000))
    throw new UsageError(`--replay-speed: a number from 0 to 1000 (1 = as recorded, 0 = no waits), got '${values['replay-speed']}'`);
  const asyncWorkers = values['async-workers'] === undefined ? 8 : Number(values['async-workers']);
  if (!Number.isInteger(asyncWorkers) || asyncWorkers < 1 || asyncWorkers > 256)
    throw new UsageError(`--async-workers: 1–256, got '${values['async-workers']}'`);
  const retryScale = values['callback-retry-scale'] === undefined ? 1 : Number(values['callback-retry-scale']);
  if (!(retryScale >= 0 && retryScale <= 1))
    throw new UsageError(`--callback-retry-scale: a number from 0 to 1, got '${values['callback-retry-scale']}'`);
  if (values.terminal && values['no-terminal']) throw new UsageError('--terminal and --no-terminal: choose one');
  const terminal = values.terminal ? true : values['no-terminal'] ? false : undefined;
  const spares = values.spares ?? 'all';
  if (spares !== 'all' && spares !== 'plain' && spares !== 'none') throw new UsageError(`--spares: all, plain or none, not '${spares}'`);
  let lines: ReturnType<typeof terminalLogging>;
  try {
    // The terminal lines (server/terminal-lines.ts): --log-level, --log-format, colour on a TTY unless NO_COLOR.
    lines = terminalLogging({
      level: values['log-level'],
      format: values['log-format'],
      env: process.env,
      isTTY: process.stderr.isTTY,
      write: io.stderr,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const workspace = values.workspace ? resolve(io.cwd, values.workspace) : existsSync(join(io.cwd, 'snippets')) ? resolve(io.cwd) : null;
  const emu = await startEmulator({
    logger: lines.logger,
    egressProfile,
    egressAllow,
    egressMode,
    replaySpeed,
    asyncWorkers,
    callbackRetryScale: retryScale,
    terminal,
    spares,
    executorAgent: executorAgentFor({ choice: executor, projectRoot: root, platform: process.platform, path: process.env.PATH, limactl }),
    ...(limactl ? { limactl } : {}),
    dataDir,
    port,
    host,
    // docs/contract.md: the workspace defaults to `.`; without --workspace it is watched only if ./snippets exists.
    workspace,
    allowedHosts: values['allow-host'] ?? [],
    // In the per-user list of running emulators, so `svc-emu` finds this core from any folder (server/cli/locate.ts).
    coresDir: coresDir(),
    rendererDir: rendererDir(),
    projectRoot: root,
    electronPathFile: electronPathFile(),
  });
  const gui = `${emu.url}/?token=${emu.adminToken}`;
  const kept = await readQuarantine(quarantineDir(emu.dataDir)); // what starts could not load (storage/quarantine.ts)
  if (values.json) {
    io.stdout(
      JSON.stringify({
        url: emu.url,
        gui_url: gui,
        api_key: emu.localApiKey,
        tenant: 'local',
        data_dir: emu.dataDir,
        first_start: emu.firstStart,
      }) + '\n',
    );
  } else {
    io.stdout(
      [
        `Snippet Emulator ${EMULATOR_VERSION} — headless core`,
        `  API      ${emu.url}/v1`,
        `  GUI      ${gui}`,
        `  API key  ${emu.localApiKey ?? '(not shown: the data dir has no readable key; create one with `svc-emu key create --tenant local`)'}   (tenant local${emu.firstStart ? ', created now' : ''})`,
        `  Data     ${emu.dataDir}`,
        `  Egress   ${egressProfile}${egressProfile === 'local' ? ' (snippets, integrations and callbacks may reach private and loopback targets)' : ' (private, loopback and metadata targets refused, as in production)'}`,
        ...(egressMode !== 'live'
          ? [
              `  Mode     ${egressMode}${egressMode === 'replay' ? ` (outbound calls answered from cassettes, nothing goes out; speed ${replaySpeed})` : ' (outbound calls go out and are written to cassettes)'}`,
            ]
          : []),
        ...(kept.count
          ? [
              `  QUARANTINE  ${kept.count} record(s) failed validation at load and are kept aside in ${kept.dir}: not in use (svc-emu doctor says what to do)`,
            ]
          : []),
        `Press Ctrl+C to stop.`,
        '',
      ].join('\n'),
    );
  }
  // The terminal lines (server/terminal-lines.ts), from the first event of this start: the workspace's first
  // compiles happened before the banner and are replayed from the bus, then every change as it happens.
  const stopLines = lines.follow(emu.events, workspace);
  const signal = await io.untilSignal();
  io.stderr(`svc-emu: ${signal}, stopping\n`);
  stopLines();
  await emu.stop();
  return 0;
}

/** The built GUI: beside the CLI bundle (out/cli → out/renderer), or out/renderer from the sources. */
function rendererDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, '..', 'renderer'), join(here, '..', '..', 'out', 'renderer')]) {
    if (existsSync(join(candidate, 'index.html'))) return candidate;
  }
  return null;
}

/** The checkout this CLI belongs to: the nearest parent holding executor/runtimes (runners, installed runtimes). */
function projectRoot(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'executor', 'runtimes'))) return dir;
    dir = dirname(dir);
  }
  return null;
}

function electronPathFile(): string | undefined {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('electron/package.json')), 'path.txt');
  } catch {
    return undefined;
  }
}

const formatCaps = (c: TenantView['caps']) =>
  `  timeout_ms       ${c.timeout_ms}\n  max_memory_mb    ${c.max_memory_mb}\n  max_cpu_percent  ${c.max_cpu_percent}\n  max_concurrency  ${c.max_concurrency}\n`;
const formatTenant = (t: TenantView) => `${t.name} (${t.id}), ${t.keys.length} key(s)\n${formatCaps(t.caps)}`;

/** Who a snippet is, as the host sees it (executor/sandbox/profile.ts). */
function formatIdentity(id: DoctorReport['sandbox']['identity']): string {
  if (!id) return 'not checked (no sandbox)';
  if ('error' in id) return `not checked: ${id.error}`;
  const caps = /^0+$/.test(id.cap_eff) && /^0+$/.test(id.cap_prm) ? 'no capabilities' : `capabilities ${id.cap_eff}`;
  const how = id.mode === 'root-drop' ? 'dropped from root' : 'own user namespace';
  const line = `host uid ${id.host_uid[0]} (${how}), ${caps}, no_new_privs ${id.no_new_privs ? 'on' : 'OFF'}, seccomp ${id.seccomp}`;
  return id.ok ? line : `${line} — DOES NOT HOLD: ${id.problems.join('; ')}`;
}

function formatDoctor(r: DoctorReport): string {
  const cg = r.cgroup;
  return [
    `node       ${r.node} (${r.platform}/${r.arch}${r.root ? ', root' : ''})`,
    `cgroups    ${cg.mode}${cg.v1_controllers.length ? ` — v1: ${cg.v1_controllers.join(', ')}` : ''}${cg.v2_mount ? ` — v2 at ${cg.v2_mount}: ${cg.v2_controllers.join(', ') || 'no controllers'}` : ''}`,
    // The reason starts with the backend's name (executor/limits/detect.ts): printed once.
    `limits     ${r.limits.reason.startsWith(r.limits.backend) ? r.limits.reason : `${r.limits.backend} — ${r.limits.reason}`}`,
    `sandbox    ${r.sandbox.bubblewrap ? `bubblewrap ${r.sandbox.version ?? ''}`.trim() : `none (${r.sandbox.reason})`}`,
    `snippet    ${formatIdentity(r.sandbox.identity)}`,
    `runtimes   ${'error' in r.runtime ? String(r.runtime.error) : `Bun ${String(r.runtime.bun)}, Python ${String(r.runtime.python)}; ${(r.runtime.mismatches as unknown[]).length ? `${(r.runtime.mismatches as unknown[]).length} mismatch(es) with the manifest` : 'as the production manifest'}`}`,
    `electron   ${r.electron_binary ? 'binary installed' : 'binary not installed (headless only)'}`,
    `parity     ${r.parity}`,
    ...r.notes.map((n) => `  - ${n}`),
    ...formatQuarantine(r.quarantine),
    '',
  ].join('\n');
}

/** The data dir's quarantine: every entry with its problems and what to do (the newest first). */
function formatQuarantine(q: DoctorReport['quarantine']): string[] {
  if (!q) return [];
  if (q.count === 0 && q.unreadable.length === 0) return [`quarantine  empty (${q.dir})`];
  return [
    `quarantine  ${q.count} record(s) kept aside in ${q.dir}${q.entries.length < q.count ? ` (the newest ${q.entries.length} below)` : ''}`,
    ...q.entries.flatMap((e) => [
      `  - ${e.source}: ${e.label} (${e.at}, ${e.report})`,
      ...e.problems.map((p) => `      ${p}`),
      `      → ${e.action}`,
    ]),
    ...q.unreadable.map((f) => `  - ${f}: could not be read`),
  ];
}
