#!/usr/bin/env node
// Launcher for the headless core. The real CLI is bundled from server/cli/bin.ts into
// out/cli/svc-emu.mjs by `npm run build` (scripts/setup.mjs); this file only finds it.
import { existsSync } from 'node:fs';

const bundle = new URL('../out/cli/svc-emu.mjs', import.meta.url);

if (!existsSync(bundle)) {
  process.stderr.write('svc-emu is not built yet: run `npm run build`\n');
  process.exit(1);
}

await import(bundle.href);
