/**
 * Comments cite only what is in the repository: every `*.md` a source comment names (a path from the root or
 * from the file's folder) exists, and a section it names in quotes right after the file name (a comma, then
 * the heading in double quotes) is a heading of that file. Documents that live outside the repository cannot be read by the next person.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');
const SOURCE = /\.(ts|tsx|mts|cts|mjs|cjs|js|py)$/;
const SKIP = new Set(['node_modules', 'out', 'dist', '.runtimes', '.git', '__pycache__', '.svc-emu', '.venv', 'bench-results']);

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name) || (entry.isDirectory() && entry.name === 'results' && dir.endsWith('bench'))) continue;
    const path = join(dir, entry.name);
    if (path === __filename) continue; // its own examples cite what does not exist, on purpose
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.isFile() && SOURCE.test(entry.name)) yield path;
  }
}

/** The comment text of a source file, line by line (code on a line is blanked; strings are not comments). */
export function commentLines(text: string, python: boolean): string[] {
  const out: string[] = [];
  let inBlock = false; // /* … */ or a Python docstring
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (python) {
      const quotes = (t.match(/"""|'''/g) ?? []).length;
      if (inBlock || quotes > 0) out.push(line);
      else if (t.startsWith('#')) out.push(line);
      else out.push(line.includes(' # ') ? line.slice(line.indexOf(' # ')) : '');
      if (quotes % 2 === 1) inBlock = !inBlock;
      continue;
    }
    if (inBlock) {
      out.push(line);
      if (t.includes('*/')) inBlock = false;
      continue;
    }
    if (t.startsWith('/*')) {
      out.push(line);
      inBlock = !t.includes('*/', 2);
    } else if (t.startsWith('//') || t.startsWith('*')) out.push(line);
    else out.push(line.includes(' // ') ? line.slice(line.indexOf(' // ')) : '');
  }
  return out;
}

interface Citation {
  file: string;
  line: number;
  doc: string;
  section?: string;
}

export function citations(file: string, text: string): Citation[] {
  const found: Citation[] = [];
  commentLines(text, file.endsWith('.py')).forEach((comment, i) => {
    for (const m of comment.matchAll(/(?<![\w/.-])((?:\.{1,2}\/)*[\w.-]+(?:\/[\w.-]+)*\.md)\b(?:,? "([^"]+)")?/g)) {
      found.push({ file, line: i + 1, doc: m[1]!, section: m[2] });
    }
  });
  return found;
}

function headings(doc: string): Set<string> {
  return new Set(
    readFileSync(doc, 'utf8')
      .split('\n')
      .filter((l) => /^#{1,6} /.test(l))
      .map((l) => l.replace(/^#+ /, '').trim()),
  );
}

/** What is wrong with one citation, or null: the document is missing, or has no such heading. */
function problem(c: Citation): string | null {
  const doc = [join(ROOT, c.doc), join(dirname(c.file), c.doc)].find((p) => existsSync(p));
  const where = `${relative(ROOT, c.file)}:${c.line}`;
  if (!doc) return `${where} cites ${c.doc}, which is not in the repository`;
  if (c.section && !headings(doc).has(c.section)) return `${where} cites ${c.doc} "${c.section}", which is not a heading there`;
  return null;
}

describe('comments cite documents in the repository', () => {
  const all = [...sourceFiles(ROOT)].flatMap((f) => citations(f, readFileSync(f, 'utf8')));

  it('every cited .md file exists, and every cited section is a heading of it', () => {
    expect(all.length).toBeGreaterThan(20); // the scan sees the comments at all
    expect(all.map(problem).filter((p) => p !== null)).toEqual([]);
  });

  it('the scan finds a citation of a missing document, and only in comments', () => {
    const ts = [
      '// the contract (docs/contract.md, "Invoke") and (NOWHERE.md)',
      'const name = \'README.md\'; // see docs/contract.md, "No such heading"',
      '/**',
      ' * multi-line: docs/host-facts.md',
      ' */',
      "readFile('notes.md');",
    ].join('\n');
    const found = citations(join(ROOT, 'x.ts'), ts);
    expect(found.map((c) => [c.line, c.doc, c.section])).toEqual([
      [1, 'docs/contract.md', 'Invoke'],
      [1, 'NOWHERE.md', undefined],
      [2, 'docs/contract.md', 'No such heading'],
      [4, 'docs/host-facts.md', undefined],
    ]);
    expect(found.map(problem)).toEqual([
      null,
      'x.ts:1 cites NOWHERE.md, which is not in the repository',
      'x.ts:2 cites docs/contract.md "No such heading", which is not a heading there',
      null,
    ]);
    const py = ['"""Docstring citing STACK.md."""', 'x = "a.md"  # and DESIGN.md', "open('y.md')"].join('\n');
    expect(citations(join(ROOT, 'x.py'), py).map((c) => c.doc)).toEqual(['STACK.md', 'DESIGN.md']);
  });
});
