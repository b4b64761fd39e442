import { describe, expect, it } from 'vitest';
import { resolveShellConfig } from '../../main/config';

describe('main/config resolveShellConfig', () => {
  it('defaults to the cwd as workspace, ./.svc-emu as data dir and any free port', () => {
    expect(resolveShellConfig(['/app/out/main/index.js'], {}, '/home/me/proj')).toEqual({
      dataDir: '/home/me/proj/.svc-emu',
      workspace: '/home/me/proj',
      port: 0,
    });
  });

  it('reads flags in both spellings, ignores Electron/Chromium flags, and beats the environment', () => {
    const argv = ['.', '--enable-logging', '--workspace', 'fixtures/ws', '--data-dir=/var/emu', '--port=8080', '--host', '0.0.0.0'];
    expect(resolveShellConfig(argv, { SVC_EMU_WORKSPACE: '/env/ws', SVC_EMU_DATA_DIR: '/env/data' }, '/p')).toEqual({
      dataDir: '/var/emu',
      workspace: '/p/fixtures/ws',
      port: 8080,
      host: '0.0.0.0',
    });
  });

  it('falls back to SVC_EMU_* and ignores a bad port', () => {
    expect(resolveShellConfig(['--port', 'nope'], { SVC_EMU_WORKSPACE: '/env/ws', SVC_EMU_DATA_DIR: 'rel' }, '/p')).toEqual({
      dataDir: '/p/rel',
      workspace: '/env/ws',
      port: 0,
    });
  });
});
