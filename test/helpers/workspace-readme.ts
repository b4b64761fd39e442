/** The example workspace README's table, which the example tests hold the examples to. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from './core';

export interface ReadmeRow {
  runtime: string;
  /** The input cell's first JSON. */
  input: string;
  /** The answer cell's first JSON (`null` too: an async generator's answer). */
  answer: string;
  /** The agent examples: their answer is what they say with the fake provider set up. */
  needsProvider: boolean;
}

export async function readmeRows(): Promise<Map<string, ReadmeRow>> {
  const text = await readFile(join(PROJECT_ROOT, 'fixtures', 'workspace', 'README.md'), 'utf8');
  const rows = new Map<string, ReadmeRow>();
  for (const line of text.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const name = /^`([a-z0-9-]+)`$/.exec(cells[1] ?? '')?.[1];
    if (!name || cells.length < 7) continue;
    const firstJson = (cell: string) => /`(\{.*?\}|null)`/.exec(cell)?.[1] ?? '';
    rows.set(name, {
      runtime: cells[2]!,
      input: firstJson(cells[4]!),
      answer: firstJson(cells[5]!),
      needsProvider: cells[5]!.startsWith('with the fake provider:'),
    });
  }
  return rows;
}
