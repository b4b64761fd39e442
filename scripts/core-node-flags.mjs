// The node flags a headless core (`svc-emu serve`) runs with, for the scripts and the bench that start one
// with `node bin/svc-emu.mjs` (scripts/start.mjs, scripts/demo.mjs, bench/lib.ts). bin/svc-emu.mjs's first
// line names the same flags for a direct start (`svc-emu serve`, `npx svc-emu serve`); test/cli/idle-footprint.test.ts
// checks that both agree. Why (docs/architecture.md, "What the idle core holds"): V8 grows the young generation
// to 16 MB a semi-space under load and never gives it back, ~25 MB of the idle core's RSS; 2 MB a semi-space
// holds a warm invoke's garbage several times over. They only work on node's command line (v8.setFlagsFromString
// at run time changes nothing once the heap is set up).
export const CORE_NODE_FLAGS = ['--max-semi-space-size=2'];
