// Services speak the domain, the HTTP edge speaks HTTP: nothing under server/services or server/domain
// imports server/http, server/api or Koa (what serves HTTP), and server/domain (the refusals) imports nothing at all. Imports
// are read by the TypeScript compiler's own pre-parser (static, dynamic and `export … from`), not by a regex.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

function sourcesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => join(dir, f));
}

/** Every module a file names: repo-relative paths for relative specifiers, package names otherwise. */
function importsOf(file: string, text = readFileSync(join(ROOT, file), 'utf8')): string[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles.map(({ fileName }) =>
    fileName.startsWith('.')
      ? relative(ROOT, resolve(ROOT, dirname(file), fileName))
          .split(sep)
          .join('/')
      : fileName,
  );
}

const HTTP_LAYERS = ['server/http', 'server/api'];
// The HTTP server's framework; node:http stays allowed (the egress service is an outbound HTTP client).
const HTTP_PACKAGES = /^(koa|@koa\/.*|koa-.*)$/;

/** Why `file` may not import `target`, or null when it may. */
function violation(file: string, target: string): string | null {
  if (HTTP_LAYERS.some((layer) => target === layer || target.startsWith(`${layer}/`))) return `${file} imports ${target} (the HTTP edge)`;
  if (HTTP_PACKAGES.test(target)) return `${file} imports ${target} (HTTP)`;
  if (file.startsWith('server/domain/') && !target.startsWith('server/domain/'))
    return `${file} imports ${target} (the domain imports nothing)`;
  return null;
}

describe('service boundaries', () => {
  const files = [...sourcesUnder('server/services'), ...sourcesUnder('server/domain')];

  it('finds the services and the domain errors to check', () => {
    expect(files.filter((f) => f.startsWith('server/services/')).length).toBeGreaterThanOrEqual(10);
    expect(files).toContain('server/domain/errors.ts');
  });

  it('flags what it is meant to flag (the checker itself)', () => {
    const sample = [
      "import { BODY_LIMIT_BYTES } from '../http/body';",
      "import type { X } from '../api/schemas';",
      "export { y } from '../http/sse';",
      "const m = await import('../api/routes');",
      "import type { Context } from 'koa';",
    ].join('\n');
    const found = importsOf('server/services/sample.ts', sample).map((t) => violation('server/services/sample.ts', t));
    expect(found.every((v) => v !== null)).toBe(true);
    expect(found).toHaveLength(5);
    expect(violation('server/services/sample.ts', 'server/domain/errors')).toBeNull();
    expect(violation('server/domain/errors.ts', 'server/storage/schema')).not.toBeNull();
  });

  it('no service or domain module imports server/http, server/api or Koa; server/domain imports nothing', () => {
    const found = files.flatMap((file) => importsOf(file).flatMap((target) => violation(file, target) ?? []));
    expect(found).toEqual([]);
  });
});
