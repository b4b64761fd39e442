import { z } from 'zod';
import { createClient, type AnyOperation, type RawReply } from '../../contract/client';
import { operations as ops } from '../../contract';
import { dataDirPaths, liveOwner } from '../storage/data-dir';
import { detectLimactl, LimaManager, LimaRefused, limaTemplate, probeHost, VmOperation, VmStatus } from '../../executor';

/**
 * `svc-emu lima template|status|create|start|stop`: the executor VM of macOS. Through the running core's
 * `/_emu/vm` when one owns the data dir (so the GUI and the CLI see the same operation), else driving
 * limactl here with the same LimaManager. create/start/stop print limactl's output as it comes and exit
 * 0 when it succeeded, 1 when it failed or was refused; `status --json` prints the status object.
 */
export const LIMA_USAGE = `  svc-emu lima template          (the VM's Lima template, for \`limactl create --name svc-emu -\` by hand)
  svc-emu lima status            (macOS: the executor VM — missing, Stopped, Running — and the last operation)
  svc-emu lima create | start | stop   [--limactl PATH]   (runs limactl, printing its output)`;

export interface LimaIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export interface LimaCliOptions {
  json: boolean;
  /** --limactl: an explicit limactl (else found on PATH on macOS). */
  limactl?: string;
  dataDir: string;
  /** A core reached by URL (`$SVC_EMU_URL`: server/cli/locate.ts) instead of the data dir's. */
  core?: { url: string; token: string };
  projectRoot: string | null;
  /** How often an operation run by the core is polled (ms). */
  pollMs?: number;
}

const SUBCOMMANDS = ['template', 'status', 'create', 'start', 'stop'] as const;
type Sub = (typeof SUBCOMMANDS)[number];

/** Returns the exit code (0 ok, 1 failed or refused, 2 usage). Never throws for an expected failure. */
export async function runLima(args: string[], opts: LimaCliOptions, io: LimaIO): Promise<number> {
  const [sub, ...rest] = args;
  if (!sub || !SUBCOMMANDS.includes(sub as Sub) || rest.length) {
    if (opts.json) io.stdout(JSON.stringify({ code: 'usage', detail: `usage: svc-emu lima template|status|create|start|stop` }) + '\n');
    else io.stderr(`svc-emu: usage:\n${LIMA_USAGE}\nRun \`svc-emu --help\` for usage.\n`);
    return 2;
  }
  if (sub === 'template') {
    if (!opts.projectRoot) {
      const detail = 'cannot find the project checkout (executor/runtimes)';
      if (opts.json) io.stdout(JSON.stringify({ code: 'no_checkout', detail }) + '\n');
      else io.stderr(`svc-emu: ${detail}\n`);
      return 1;
    }
    io.stdout(limaTemplate({ projectRoot: opts.projectRoot }));
    return 0;
  }
  const core = opts.core ?? (await runningCore(opts.dataDir));
  const driver = core ? coreDriver(core.url, core.token) : await localDriver(opts);
  try {
    if (sub === 'status') {
      const status = await driver.status();
      io.stdout(opts.json ? JSON.stringify(status) + '\n' : formatStatus(status, core ? core.url : null));
      return status.error ? 1 : 0;
    }
    const op = await driver.follow(
      sub as VmOperation['kind'],
      opts.json ? () => {} : (line) => io.stdout(line + '\n'),
      opts.pollMs ?? 1_000,
    );
    // A failed operation is still one object on stdout, with the `code` and `detail` every --json error has.
    if (opts.json)
      io.stdout(
        JSON.stringify(op.state === 'failed' ? { ...op, code: 'limactl_failed', detail: op.error ?? `limactl ${sub} failed` } : op) + '\n',
      );
    else if (op.state === 'failed') io.stderr(`svc-emu: ${op.error ?? `limactl ${sub} failed`}\n`);
    else
      io.stderr(
        `svc-emu: ${sub} done${sub === 'create' ? ': now `svc-emu lima start` (the first start downloads the image and provisions the runtimes: minutes)' : ''}\n`,
      );
    return op.state === 'succeeded' ? 0 : 1;
  } catch (err) {
    if (err instanceof Refused) {
      // With --json, the one error object goes to stdout (docs/cli.md, "Errors and exit codes").
      if (opts.json) io.stdout(JSON.stringify({ code: err.code, detail: err.message }) + '\n');
      else io.stderr(`svc-emu: ${err.message} (${err.code})\n`);
      return 1;
    }
    throw err;
  }
}

class Refused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Driver {
  status(): Promise<VmStatus>;
  /** Starts the operation and hands each line of its output to `onLine` until it ends. */
  follow(kind: VmOperation['kind'], onLine: (line: string) => void, pollMs: number): Promise<VmOperation>;
}

async function runningCore(dataDir: string): Promise<{ url: string; token: string } | null> {
  const owner = await liveOwner(dataDirPaths(dataDir)).catch(() => null);
  return owner?.kind === 'core' && owner.url && owner.admin_token ? { url: owner.url, token: owner.admin_token } : null;
}

