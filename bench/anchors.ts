import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { readRuntimeInfo } from '../executor/runtime-info';
import { ROOT } from './lib';

/**
 * What the speed suite measures the emulator against, in the same run: Miniflare (the anchor: a local
 * Workers runtime, installed by the bench itself into bench/anchors/, never an app dependency) and a bare
 * Bun.serve hello (the floor: an HTTP hello in the project's Bun with nothing in between). Each answers
 * POST `{ name }` with `{ hello: name }`, as the emulator's hello snippet does.
 */
export const ANCHORS_DIR = join(ROOT, 'bench', 'anchors');

export interface Served {
  url: string;
  /** What runs (names and versions), for the report. */
  what: string;
  close(): Promise<void>;
}

/** A server that could not be had here, and why: the table says so instead of leaving a blank. */
export interface Unavailable {
  unavailable: string;
}

const HELLO_WORKER = `export default {
  async fetch(req) {
    const input = req.method === 'POST' ? await req.json() : {};
    return Response.json({ hello: input.name ?? 'world' });
  },
};
`;

const BUN_FLOOR = `const server = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(req) {
    const input = req.method === 'POST' ? await req.json() : {};
    return Response.json({ hello: input.name ?? 'world' });
  },
});
console.log(server.port);
`;

const version = (pkgJson: string) => (JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string }).version;

/**
 * Installs bench/anchors/package.json's pins once (`npm install --prefix bench/anchors`); skipped when the
 * pinned Miniflare is there. Returns null when ready, or why not.
 */
export function ensureAnchorsInstalled(log: (line: string) => void): string | null {
  const wanted = (JSON.parse(readFileSync(join(ANCHORS_DIR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> })
    .dependencies.miniflare;
  const installed = join(ANCHORS_DIR, 'node_modules', 'miniflare', 'package.json');
  if (existsSync(installed) && version(installed) === wanted) return null;
  log(`bench: installing the anchors (miniflare ${wanted}) into bench/anchors/ …`);
  const r = spawnSync('npm', ['install', '--prefix', ANCHORS_DIR, '--no-audit', '--no-fund', '--loglevel', 'error'], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (r.error) return `npm install --prefix bench/anchors failed to run: ${r.error.message}`;
  if (r.status !== 0) return `npm install --prefix bench/anchors exited with ${r.status}: ${(r.stderr || r.stdout).trim().slice(-400)}`;
  if (!existsSync(installed)) return 'npm install --prefix bench/anchors left no miniflare package';
  return null;
}

interface MiniflareLike {
  ready: Promise<URL>;
  dispose(): Promise<void>;
}
type MiniflareModule = { Miniflare: new (opts: Record<string, unknown>) => MiniflareLike };

/** Miniflare (its workerd child) serving the hello worker on 127.0.0.1, or why it cannot run here. */
export async function startMiniflare(log: (line: string) => void): Promise<Served | Unavailable> {
  const notInstalled = ensureAnchorsInstalled(log);
  if (notInstalled) return { unavailable: notInstalled };
  const modDir = join(ANCHORS_DIR, 'node_modules', 'miniflare');
  try {
    const mod = (await import(pathToFileURL(join(modDir, 'dist', 'src', 'index.js')).href)) as MiniflareModule;
    const mf = new mod.Miniflare({
      modules: true,
      script: HELLO_WORKER,
      compatibilityDate: '2025-09-01',
      host: '127.0.0.1',
      port: 0,
    });
    const url = await mf.ready;
    const workerd = join(ANCHORS_DIR, 'node_modules', 'workerd', 'package.json');
    return {
      url: url.origin,
      what: `miniflare ${version(join(modDir, 'package.json'))} (workerd ${existsSync(workerd) ? version(workerd) : '?'})`,
      close: () => mf.dispose(),
    };
  } catch (err) {
    return { unavailable: `Miniflare did not start here: ${err instanceof Error ? err.message : String(err)}`.slice(0, 400) };
  }
}

/** A bare Bun.serve hello in the project's Bun (.runtimes/bun, as the runners use), or why not. */
export async function startBunFloor(): Promise<Served | Unavailable> {
  let bin: string;
  let bunVersion: string;
  try {
    const info = await readRuntimeInfo(ROOT);
    bin = info.bun.bin;
    bunVersion = info.bun.version;
  } catch (err) {
    return { unavailable: `no project Bun: ${err instanceof Error ? err.message : String(err)}` };
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-bun-floor-'));
  writeFileSync(join(dir, 'serve.ts'), BUN_FLOOR);
  const child = spawn(bin, [join(dir, 'serve.ts')], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const port = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`bun exited with ${code}`)));
      child.once('error', reject);
    });
    return {
      url: `http://127.0.0.1:${port.trim()}`,
      what: `Bun.serve (bun ${bunVersion})`,
      close: () =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }).finally(() => rmSync(dir, { recursive: true, force: true })),
    };
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    return { unavailable: `Bun.serve did not start: ${err instanceof Error ? err.message : String(err)}` };
  }
}

export const isServed = (s: Served | Unavailable): s is Served => 'url' in s;
