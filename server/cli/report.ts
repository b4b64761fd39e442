import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createClient, type Client, type RawReply } from '../../contract/client';
import { operations as ops } from '../../contract';
import { REPORT_MAX_INVOCATIONS, type ImportReportResult } from '../../contract/schemas/report';
import { dataDirPaths, liveOwner } from '../storage/data-dir';
import { DomainError } from '../domain/errors';
import { extractReproJson, parseRepro } from '../report/repro';
import type { Target } from './locate';

/**
 * `svc-emu report ID… [-o FILE.html]` and `svc-emu import-report FILE.html [--tenant T]` (server/report/
 * makes and reads the file). Both need a running emulator. Arguments and the file are checked before
 * anything is sent: a damaged or foreign file is refused here, and nothing is created.
 */

export const REPORT_COMMANDS = ['report', 'import-report'] as const;
export type ReportCommand = (typeof REPORT_COMMANDS)[number];
export const isReportCommand = (cmd: string | undefined): cmd is ReportCommand => REPORT_COMMANDS.includes(cmd as ReportCommand);

export const REPORT_OPTIONS = { output: { type: 'string', short: 'o' } } as const;
export const REPORT_ACCEPTS: Record<ReportCommand, readonly string[]> = { report: ['output'], 'import-report': ['tenant'] };

export const REPORT_USAGE = `  svc-emu report ID… [-o FILE.html]  (one self-contained HTML file about these invocations, to hand to a colleague;
                                 default file name from the emulator, in this folder; -o - writes to stdout)
  svc-emu import-report FILE.html [--tenant T]
                                 (makes the report's snippet version, cassette and invocation here; prints the
                                 command that reruns it: svc-emu invoke --replay ID, its calls replayed from the cassette)`;

const INVOCATION_ID_RE = /^inv_[0-9A-Za-z]{1,64}$/;
const TENANT_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;

export interface ReportIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
}

class Usage extends Error {}
class Failure extends Error {
  constructor(
    message: string,
    readonly json: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** Runs `report` or `import-report`; returns the exit code (0 ok, 1 failed, 2 usage). */
export async function runReportCommand(
  cmd: ReportCommand,
  args: string[],
  values: Record<string, unknown>,
  target: () => Promise<Target>,
  io: ReportIO,
): Promise<number> {
  const json = values.json === true;
  const fail = (code: number, human: string, obj: Record<string, unknown>) => {
    if (json) io.stdout(JSON.stringify(obj) + '\n');
    else io.stderr(human);
    return code;
  };
  try {
    if (cmd === 'report') {
      if (!args.length) throw new Usage('usage: svc-emu report ID… [-o FILE.html]');
      for (const id of args) if (!INVOCATION_ID_RE.test(id)) throw new Usage(`'${id}' is not an invocation id (inv_…)`);
      if (new Set(args).size > REPORT_MAX_INVOCATIONS) throw new Usage(`at most ${REPORT_MAX_INVOCATIONS} invocations in one report`);
      const output = values.output as string | undefined;
      if (output === '') throw new Usage('-o: give a file name (or - for stdout)');
      const admin = await adminClient(await target());
      return await report(admin, io, json, [...new Set(args)], output);
    }
    if (args.length !== 1) throw new Usage('usage: svc-emu import-report FILE.html [--tenant T]');
    const tenant = values.tenant as string | undefined;
    if (tenant !== undefined && !TENANT_RE.test(tenant)) throw new Usage(`--tenant: '${tenant}' is not a tenant name`);
    const path = resolve(io.cwd, args[0]!);
    const html = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new Failure(`cannot read ${path}: ${err.code ?? err.message}`, { code: 'unreadable', path, detail: err.message });
    });
    let repro;
    try {
      repro = parseRepro(extractReproJson(html), 'file');
    } catch (err) {
      if (err instanceof DomainError)
        throw new Failure(`${path}: ${err.message}; nothing was imported`, { code: err.code, path, detail: err.message });
      throw err;
    }
    const admin = await adminClient(await target());
    return await importReport(admin, io, json, { repro, ...(tenant ? { tenant } : {}) });
  } catch (err) {
    if (err instanceof Usage)
      return fail(2, `svc-emu: ${err.message}\nRun \`svc-emu --help\` for usage.\n`, { code: 'usage', detail: err.message });
    if (err instanceof Failure)
      return fail(1, `svc-emu: ${err.message}\n`, { ...err.json, code: err.json.code ?? 'error', detail: err.json.detail ?? err.message });
    throw err;
  }
}

