// `svc-emu gui-token rotate` (server/cli/gui-token.ts), in-process through `main(argv, io)`: through a running
// core (which takes the new secret at once) and on the data dir's file when none runs.
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli';
import { GUI_SECRET_FILE } from '../../server/storage/gui-secret';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';

const dirs: string[] = [];
const cores: TestCore[] = [];
afterAll(async () => {
  for (const c of cores) await c.stop().catch(() => {});
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const cli = (argv: string[]) => runCli(argv);

/** Signs in with the token URL; the session cookie (name=value). */
async function signIn(core: TestCore): Promise<string> {
  const res = await fetch(`${core.url}/?token=${core.admin}`, { redirect: 'manual' });
  return res.headers.get('set-cookie')!.split(';')[0]!;
}
const infoStatus = async (core: TestCore, cookie: string) => (await fetch(`${core.url}/_emu/info`, { headers: { cookie } })).status;

describe('svc-emu gui-token rotate', () => {
  it('through the running core: every browser signed out at once, the new sign-in URL printed (and as JSON)', async () => {
    const dataDir = await tempDir('svc-emu-cli-');
    dirs.push(dataDir);
    const core = await startTestCore({ dataDir });
    cores.push(core);
    const cookie = await signIn(core);
    expect(await infoStatus(core, cookie)).toBe(200);

    const human = await cli(['gui-token', 'rotate', '--data-dir', dataDir]);
    expect(human, human.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(human.stdout).toBe(`Every browser is signed out of the GUI. Sign in again with:\n  ${core.url}/?token=${core.admin}\n`);
    expect(await infoStatus(core, cookie)).toBe(401);

    const again = await signIn(core);
    const json = await cli(['gui-token', 'rotate', '--data-dir', dataDir, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      rotated: true,
      running: true,
      sign_in_url: `${core.url}/?token=${core.admin}`,
      data_dir: dataDir,
    });
    expect(await infoStatus(core, again)).toBe(401);
  });

  it('with no core running: a new secret in the data dir (0600), so the next start refuses the old cookie', async () => {
    const dataDir = await tempDir('svc-emu-cli-');
    dirs.push(dataDir);
    let core = await startTestCore({ dataDir });
    const cookie = await signIn(core);
    await core.stop();
    const before = await readFile(join(dataDir, GUI_SECRET_FILE), 'utf8');

    const r = await cli(['gui-token', 'rotate', '--data-dir', dataDir]);
    expect(r, r.stderr).toMatchObject({ code: 0 });
    expect(r.stdout).toContain('No emulator runs on it: the sign-in URL is printed when it starts');
    expect(await readFile(join(dataDir, GUI_SECRET_FILE), 'utf8')).not.toBe(before);
    expect((await stat(join(dataDir, GUI_SECRET_FILE))).mode & 0o777).toBe(0o600);
    expect(await stat(join(dataDir, 'emulator.json')).catch(() => null)).toBeNull(); // its lock released

    core = await startTestCore({ dataDir });
    cores.push(core);
    expect(await infoStatus(core, cookie)).toBe(401);
    expect(await infoStatus(core, await signIn(core))).toBe(200);
  });

  it('says what is wrong: an unknown subcommand (usage, exit 2) and a data dir that does not exist', async () => {
    const bad = await cli(['gui-token', 'show', '--json']);
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout)).toMatchObject({ code: 'usage', detail: expect.stringContaining('svc-emu gui-token rotate') });
    const missing = await cli(['gui-token', 'rotate', '--data-dir', '/nonexistent/svc-emu-data']);
    expect(missing.code).toBe(1);
    expect(missing.stderr + missing.stdout).toMatch(/does not exist/);
  });
});
