// The parts of scripts/setup.mjs that are plain logic, in-process: the command line, the manifest's derived pins,
// and how scripts/setup/run.mjs runs steps. test/shell/setup.test.ts runs the whole script as a process.
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain .mjs module (Node built-ins only, no types)
import { parseArgs, parseRequirementPins, runtimePackageDependencies, STEPS } from '../../scripts/setup.mjs';
// @ts-expect-error -- as above
import { pendingSteps, runSteps } from '../../scripts/setup/run.mjs';

/** The repository's set-up lock stays out of it: a real set-up may hold it while this runs. */
const NO_LOCK = { acquire: async () => () => {} };

interface FakeStep {
  name: string;
  title: string;
  applies?: (ctx: { forTest: boolean }) => boolean;
  isDone: () => boolean;
  run: () => Promise<string | void>;
}

/** A step that records its runs and is done once it ran (or from the start when `done`). */
function step(name: string, ran: string[], opts: { done?: boolean; forTestOnly?: boolean } = {}): FakeStep {
  let done = opts.done ?? false;
  return {
    name,
    title: name,
    ...(opts.forTestOnly ? { applies: (ctx: { forTest: boolean }) => ctx.forTest } : {}),
    isDone: () => done,
    run: async () => {
      ran.push(name);
      done = true;
    },
  };
}

describe('scripts/setup parts', () => {
  it('parses the command line it documents, and refuses the rest', () => {
    expect(parseArgs(['--quiet', '--for=test', '--no-build'])).toMatchObject({ quiet: true, forTest: true, build: false, check: false });
    expect(parseArgs(['--for', 'vm', '--check'])).toMatchObject({ forVm: true, check: true });
    expect(parseArgs(['--relock-runtimes', '--retry-host-tools'])).toMatchObject({ relockRuntimes: true, retryHostTools: true });
    expect(() => parseArgs(['--for=prod'])).toThrow('unknown --for value: prod');
    expect(() => parseArgs(['--frobnicate'])).toThrow('unknown option: --frobnicate');
  });

  it('keeps its steps in the order that makes each one’s inputs exist', () => {
    expect(STEPS.map((s: FakeStep) => s.name)).toEqual([
      'deps',
      'bun-runtime',
      'python-runtime',
      'python-debugger', // into the Python runtime's folder, before the lock records it
      'bubblewrap',
      'runtime-lock',
      'runner-bytecode',
      'build',
      'chromium',
      'zsh', // test-only, like chromium: the completion test parses the zsh script with it
    ]);
  });

  it('derives the pins the runtimes are checked against', () => {
    expect(parseRequirementPins('Langchain_Core==1.2.3 ; python_version >= "3.11"\n# c\nx>=1\nuv==0.13.0\n')).toEqual({
      'langchain-core': '1.2.3',
      uv: '0.13.0',
    });
    expect(runtimePackageDependencies({ bun: { version: '1.4.4', packages: { zod: '4.0.0' } } })).toEqual({
      '@svc/integrations': 'file:../../executor/runtimes/bun/packages/svc-integrations',
      '@svc/store': 'file:../../executor/runtimes/bun/packages/svc-store',
      bun: '1.4.4',
      zod: '4.0.0',
    });
  });

  it('runs nothing, takes no lock and says nothing when every step is done', async () => {
    const ran: string[] = [];
    const steps = [step('a', ran, { done: true }), step('b', ran, { done: true })];
    expect(pendingSteps(steps, {})).toEqual([]);
    expect(await runSteps(steps, { quiet: true }, NO_LOCK)).toEqual([]);
    expect(ran).toEqual([]);
  });

  it('runs, in order, the steps that apply and are not done', async () => {
    const ran: string[] = [];
    const steps = [step('a', ran), step('b', ran, { done: true }), step('c', ran, { forTestOnly: true }), step('d', ran)];
    expect(pendingSteps(steps, {})).toEqual(['a', 'd']);
    expect(pendingSteps(steps, { forTest: true })).toEqual(['a', 'c', 'd']);
    expect(await runSteps(steps, { quiet: true, forTest: true }, NO_LOCK)).toEqual(['a', 'c', 'd']);
    expect(ran).toEqual(['a', 'c', 'd']);
    expect(await runSteps(steps, { quiet: true, forTest: true }, NO_LOCK)).toEqual([]); // idempotent
  });

  it('stops at the first step that fails, and reports it', async () => {
    const ran: string[] = [];
    const failing: FakeStep = {
      ...step('bad', ran),
      run: async () => {
        throw new Error('the tool failed');
      },
    };
    await expect(runSteps([step('a', ran), failing, step('z', ran)], { quiet: true }, NO_LOCK)).rejects.toThrow('the tool failed');
    expect(ran).toEqual(['a']);
  });
});
