import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Importing the real `electron` from Node tries to download its binary (STACK.md): every Node-side
    // test gets a stub instead. Tests that need specific behaviour still vi.mock('electron', …).
    alias: [{ find: /^electron$/, replacement: fileURLToPath(new URL('./test/stubs/electron.ts', import.meta.url)) }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    reporters: ['default', './test/reporter.ts'],
  },
});
