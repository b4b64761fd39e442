/**
 * The README's tour works top to bottom: the `## A five-minute tour (curl)` section's sh blocks are run as
 * written, in one bash, against a real core (started as `npm start` starts it: on the example workspace, its
 * data dir `./.svc-emu` of the folder the commands run in), with real Bun and Python, curl and the CLI. Each
 * `# →` expectation is checked against what its command printed: every fragment between `…` (and every JSON
 * member of a fragment) must appear in the output, in any order. The only edits made to the text: the key
 * and the URL the reader pastes, and free ports instead of 7070 and 7171.
 */
import { spawn } from 'node:child_process';
import { readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';

export interface TourStep {
  /** The command as written (continuation lines joined with their `\`). */
  command: string;
  /** The `# →` text after it (continuation lines included), or null. */
  expect: string | null;
  /** Line number in README.md. */
  line: number;
}

/** The sh blocks of one README section, as steps: a command and the `# →` expectation that follows it. */
export function tourSteps(readme: string, heading: string): TourStep[] {
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => l.trim() === heading);
  if (start < 0) throw new Error(`README.md has no section '${heading}'`);
  const end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  const steps: TourStep[] = [];
  let inBlock = false;
  let pending: TourStep | null = null;
  let expecting = false;
  for (let i = start + 1; i < (end < 0 ? lines.length : end); i++) {
    const line = lines[i]!;
    if (/^```sh\s*$/.test(line)) {
      inBlock = true;
      continue;
    }
    if (/^```\s*$/.test(line)) {
      inBlock = false;
      expecting = false;
      continue;
    }
    if (!inBlock) continue;
    const t = line.trim();
    if (t.startsWith('# →')) {
      const last = steps.at(-1);
      if (last) last.expect = (last.expect ? `${last.expect}\n` : '') + t.slice(3).trim();
      expecting = true;
      continue;
    }
    if (expecting && /^#\s{2,}/.test(t)) {
      steps.at(-1)!.expect += `\n${t.replace(/^#\s+/, '')}`;
      continue;
    }
    expecting = false;
    if (t === '' || t.startsWith('#')) continue;
    // A command, perhaps with an inline `# → …` and perhaps continued with `\`.
    const inline = /\s{2,}# → (.*)$/.exec(line);
    const text = inline ? line.slice(0, inline.index) : line;
    if (pending) {
      pending.command += `\n${text}`;
      if (inline) pending.expect = inline[1]!.trim();
    } else {
      pending = { command: text, expect: inline ? inline[1]!.trim() : null, line: i + 1 };
    }
    if (/\\\s*$/.test(text)) continue;
    steps.push(pending);
    pending = null;
    if (inline) expecting = true;
  }
  return steps;
}

/**
 * What an expectation asks for: its fragments between `…`, ` / ` (a line break in a short form) and line
 * breaks; a JSON-looking fragment split into its members; parenthesised remarks left out.
 */
