#!/usr/bin/env -S node --max-semi-space-size=2
// Launcher for the headless core. The real CLI is bundled from server/cli/bin.ts into
// out/cli/svc-emu.mjs by `npm run build` (scripts/setup.mjs); this file only finds it. The first line's node flags
// are scripts/core-node-flags.mjs's (a small young generation: the idle core's RSS, docs/architecture.md).
import { existsSync } from 'node:fs';

const bundle = new URL('../out/cli/svc-emu.mjs', import.meta.url);

if (!existsSync(bundle)) {
  process.stderr.write('svc-emu is not built yet: run `npm run build`\n');
  process.exit(1);
}

await import(bundle.href);
