// scripts/setup.mjs and bin/svc-emu.mjs as real processes.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { coreReady, ROOT, runNode } from './helpers';

// Without the core's entries the build cannot succeed yet: then check the install half only.
const scope = coreReady ? [] : ['--no-build'];

describe('scripts/setup.mjs', () => {
  it('is idempotent: once done, a second run does no work and prints nothing with --quiet', { timeout: 300_000 }, async () => {
    const first = await runNode(['scripts/setup.mjs', '--quiet', ...scope]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);

    const check = await runNode(['scripts/setup.mjs', '--check', ...scope]);
    expect(check.stdout.trim()).toBe('setup: nothing to do');
    expect(check.code).toBe(0);

    const second = await runNode(['scripts/setup.mjs', '--quiet', ...scope]);
    expect(second).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(second.ms).toBeLessThan(3000); // ~70 ms on an idle machine (node start-up included)

    const loud = await runNode(['scripts/setup.mjs', ...scope]);
    expect(loud).toMatchObject({ code: 0, stdout: '' }); // no step did work: no line
  });

  it('refuses unknown options with a clear message', async () => {
    const result = await runNode(['scripts/setup.mjs', '--frobnicate']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('unknown option: --frobnicate');
  });
});

describe('bin/svc-emu.mjs', () => {
  it('says how to build when the CLI bundle is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bin-'));
    try {
      mkdirSync(join(dir, 'bin'));
      copyFileSync(join(ROOT, 'bin/svc-emu.mjs'), join(dir, 'bin/svc-emu.mjs'));
      const result = await runNode([join(dir, 'bin/svc-emu.mjs'), 'serve'], { cwd: dir });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('svc-emu is not built yet: run `npm run build`');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
