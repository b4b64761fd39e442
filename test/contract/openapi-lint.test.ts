// Redocly CLI lints the checked-in OpenAPI document (docs/openapi.json, which test/server/openapi.test.ts
// keeps equal to what the code generates) with the repository's redocly.yaml: 0 errors and 0 warnings.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { PROJECT_ROOT } from '../helpers/core';

const REDOCLY = join(PROJECT_ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

const lintReport = z.object({
  totals: z.object({ errors: z.number(), warnings: z.number(), ignored: z.number() }),
  version: z.string(),
  problems: z.array(
    z.object({
      ruleId: z.string(),
      severity: z.string(),
      message: z.string(),
      location: z.array(z.object({ pointer: z.string().optional() })).default([]),
    }),
  ),
});

function redoclyLint(): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [REDOCLY, 'lint', 'docs/openapi.json', '--config', 'redocly.yaml', '--format', 'json'],
      // REDOCLY_TELEMETRY: redocly.yaml turns it off too; no usage report leaves a test run either way.
      { cwd: PROJECT_ROOT, env: { ...process.env, REDOCLY_TELEMETRY: 'off', NO_COLOR: '1' }, maxBuffer: 64 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('docs/openapi.json under Redocly CLI (redocly.yaml)', () => {
  test('no problem is hidden in an ignore file', () => {
    // `redocly lint --generate-ignore-file` would write one: every problem must be fixed or its rule turned off,
    // with a reason, in redocly.yaml.
    expect(existsSync(join(PROJECT_ROOT, '.redocly.lint-ignore.yaml'))).toBe(false);
  });

  test('lints with 0 errors and 0 warnings', async () => {
    expect(existsSync(REDOCLY), `${REDOCLY} is missing: run \`npm ci\` (@redocly/cli is a dev dependency)`).toBe(true);
    const run = await redoclyLint();
    const start = run.stdout.indexOf('{');
    expect(start, `redocly lint printed no JSON report (exit ${run.code}):\n${run.stdout}\n${run.stderr}`).toBeGreaterThanOrEqual(0);
    const report = lintReport.parse(JSON.parse(run.stdout.slice(start)));
    const counts = `Redocly CLI ${report.version}: ${report.totals.errors} errors, ${report.totals.warnings} warnings, ${report.totals.ignored} ignored`;
    console.log(counts);
    const byRule = new Map<string, string[]>();
    for (const p of report.problems) {
      const key = `${p.severity} ${p.ruleId}`;
      byRule.set(key, [...(byRule.get(key) ?? []), `${p.location[0]?.pointer ?? '?'}: ${p.message}`]);
    }
    const listing = [...byRule].map(([rule, where]) => `${rule} (${where.length}):\n  ${where.slice(0, 10).join('\n  ')}`).join('\n');
    expect(
      { errors: report.totals.errors, warnings: report.totals.warnings, ignored: report.totals.ignored },
      `${counts}\n${listing}`,
    ).toEqual({
      errors: 0,
      warnings: 0,
      ignored: 0,
    });
    expect(run.code, run.stderr).toBe(0);
  });
});