export function expectedPieces(expectation: string): string[] {
  return expectation
    .replace(/\([^()]*\)\s*$/gm, '') // "(then "two", "three", 0.3 s apart)"
    .split(/…|\n| \/ /)
    .flatMap((f) => f.split(/,(?=")|,(?=\{)/))
    .map((f) =>
      f
        .trim()
        .replace(/^[{[,\s]+/, '')
        .replace(/[}\],\s]+$/, ''),
    )
    .filter((f) => f.length > 1 && /[A-Za-z0-9]/.test(f));
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

function hasCommand(cmd: string): Promise<boolean> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    p.on('exit', (code) => resolve(code === 0));
    p.on('error', () => resolve(false));
  });
}

const HEADING = '## A five-minute tour (curl)';
let dir: string;
let core: TestCore | null = null;

beforeAll(async () => {
  dir = await tempDir('svc-emu-tour-');
});
afterAll(async () => {
  await core?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('README: the five-minute tour', () => {
  it('parses the tour into commands and expectations', async () => {
    const steps = tourSteps(await readFile(join(PROJECT_ROOT, 'README.md'), 'utf8'), HEADING);
    expect(steps.length).toBeGreaterThan(30);
    expect(steps.filter((s) => s.expect).length).toBeGreaterThan(8);
    expect(steps[0]!.command).toMatch(/^export SVC=/);
    expect(expectedPieces('{"a":1,"b":"x"} … (then more)')).toEqual(['"a":1', '"b":"x"']);
    expect(expectedPieces('HTTP/1.1 200 OK\nX-Id: inv_…')).toEqual(['HTTP/1.1 200 OK', 'X-Id: inv_']);
  });

  it('runs top to bottom against a real core, each expectation met', async (ctx) => {
    for (const cmd of ['bash', 'curl']) if (!(await hasCommand(cmd))) ctx.skip(`${cmd} is not installed: the tour needs it`);
    const readme = await readFile(join(PROJECT_ROOT, 'README.md'), 'utf8');
    const steps = tourSteps(readme, HEADING);
    // The folder the reader runs the tour in: the checkout, as far as the commands can tell.
    for (const name of ['scripts', 'node_modules', 'fixtures']) await symlink(join(PROJECT_ROOT, name), join(dir, name));
    core = await startTestCore({ dataDir: join(dir, '.svc-emu'), keepDir: true, workspace: join(PROJECT_ROOT, 'fixtures', 'workspace') });
    const port = String(core.emu.port);
    const fakePort = String(await freePort());
    const ports = (s: string) => s.replace(/\b7070\b/g, port).replace(/\b7171\b/g, fakePort);

    const script = [
      'exec 2>&1',
      // The fake provider the tour starts in the background goes when the tour ends.
      "trap 'kill $(jobs -p) 2>/dev/null' EXIT",
      `npx() { if [ "$1" = svc-emu ]; then shift; node ${JSON.stringify(join(PROJECT_ROOT, 'bin', 'svc-emu.mjs'))} "$@"; else command npx "$@"; fi; }`,
      ...steps.flatMap((s, i) => {
        const command = i === 0 && /KEY=svc_…/.test(s.command) ? `export SVC=${core!.url} KEY=${core!.key}` : ports(s.command);
        return [`printf '\\n@@step ${i}@@\\n'`, command, `printf '\\n@@rc %s@@' $?`];
      }),
      `printf '\\n@@end@@\\n'`,
    ].join('\n');
    await writeFile(join(dir, 'tour.sh'), script);

    const run = spawn('bash', ['tour.sh'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let out = '';
    run.stdout.on('data', (c: Buffer) => (out += c.toString()));
    run.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((res) => run.once('exit', res));
    expect(out, 'the tour ran to its end').toContain('@@end@@');
    expect(code).toBe(0);

    const outputs = out.split(/\n@@step (\d+)@@\n/);
    const byStep = new Map<number, string>();
    const codes = new Map<number, number>();
    for (let i = 1; i < outputs.length; i += 2) {
      const text = outputs[i + 1]!.replace(/\r/g, '').replace(/\n@@end@@\n?$/, '');
      const rc = /\n@@rc (\d+)@@$/.exec(text);
      codes.set(Number(outputs[i]), rc ? Number(rc[1]) : -1);
      byStep.set(Number(outputs[i]), rc ? text.slice(0, rc.index) : text);
    }
    const failures: string[] = [];
    steps.forEach((s, i) => {
      const got = byStep.get(i) ?? '';
      // No step fails silently: curl errors, bash errors and CLI usage errors show up as such.
      if (codes.get(i) !== 0 || /^curl: \(\d+\)|command not found|^svc-emu: |syntax error/m.test(got))
        failures.push(`README.md:${s.line} ${s.command}\n  failed (exit ${codes.get(i)}):\n${got}`);
      if (!s.expect) return;
      const missing = expectedPieces(ports(s.expect)).filter((piece) => !got.includes(piece));
      if (missing.length)
        failures.push(`README.md:${s.line} ${s.command}\n  expected ${JSON.stringify(missing)}\n  got:\n${got.slice(0, 2000)}`);
    });
    expect(failures, failures.join('\n\n')).toEqual([]);
  }, 240_000);
});
