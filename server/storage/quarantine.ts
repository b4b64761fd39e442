import { mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { jsonValueDepth } from '../http/body';
import { writeFileAtomic } from './atomic-file';
import type { QuarantineItem } from './db-check';

/**
 * The quarantine: what a start could not load, kept under `<data-dir>/quarantine/` instead of stopping
 * the core or being dropped. Each start that sets something aside writes
 *   <stamp>.report.json       {at, items: [{source, collection, index, label, problems, record?}], copies}
 *   <stamp>.db.json           the db.json it read, byte for byte (and `<stamp>.journal-N.jsonl` likewise)
 * Nothing here is deleted by the emulator: a person reads it (doctor, the Parity status page), fixes or
 * restores what they need through the API, and deletes the files.
 */

/** A file to keep byte for byte: `name` is its name in the quarantine (after the stamp). */
export interface QuarantineCopy {
  name: string;
  content: Buffer;
}

export interface QuarantineReport {
  at: string;
  items: QuarantineItem[];
  /** The kept copies' file names, inside the quarantine directory. */
  copies: string[];
}

/** Deepest record written into a report; a deeper one is left to the kept copy of its file. */
const REPORT_RECORD_MAX_DEPTH = 1000;

export const quarantineDir = (dataDir: string) => join(dataDir, 'quarantine');

/** Writes one start's report and copies (0600); returns the report. Never overwrites an earlier one. */
export async function keepAside(
  dir: string,
  at: Date,
  items: QuarantineItem[],
  copies: QuarantineCopy[],
): Promise<QuarantineReport & { file: string }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  let stamp = at.toISOString().replace(/[:.]/g, '-');
  const taken = new Set(await readdir(dir));
  for (let n = 2; [...taken].some((f) => f.startsWith(`${stamp}.`)); n++) stamp = `${at.toISOString().replace(/[:.]/g, '-')}-${n}`;
  const names: string[] = [];
  for (const c of copies) {
    const name = `${stamp}.${c.name}`;
    await writeFileAtomic(join(dir, name), c.content, 0o600);
    names.push(name);
  }
  const written = items.map((item) => {
    if (!('record' in item)) return item;
    if (jsonValueDepth(item.record, REPORT_RECORD_MAX_DEPTH) <= REPORT_RECORD_MAX_DEPTH) return item;
    const { record: _tooDeep, ...rest } = item;
    return { ...rest, record_omitted: `nests deeper than ${REPORT_RECORD_MAX_DEPTH} levels: it is in the kept copy of ${item.source}` };
  });
  const report: QuarantineReport = { at: at.toISOString(), items: written, copies: names };
  const file = `${stamp}.report.json`;
  await writeFileAtomic(join(dir, file), JSON.stringify(report, null, 2) + '\n', 0o600);
  return { ...report, file };
}

/** One quarantined thing as doctor shows it. */
export interface QuarantineEntry {
  at: string;
  /** The report that lists it (inside the quarantine directory). */
  report: string;
  source: string;
  collection: string | null;
  index: number | null;
  label: string;
  problems: string[];
  /** What to do about it. */
  action: string;
}

export interface QuarantineSummary {
  dir: string;
  /** How many things all reports list (`entries` holds the newest, at most `ENTRIES_SHOWN`). */
  count: number;
  entries: QuarantineEntry[];
  /** Every file in the quarantine directory. */
  files: string[];
  /** Reports that could not be read. */
  unreadable: string[];
}

export const ENTRIES_SHOWN = 200;

/** What a person can do about a quarantined thing, by what it is. */
export function quarantineAction(item: Pick<QuarantineItem, 'collection' | 'source'>, report: string): string {
  const where = `its copy is in quarantine/${report}`;
  if (item.collection === null) {
    return `The state started empty. The file as it was is kept next to ${report}: repair it and, with the emulator stopped, put it back as db.json, or import what you need; delete the quarantine files once done.`;
  }
  switch (item.collection) {
    case 'store':
      return `The key reads as missing. Fix the value and write it again (PUT /v1/store/{key}, or store.set in a snippet); ${where}.`;
    case 'secrets':
      return `The secret is not injected any more. Set it again (PUT /v1/secrets/{name}, the Secrets page); ${where}.`;
    case 'integrations':
      return `The integration is gone. Create it again (PUT /v1/integrations/{name}); ${where}.`;
    case 'invocations':
      return `The invocation is no longer listed, and an async job in it will not run again; ${where}.`;
    case 'snippets':
    case 'versions':
    case 'deployments':
    case 'environments':
      return `Recreate it through the API or the workspace folder (a version is re-created when its folder changes); ${where}.`;
    case 'tenants':
    case 'api_keys':
      return `Recreate the tenant or key (svc-emu tenant create, svc-emu key create); ${where}.`;
    default:
      return `This emulator does not use it; ${where}. Delete the file when you no longer need it.`;
  }
}

/** Reads every report under `dir` (newest first). A missing directory is an empty quarantine. */
export async function readQuarantine(dir: string): Promise<QuarantineSummary> {
  const files = (await readdir(dir).catch(() => [] as string[])).sort();
  const summary: QuarantineSummary = { dir, count: 0, entries: [], files, unreadable: [] };
  for (const file of [...files].reverse()) {
    const path = join(dir, file);
    if (file.endsWith('.report.json')) {
      let report: QuarantineReport;
      try {
        report = JSON.parse(await readFile(path, 'utf8')) as QuarantineReport;
        if (!Array.isArray(report.items)) throw new Error('no items');
      } catch {
        summary.unreadable.push(file);
        continue;
      }
      summary.count += report.items.length;
      for (const item of report.items) {
        if (summary.entries.length >= ENTRIES_SHOWN) break;
        summary.entries.push({
          at: String(report.at),
          report: file,
          source: String(item.source),
          collection: typeof item.collection === 'string' ? item.collection : null,
          index: typeof item.index === 'number' ? item.index : null,
          label: String(item.label),
          problems: Array.isArray(item.problems) ? item.problems.map(String) : [],
          action: quarantineAction(item, file),
        });
      }
    }
  }
  return summary;
}

/**
 * Blob names the quarantine's files mention (the kept copies and the reports): garbage collection keeps
 * them, so restoring a quarantined record or file finds its values. Reads every file: start-up only.
 */
export async function quarantinedBlobs(dir: string): Promise<string[]> {
  const blobs = new Set<string>();
  for (const file of await readdir(dir).catch(() => [] as string[])) {
    const path = join(dir, file);
    const info = await stat(path).catch(() => null);
    if (!info?.isFile()) continue;
    const text = await readFile(path, 'latin1').catch(() => '');
    for (const m of text.matchAll(/[0-9a-f]{64}/g)) blobs.add(m[0]);
  }
  return [...blobs];
}
