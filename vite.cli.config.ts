// Builds the headless CLI: server/cli/bin.ts → out/cli/svc-emu.mjs (ESM, Node). Runtime dependencies
// (package.json "dependencies") stay external and load from node_modules; everything else is bundled.
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { resolve } from 'node:path';
import { defineConfig } from 'vite';

const root = process.cwd();
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
const deps = Object.keys(pkg.dependencies ?? {});
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export default defineConfig({
  root,
  publicDir: false,
  logLevel: 'warn',
  ssr: { target: 'node', noExternal: true },
  build: {
    ssr: resolve(root, 'server/cli/bin.ts'),
    outDir: resolve(root, 'out/cli'),
    emptyOutDir: true,
    target: 'node20',
    minify: false,
    sourcemap: true,
    reportCompressedSize: false,
    rolldownOptions: {
      external: [...builtinModules.flatMap((m) => [m, `node:${m}`]), ...deps.map((d) => new RegExp(`^${escape(d)}(/.*)?$`))],
      // Chunks sit beside the entry, so paths a module computes from import.meta.url mean the same in all.
      output: { format: 'es', entryFileNames: 'svc-emu.mjs', chunkFileNames: '[name]-[hash].mjs' },
    },
  },
});
