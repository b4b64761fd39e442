import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, type Stats } from './lib';
import { TARGETS, type Measured } from './targets';

/**
 * The speed suite's one table: a row per figure with the emulator's value, the floors and the anchor
 * measured in the same run, their ratios, the target (bench/targets.ts), whether it is met, and the
 * figure before issue 16 (bench/baseline-issue16.json).
 */
export interface Row {
  key: string;
  figure: string;
  before: string;
  emulator: string;
  floor: string;
  anchor: string;
  ratio: string;
  target: string;
  /** true/false: judged; null: a target that could not be judged here (why: in `note`); undefined: no target. */
  met: boolean | null | undefined;
  measured: Measured;
  note?: string;
}

interface Baseline {
  rows: Record<string, { text: string }>;
}

export function loadBaseline(): Baseline {
  return JSON.parse(readFileSync(join(ROOT, 'bench', 'baseline-issue16.json'), 'utf8')) as Baseline;
}

const fmt = (x: number) => (x >= 100 ? Math.round(x).toLocaleString('en-US') : x >= 10 ? x.toFixed(1) : x.toFixed(2));
/** `p50 / p99 ms`. */
export const ms = (s: Pick<Stats, 'p50_ms' | 'p99_ms'>) => `${fmt(s.p50_ms)} / ${fmt(s.p99_ms)} ms`;
export const ratio = (a: number, b: number | null | undefined) => (b ? `${(a / b).toFixed(2)}×` : '—');

export interface RowInput {
  key: string;
  figure: string;
  emulator: string;
  measured: Measured;
  floor?: string;
  anchor?: string;
  ratio?: string;
  note?: string;
}

/** A row, judged against its target (if it has one) and given its before figure. */
export function makeRow(r: RowInput, baseline: Baseline): Row {
  const t = TARGETS[r.key];
  return {
    key: r.key,
    figure: r.figure,
    before: baseline.rows[r.key]?.text ?? '—',
    emulator: r.emulator,
    floor: r.floor ?? '',
    anchor: r.anchor ?? '',
    ratio: r.ratio ?? '',
    target: t?.text ?? '',
    met: t ? t.met(r.measured) : undefined,
    measured: r.measured,
    ...(r.note ? { note: r.note } : {}),
  };
}

const MET = (m: Row['met']) => (m === undefined ? '' : m === null ? '?' : m ? 'yes' : 'NO');

/** The table as text (markdown pipes), then the notes of rows that carry one. */
export function renderTable(rows: Row[]): string {
  const head = ['figure', 'before', 'emulator', 'floor', 'anchor', 'ratio', 'target', 'met?'];
  const cells = rows.map((r) => [r.figure, r.before, r.emulator, r.floor, r.anchor, r.ratio, r.target, MET(r.met)]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(' | ')} |`;
  const out = [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)];
  const notes = rows.filter((r) => r.note).map((r) => `- ${r.figure}: ${r.note}`);
  const judged = rows.filter((r) => r.met !== undefined);
  const summary = `${judged.filter((r) => r.met === true).length} of ${judged.length} targets met, ${judged.filter((r) => r.met === null).length} not judged here`;
  return [...out, '', summary, ...(notes.length ? ['', 'notes:', ...notes] : [])].join('\n');
}
