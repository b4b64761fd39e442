// Where snippets run, for `serve` and the desktop app: --executor, or Lima by default on macOS when a
// limactl is there.
import { afterAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { executorAgentFor } from '../../server/executor-choice';

const bin = mkdtempSync(join(tmpdir(), 'svc-emu-path-'));
writeFileSync(join(bin, 'limactl'), '#!/bin/sh\n');
chmodSync(join(bin, 'limactl'), 0o755);
afterAll(() => rmSync(bin, { recursive: true, force: true }));

describe('executorAgentFor', () => {
  const base = { projectRoot: '/src/app', path: '/usr/bin' };
  it('on this host by default, on Linux even with limactl on PATH', () => {
    expect(executorAgentFor({ ...base, platform: 'linux' })).toBeNull();
    expect(executorAgentFor({ ...base, platform: 'linux', path: bin })).toBeNull();
    expect(executorAgentFor({ ...base, platform: 'darwin' })).toBeNull(); // a Mac without Lima
  });

  it('in the Lima VM by default on macOS when limactl is on PATH or given', () => {
    expect(executorAgentFor({ ...base, platform: 'darwin', path: `/nowhere:${bin}` })?.slice(0, 3)).toEqual([
      'limactl',
      'shell',
      'svc-emu',
    ]);
    expect(executorAgentFor({ ...base, platform: 'darwin', limactl: '/opt/lima/bin/limactl' })?.slice(0, 3)).toEqual([
      '/opt/lima/bin/limactl',
      'shell',
      'svc-emu',
    ]);
    expect(executorAgentFor({ ...base, platform: 'darwin', path: bin, choice: 'local' })).toBeNull();
  });

  it('--executor lima anywhere (the agent argv mounts the checkout), but not without a project root', () => {
    const argv = executorAgentFor({ ...base, platform: 'linux', choice: 'lima' })!;
    expect(argv).toContain(join('/src/app', 'executor', 'agent.ts'));
    expect(executorAgentFor({ ...base, projectRoot: null, platform: 'darwin', choice: 'lima' })).toBeNull();
  });
});
