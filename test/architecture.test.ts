/**
 * The layering of DESIGN.md, enforced: renderer imports nothing of the core; main imports the core
 * only through server/index.ts; server imports the executor only through executor/index.ts; the
 * executor imports neither server nor main (it may run inside a Lima VM, driven over a stream).
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = join(__dirname, '..');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const rel = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(rel));
    else if (/\.(ts|tsx|mts)$/.test(e.name)) out.push(rel);
  }
  return out;
}

/** Every relative import of a file, resolved to a path relative to the project root. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specs = [...text.matchAll(/(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]!);
  return specs.map((s) => relative(ROOT, resolve(join(ROOT, dirname(file)), s)));
}

const top = (p: string) => p.split('/')[0];

describe('layering', () => {
  it.each([
    ['renderer', (to: string) => top(to) === 'renderer' || to === 'main/bridge'],
    ['main', (to: string) => top(to) === 'main' || to === 'server' || to === 'server/index'],
    ['server', (to: string) => top(to) === 'server' || to === 'executor' || to === 'executor/index' || to === 'package.json'],
    ['executor', (to: string) => top(to) === 'executor'],
  ])('%s imports only what it may', (dir, allowed) => {
    const bad = sources(dir).flatMap((f) => importsOf(f).filter((to) => !allowed(to)).map((to) => `${f} → ${to}`));
    expect(bad).toEqual([]);
  });
});
