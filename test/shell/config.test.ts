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

  it('passes the async and egress flags of svc-emu serve (every --egress-allow)', () => {
    const argv = [
      '--egress-profile',
      'production',
      '--egress-allow',
      '127.0.0.1:7171',
      '--egress-allow=[::1]:8080',
      '--async-workers=4',
      '--callback-retry-scale',
      '0.001',
    ];
    expect(resolveShellConfig(argv, {}, '/p')).toEqual({
      dataDir: '/p/.svc-emu',
      workspace: '/p',
      port: 0,
      egressProfile: 'production',
      egressAllow: ['127.0.0.1:7171', '[::1]:8080'],
      asyncWorkers: 4,
      callbackRetryScale: 0.001,
    });
  });

  it('passes the egress mode flags of svc-emu serve (--egress-mode, --replay-speed)', () => {
    expect(resolveShellConfig(['--egress-mode', 'replay', '--replay-speed=2'], {}, '/p')).toMatchObject({
      egressMode: 'replay',
      replaySpeed: 2,
    });
  });

  it('passes the terminal flags of svc-emu serve (--log-level, --log-format)', () => {
    expect(resolveShellConfig(['--log-level', 'debug', '--log-format=json'], {}, '/p')).toMatchObject({
      logLevel: 'debug',
      logFormat: 'json',
    });
  });
});
