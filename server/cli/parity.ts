import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { formatReport } from '../parity/format';
import { ParityConnectionError, ParityInterrupted, runParity } from '../parity/run';

/**
 * `svc-emu parity --against URL --key KEY`: the contract probes of server/parity/probes.ts against a real
 * deployment and a fresh reference emulator side by side (docs/parity.md, "Checking parity against a
 * deployment"). Exit 0 when they agree, 1 when anything differs (or a probe could not run), 2 for usage or
 * a target that cannot be checked at all, 130 after Ctrl-C (what was created on the target is deleted first).
 */
export const PARITY_OPTIONS = {
  against: { type: 'string' },
  target: { type: 'string' },
  key: { type: 'string' },
  'allow-deploy': { type: 'boolean' },
} as const;

/** workspace is serve's flag too (server/cli/main.ts keeps it there). */
export const PARITY_ACCEPTS = { parity: ['against', 'target', 'key', 'allow-deploy', 'workspace'] } as const;

export const PARITY_USAGE = `  svc-emu parity --against URL --key KEY [--workspace DIR] [--allow-deploy] [--json]
                                 (contract probes against a deployment and a fresh reference emulator with production
                                 rules; prints every difference, exit 1 when any. --target is --against. Creates
                                 svc-parity-* snippets there only with --allow-deploy, and deletes them after)`;

export interface ParityIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
  untilSignal: () => Promise<string>;
}

class Usage extends Error {}

export async function runParityCommand(
  args: string[],
  values: Record<string, unknown>,
  io: ParityIO,
  env: { projectRoot: string | null },
): Promise<number> {
  const json = values.json === true;
  const fail = (code: number, kind: string, message: string) => {
    if (json) io.stdout(JSON.stringify({ code: kind, detail: message }) + '\n');
    else io.stderr(`svc-emu parity: ${message}\n${code === 2 && kind === 'usage' ? 'Run `svc-emu --help` for usage.\n' : ''}`);
    return code;
  };
  let target: string;
  let key: string;
  let workspace: string | null;
  try {
    if (args.length) throw new Usage(`unexpected argument '${args[0]}'`);
    const against = values.against as string | undefined;
    const alias = values.target as string | undefined;
    if (against && alias && against !== alias) throw new Usage('--against and --target name the same thing: give one');
    const url = against ?? alias;
    if (!url) throw new Usage('needs --against URL (the deployment to check, e.g. https://svc.example.com)');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Usage(`--against: not a URL: '${url}'`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Usage(`--against: http(s) only, not '${parsed.protocol}'`);
    target = url.replace(/\/+$/, '').replace(/\/v1$/, '');
    key = (values.key as string | undefined) ?? process.env.SVC_PARITY_KEY ?? '';
    if (!key) throw new Usage("needs --key KEY (the target tenant's API key; or $SVC_PARITY_KEY)");
    const ws = values.workspace as string | undefined;
    workspace = ws ? resolve(io.cwd, ws) : existsSync(join(io.cwd, 'snippets')) ? resolve(io.cwd) : null;
    if (workspace && !existsSync(join(workspace, 'snippets'))) throw new Usage(`--workspace: ${workspace} has no snippets/ folder`);
  } catch (err) {
    if (err instanceof Usage) return fail(2, 'usage', err.message);
    throw err;
  }

  const abort = new AbortController();
  void io.untilSignal().then((sig) => {
    io.stderr(`svc-emu parity: ${sig}: stopping, deleting what was created on the target\n`);
    abort.abort();
  });
  try {
    const report = await runParity({
      target,
      key,
      workspace,
      allowDeploy: values['allow-deploy'] === true,
      projectRoot: env.projectRoot,
      signal: abort.signal,
      progress: json ? undefined : (line) => io.stderr(line + '\n'),
    });
    io.stdout(json ? JSON.stringify(report) + '\n' : formatReport(report));
    return report.result === 'same' ? 0 : 1;
  } catch (err) {
    if (err instanceof ParityConnectionError) return fail(2, 'target_unreachable', err.message);
    if (err instanceof ParityInterrupted) {
      const c = err.cleanup;
      const line = c.failed.length
        ? `interrupted; NOT deleted on the target: ${c.failed.map((f) => `${f.snippet} (${f.error})`).join(', ')}`
        : `interrupted; deleted on the target: ${c.deleted.length ? c.deleted.join(', ') : 'nothing (nothing was created)'}`;
      if (json) io.stdout(JSON.stringify({ code: 'interrupted', detail: line, cleanup: c }) + '\n');
      else io.stderr(`svc-emu parity: ${line}\n`);
      return 130;
    }
    throw err;
  }
}