async function adminClient(target: Target): Promise<{ url: string; client: Client }> {
  if (target.kind === 'url') {
    if (!target.adminToken)
      throw new Failure(`SVC_EMU_URL is set (${target.url}) but SVC_EMU_ADMIN_TOKEN is not: set it to the admin token`, {
        code: 'no_admin_token',
        url: target.url,
      });
    return { url: target.url, client: createClient({ baseUrl: target.url, adminToken: target.adminToken }) };
  }
  const owner = await liveOwner(dataDirPaths(target.dataDir));
  if (!owner || owner.kind !== 'core' || !owner.url || !owner.admin_token)
    throw new Failure(`no emulator is running on ${target.dataDir}: start it with \`npm start\` or \`svc-emu serve\``, {
      code: 'no_emulator',
      data_dir: target.dataDir,
    });
  return { url: owner.url, client: createClient({ baseUrl: owner.url, adminToken: owner.admin_token }) };
}

async function send(url: string, call: () => Promise<RawReply>): Promise<RawReply> {
  try {
    return await call();
  } catch (err) {
    const why = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new Failure(`the emulator at ${url} did not answer (${why})`, { code: 'unreachable', url, detail: why });
  }
}

function problem(reply: RawReply, doing: string): Failure {
  const p = (reply.body && typeof reply.body === 'object' ? reply.body : {}) as Record<string, unknown>;
  const code = typeof p.code === 'string' ? p.code : 'error';
  const detail = typeof p.detail === 'string' ? p.detail : reply.text.trim().slice(0, 300) || `HTTP ${reply.status}`;
  return new Failure(`${doing}: ${detail} (${reply.status} ${code})`, Object.keys(p).length ? p : { code, status: reply.status, detail });
}

async function report(a: { url: string; client: Client }, io: ReportIO, json: boolean, ids: string[], output: string | undefined) {
  const reply = await send(a.url, () => a.client.send(ops.emuGetReport, { query: { ids: ids.join(',') } }));
  if (reply.status !== 200) throw problem(reply, 'making the report');
  if (output === '-') {
    io.stdout(reply.text);
    return 0;
  }
  const suggested = /filename="([^"/\\]+)"/.exec(reply.headers.get('content-disposition') ?? '')?.[1] ?? `svc-emu-report-${ids[0]}.html`;
  const path = resolve(io.cwd, output ?? suggested);
  await writeFile(path, reply.text, { mode: 0o600 }).catch((err: NodeJS.ErrnoException) => {
    throw new Failure(`cannot write ${path}: ${err.code ?? err.message}`, { code: 'unwritable', path, detail: err.message });
  });
  const bytes = Buffer.byteLength(reply.text);
  if (json) io.stdout(JSON.stringify({ path, bytes, invocations: ids }) + '\n');
  else io.stdout(`wrote ${path} (${Math.ceil(bytes / 1024)} KiB, ${ids.length} invocation${ids.length === 1 ? '' : 's'})\n`);
  return 0;
}

async function importReport(a: { url: string; client: Client }, io: ReportIO, json: boolean, body: { repro: unknown; tenant?: string }) {
  const reply = await send(a.url, () => a.client.send(ops.emuImportReport, { body }));
  if (reply.status !== 201) throw problem(reply, 'importing the report');
  const result = reply.body as ImportReportResult;
  if (json) {
    io.stdout(JSON.stringify(result) + '\n');
    return 0;
  }
  for (const i of result.invocations) {
    io.stdout(
      `${i.source_id} → ${i.id}: ${i.snippet_created ? 'created snippet' : 'snippet'} ${i.snippet} (tenant ${result.tenant}), version ${i.version}` +
        `${i.cassette ? `, cassette ${i.cassette} (${i.cassette_entries} call${i.cassette_entries === 1 ? '' : 's'})` : ''}, outcome ${i.outcome ?? '—'}\n` +
        `  rerun: ${i.rerun}\n`,
    );
  }
  return 0;
}
