// Builds the desktop app: main process (out/main), sandboxed preload (out/preload, CJS) and the React
// renderer (out/renderer). The headless CLI bundle is vite.cli.config.ts. Both run from scripts/setup.mjs.
import { resolve } from 'node:path';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'electron-vite';
import { CSP_NONCE_PLACEHOLDER } from './server/http/csp';

const root = process.cwd();

export default defineConfig({
  main: {
    build: {
      outDir: resolve(root, 'out/main'),
      // Runtime dependencies stay external (node_modules ships with the app), except the ESM-only ones:
      // a CJS main bundle cannot require() them, so they are bundled in.
      externalizeDeps: { exclude: ['lowdb', 'chokidar'] },
      sourcemap: true,
      rolldownOptions: {
        input: { index: resolve(root, 'main/index.ts') },
        // Chunks beside index.js, so paths the core computes from import.meta.url mean the same everywhere.
        output: { chunkFileNames: '[name]-[hash].js' },
      },
    },
  },
  preload: {
    build: {
      outDir: resolve(root, 'out/preload'),
      sourcemap: true,
      rolldownOptions: {
        input: { index: resolve(root, 'main/preload.ts') },
        // A sandboxed preload cannot be an ES module.
        output: { format: 'cjs' },
      },
    },
  },
  renderer: {
    root: resolve(root, 'renderer'),
    base: './',
    plugins: [react()],
    // A placeholder the core replaces with a fresh nonce per index.html (server/http/csp.ts): Vite stamps it
    // on its tags and writes <meta property="csp-nonce">, which renderer/src/csp-nonce.ts reads.
    html: { cspNonce: CSP_NONCE_PLACEHOLDER },
    build: {
      outDir: resolve(root, 'out/renderer'),
      // The same GUI is served by the core to ordinary browsers (headless mode), not only to Electron's
      // Chromium: build for browsers in general (electron-vite would target Electron's Chrome only).
      target: 'es2022',
      minify: true,
      rolldownOptions: {
        input: { index: resolve(root, 'renderer/index.html') },
      },
    },
  },
});
