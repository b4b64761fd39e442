import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Files that judge a CPU share, a latency or that work overlapped (cgroup quotas, flushes, concurrency): on a
 * 2-core machine they would measure the other tests instead of the code.
 */
const EXCLUSIVE = [
  'test/executor/limits.test.ts',
  'test/limits/cgroup-v1.real.test.ts',
  'test/api/stream.test.ts',
  'test/api/async.test.ts',
  'test/executor/pool.test.ts',
  'test/workspace/hazards.test.ts',
  'test/server/egress-record-replay.test.ts',
  'test/server/egress-replay-proxy.test.ts',
  'test/agents/record-replay.test.ts',
];

export default defineConfig({
  resolve: {
    // Importing the real `electron` from Node tries to download its binary (docs/host-facts.md): every Node-side
    // test gets a stub instead. Tests that need specific behaviour still vi.mock('electron', …).
    alias: [{ find: /^electron$/, replacement: fileURLToPath(new URL('./test/stubs/electron.ts', import.meta.url)) }],
  },
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    reporters: ['default', './test/reporter.ts'],
    // Every run shuffles the tests inside each file, so a test that leans on an earlier one fails here rather than
    // by luck later. vitest prints the seed when it starts and test/reporter.ts prints it again at the end; replay
    // an order with `npx vitest run --sequence.seed=N <file>` (docs/qa-recipes.md). Files keep vitest's own order
    // (slowest first, which keeps npm test short on 2 cores): each runs in its own process, so their order is no state.
    sequence: { shuffle: { files: false, tests: true } },
    // Two groups. Most files wait on processes, sockets and a browser more than on the CPU, so they share the
    // machine: with vitest's default (one worker per core minus one) a 2-core box ran the suite one file at a
    // time. The files whose outcome is a CPU share or a latency run afterwards, one at a time, alone.
    projects: [
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: EXCLUSIVE, maxWorkers: 3 } },
      { extends: true, test: { name: 'alone', include: EXCLUSIVE, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
