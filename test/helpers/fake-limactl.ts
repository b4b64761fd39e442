/**
 * A fake `limactl` for tests (test/fixtures/fake-limactl.mjs), copied into its own temp dir and made
 * executable, with its state file beside it: the one fake allowed at the Lima edge (no macOS here).
 */
import { chmod, copyFile, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeLimaState {
  instances: Record<string, { status: string; cpus: number; memory: number }>;
  templates: Record<string, string>;
  calls: string[][];
  fail: { create?: string; start?: string; stop?: string };
  garbage: boolean;
  delay_ms?: number;
  /** After its first progress line, create/start/stop waits until this file exists (test/fixtures/fake-limactl.mjs). */
  release_file?: string;
}

export interface FakeLimactl {
  /** The executable. */
  path: string;
  dir: string;
  state(): Promise<FakeLimaState>;
  /** Merges into the state (knobs: fail, garbage, delay_ms; or instances). */
  patch(patch: Partial<FakeLimaState>): Promise<void>;
  remove(): Promise<void>;
}

export async function fakeLimactl(): Promise<FakeLimactl> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-emu-fake-lima-'));
  const path = join(dir, 'limactl');
  await copyFile(join(__dirname, '..', 'fixtures', 'fake-limactl.mjs'), path);
  await chmod(path, 0o755);
  const statePath = join(dir, 'fake-limactl.state.json');
  const callsPath = `${statePath}.calls.jsonl`;
  const state = async (): Promise<FakeLimaState> => ({
    instances: {},
    templates: {},
    fail: {},
    garbage: false,
    ...(existsSync(statePath) ? (JSON.parse(await readFile(statePath, 'utf8')) as Partial<FakeLimaState>) : {}),
    calls: existsSync(callsPath)
      ? (await readFile(callsPath, 'utf8'))
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as string[])
      : [],
  });
  return {
    path,
    dir,
    state,
    async patch(patch) {
      const { calls: _calls, ...current } = await state();
      // Atomically, as the fake itself writes: a `list` running now never reads half a file.
      await writeFile(`${statePath}.patch.tmp`, JSON.stringify({ ...current, ...patch }));
      await rename(`${statePath}.patch.tmp`, statePath);
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * The executor agent "inside" the fake VM: the real agent (real Bun, real runners) behind a shell command
 * that, like `limactl shell svc-emu -- …`, refuses to start while the fake VM is not Running.
 */
export function agentInFakeVm(fake: FakeLimactl, opts: { projectRoot: string; bunBin: string; workDir: string }): string[] {
  const state = join(fake.dir, 'fake-limactl.state.json');
  const gate = `grep -Eq '"status": ?"Running"' '${state}' 2>/dev/null || { echo 'instance "svc-emu" is not running' >&2; exit 1; }; exec "$0" "$@"`;
  return [
    '/bin/sh',
    '-c',
    gate,
    opts.bunBin,
    join(opts.projectRoot, 'executor', 'agent.ts'),
    '--root',
    opts.projectRoot,
    '--work',
    opts.workDir,
  ];
}