/** LimaManager here: no core runs on the data dir. */
async function localDriver(opts: LimaCliOptions): Promise<Driver> {
  const limactl = opts.limactl ?? detectLimactl();
  // Where Lima is not used, the reason names what enforces limits here instead.
  const hostBackend =
    limactl || process.platform === 'darwin'
      ? null
      : (await probeHost({ projectRoot: opts.projectRoot }).catch(() => null))?.limits.backend;
  const manager = new LimaManager({ limactl, projectRoot: opts.projectRoot, hostBackend });
  return {
    status: () => manager.status(),
    async follow(kind, onLine) {
      const off = manager.onLine(onLine);
      try {
        await (kind === 'create' ? manager.create() : kind === 'start' ? manager.start() : manager.stop());
        return await manager.wait()!;
      } catch (err) {
        if (err instanceof LimaRefused) throw new Refused(err.code, err.message);
        throw err;
      } finally {
        off();
      }
    },
  };
}

const Problem = z.object({ code: z.string(), detail: z.string() }).partial();

/** Through the running core's /_emu/vm. */
function coreDriver(url: string, token: string): Driver {
  // The one client (contract/client.ts) with the admin token; each answer parsed with the executor's own schema.
  const client = createClient({ baseUrl: url, adminToken: token });
  const call = async <T>(op: AnyOperation, schema: z.ZodType<T>): Promise<T> => {
    const [method, path] = [op.method.toUpperCase(), op.path];
    let reply: RawReply;
    try {
      reply = await client.send(op);
    } catch (err) {
      throw new Refused('unreachable', `the emulator at ${url} did not answer (${(err as Error).message})`);
    }
    const body: unknown = reply.body ?? null;
    if (reply.status < 200 || reply.status > 299) {
      const p = Problem.safeParse(body);
      throw new Refused(p.data?.code ?? `http_${reply.status}`, p.data?.detail ?? `${method} ${path} answered ${reply.status}`);
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success)
      throw new Refused('bad_answer', `${method} ${url}${path} answered something unexpected: ${parsed.error.issues[0]?.message ?? ''}`);
    return parsed.data;
  };
  const start = { create: ops.emuVmCreate, start: ops.emuVmStart, stop: ops.emuVmStop };
  return {
    status: () => call(ops.emuVmStatus, VmStatus),
    async follow(kind, onLine, pollMs) {
      const started = await call(start[kind], VmOperation);
      let seen = 0;
      let op = started;
      for (;;) {
        const fresh = op.log_total - seen;
        if (fresh > op.log.length) onLine(`… (${fresh - op.log.length} lines not kept)`);
        for (const line of op.log.slice(Math.max(0, op.log.length - fresh))) onLine(line);
        seen = op.log_total;
        if (op.state !== 'running') return op;
        await new Promise((r) => setTimeout(r, pollMs));
        const now = (await call(ops.emuVmStatus, VmStatus)).operation;
        if (!now || now.started_at !== started.started_at || now.kind !== kind)
          throw new Refused('lost', 'the operation is no longer the core’s current one (did the emulator restart?)');
        op = now;
      }
    },
  };
}

const GiB = 1024 ** 3;
const size = (n: number | undefined) =>
  n === undefined ? null : n >= GiB ? `${+(n / GiB).toFixed(1)} GiB` : `${Math.round(n / 1024 ** 2)} MiB`;

function formatStatus(s: VmStatus, via: string | null): string {
  const lines: string[] = [];
  if (!s.available) {
    lines.push(`VM        not managed here: ${s.reason ?? 'limactl is unknown'}`);
  } else {
    lines.push(
      `VM        ${s.vm.name} — ${s.vm.status}${s.vm.status === 'missing' ? ' (create it: `svc-emu lima create`)' : s.vm.status === 'Stopped' ? ' (start it: `svc-emu lima start`)' : ''}`,
    );
    lines.push(`limactl   ${s.limactl}${s.limactl_version ? ` (${s.limactl_version})` : ''}`);
    const facts = [
      s.vm.cpus !== undefined ? `${s.vm.cpus} CPUs` : null,
      size(s.vm.memory) && `memory ${size(s.vm.memory)}`,
      size(s.vm.disk) && `disk ${size(s.vm.disk)}`,
      s.vm.arch,
      s.vm.vm_type,
    ].filter(Boolean);
    if (facts.length) lines.push(`size      ${facts.join(' · ')}`);
    if (s.vm.dir) lines.push(`dir       ${s.vm.dir}`);
    if (s.vm.message) lines.push(`message   ${s.vm.message}`);
    for (const e of s.vm.errors ?? []) lines.push(`error     ${e}`);
    if (s.error) lines.push(`error     ${s.error}`);
  }
  const op = s.operation;
  if (op)
    lines.push(
      `last      ${op.kind} ${op.state} (started ${op.started_at}${op.finished_at ? `, ended ${op.finished_at}` : ''}${op.exit_code !== undefined && op.exit_code !== null ? `, exit ${op.exit_code}` : ''})`,
    );
  if (via) lines.push(`via       the running emulator at ${via}`);
  return lines.join('\n') + '\n';
}
