/**
 * Shell completion (issue 17): `svc-emu completion bash|zsh` prints a script that the shell parses
 * (`bash -n`, `zsh -n` where zsh is installed), and that completes for real in bash: commands, subcommands,
 * flags, flag values, and snippet names read from the running emulator through the built CLI
 * (bin/svc-emu.mjs → out/cli, rebuilt by `node scripts/setup.mjs --quiet`) found from a folder outside
 * the checkout through the list of running emulators.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli } from '../helpers/cli';

const dirs: string[] = [];
const savedEnv = { ...process.env };
let core: TestCore;
let runtime: string;
let scripts: { bash: string; zsh: string };
let work: string;

beforeAll(async () => {
  work = await tempDir('svc-emu-completion-');
  dirs.push(work);
  runtime = join(work, 'cores');
  process.env.SVC_EMU_RUNTIME_DIR = runtime;
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN']) delete process.env[k];
  core = await startTestCore({ config: { coresDir: runtime } });
  for (const name of ['alpha', 'beta-two']) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  }
  const bash = await runCli(['completion', 'bash']);
  const zsh = await runCli(['completion', 'zsh']);
  expect(bash.code).toBe(0);
  expect(zsh.code).toBe(0);
  scripts = { bash: join(work, 'svc-emu.bash'), zsh: join(work, 'svc-emu.zsh') };
  await writeFile(scripts.bash, bash.stdout);
  await writeFile(scripts.zsh, zsh.stdout);
}, 60_000);

afterAll(async () => {
  await core?.stop();
  process.env = savedEnv;
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const run = promisify(execFile);
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

describe('completion scripts', () => {
  it('bash -n parses the bash script', () => {
    const r = spawnSync('bash', ['-n', scripts.bash], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  });

  it('zsh -n parses the zsh script', (ctx) => {
    if (!has('zsh')) ctx.skip('zsh is not installed on this host');
    const r = spawnSync('zsh', ['-n', scripts.zsh], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  });

  it('__complete snippets: the running emulator’s names, one a line; nothing (exit 0) when none runs', async () => {
    const r = await runCli(['__complete', 'snippets'], work);
    expect(r).toEqual({ code: 0, stdout: 'alpha\nbeta-two\n', stderr: '' });
    const none = await runCli(['__complete', 'snippets', '--data-dir', join(work, 'nothing')], work);
    expect(none).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('bash completes commands, subcommands, flags, values and snippet names (through the built CLI)', async (ctx) => {
    const built = join(PROJECT_ROOT, 'out', 'cli', 'svc-emu.mjs');
    if (!existsSync(built)) ctx.skip('the CLI is not built (node scripts/setup.mjs --quiet)');
    const bin = join(work, 'bin');
    await mkdir(bin, { recursive: true });
    if (!existsSync(join(bin, 'svc-emu'))) await symlink(join(PROJECT_ROOT, 'bin', 'svc-emu.mjs'), join(bin, 'svc-emu'));
    // Not spawnSync: the core answering the script's `svc-emu __complete snippets` runs in this process.
    const complete = async (words: string[]) => {
      const quoted = words.map((w) => `'${w}'`).join(' ');
      const r = await run(
        'bash',
        [
          '-c',
          `source '${scripts.bash}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _svc_emu; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { encoding: 'utf8', cwd: work, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, timeout: 20_000 },
      );
      return r.stdout.split('\n').filter(Boolean).sort();
    };
    expect(await complete(['svc-emu', 'inv'])).toEqual(['invocations', 'invoke']);
    expect(await complete(['svc-emu', '--data-dir', '/x', 'li'])).toEqual(['lima', 'list']);
    expect(await complete(['svc-emu', 'tenant', ''])).toEqual(['create', 'limits', 'list']);
    expect(await complete(['svc-emu', 'list', '--'])).toEqual(['--data-dir', '--help', '--json']);
    expect(await complete(['svc-emu', 'logs', '--f'])).toEqual(['--follow']);
    expect(await complete(['svc-emu', 'init', '--template', ''])).toEqual(['hello', 'langgraph-agent', 'mastra-agent']);
    expect(await complete(['svc-emu', 'invocations', '--outcome', 'ha'])).toEqual(['handler_error']);
    expect(await complete(['svc-emu', 'invoke', ''])).toEqual(['alpha', 'beta-two']);
    expect(await complete(['svc-emu', 'logs', '--follow', '--snippet', 'b'])).toEqual(['beta-two']);
  }, 60_000);
});
