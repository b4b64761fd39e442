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
      // No comments and ASCII only (other characters as \u escapes): V8 keeps each module's source as a string
      // for the core's life, and one character outside Latin-1 makes the whole chunk two bytes a character
      // (~1.2 MB of the idle core's heap; docs/architecture.md, "What the idle core holds"). The maps keep the comments.
      output: {
        format: 'es',
        entryFileNames: 'svc-emu.mjs',
        chunkFileNames: '[name]-[hash].mjs',
        comments: false,
        charset: 'ascii',
      },
    },
  },
});
