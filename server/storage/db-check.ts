import type { z } from 'zod';
import { DataDirError } from '../errors';
import { JSON_MAX_DEPTH, jsonValueDepth } from '../http/body';
import { describeJsonError } from './atomic-file';
import { migrate } from './migrations';
import { DbData, emptyDb, SCHEMA_VERSION } from './schema';

/**
 * The load check of `db.json`: whatever the file holds, the core gets a state it can run on, and what it
 * could not accept is named for the quarantine (storage/quarantine.ts) instead of stopping the start.
 *   - not JSON, not an object, or an unusable `schema_version`: the whole document is set aside and the
 *     state starts empty (a copy of the file is kept);
 *   - a record that fails its collection's schema, or nests deeper than anything the API accepts, is
 *     set aside alone; the rest loads;
 *   - a collection that is not a list, or a top-level field this emulator does not know, likewise.
 * One refusal stays: a `schema_version` above ours was written by a newer emulator, and starting empty
 * over it would throw that emulator's state away at the next write.
 */

/** One thing the load check set aside. */
export interface QuarantineItem {
  /** Where it was found: `db.json`, or a journal file (`journal/3.jsonl`). */
  source: string;
  /** Its collection (`store`, `invocations`, …); null for the whole document. */
  collection: string | null;
  /** Its position in the collection (or the line of a journal file); null when it has none. */
  index: number | null;
  /** What it is, for a person: `store key "counter" of tenant ten_…`. */
  label: string;
  problems: string[];
  /** The record as found (absent for a whole document: the kept copy of the file has it). */
  record?: unknown;
}

export interface CheckedDb {
  data: DbData;
  items: QuarantineItem[];
  /** True when the whole document was set aside (the state starts empty). */
  whole: boolean;
}

/** Deepest a stored record may nest: a value as deep as a body allows, inside its record. */
export const RECORD_MAX_DEPTH = JSON_MAX_DEPTH + 8;

type Collection = Exclude<keyof DbData, 'schema_version' | 'journal_seq'>;
const COLLECTIONS = Object.keys(DbData.shape).filter((k) => k !== 'schema_version' && k !== 'journal_seq') as Collection[];
const recordSchema = (c: Collection) => (DbData.shape[c] as unknown as z.ZodArray<z.ZodType>).element;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const kindOf = (v: unknown) =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`;
/** A short, safe rendering of an identifying field (never String() of an array: it recurses). */
const short = (v: unknown) =>
  typeof v === 'string'
    ? JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v)
    : typeof v === 'number' || typeof v === 'boolean' || v === null
      ? String(v)
      : `(${kindOf(v)})`;

/** A person's name for a record of `collection`, from whatever identifying fields it has. */
export function recordLabel(collection: string, rec: unknown): string {
  const singular = collection === 'store' ? 'store key' : collection.replace(/ies$/, 'y').replace(/s$/, '').replace('_', ' ');
  if (!isObject(rec)) return `${singular} (${kindOf(rec)})`;
  const name = rec.key ?? rec.name ?? rec.id ?? (rec.version !== undefined ? `version ${short(rec.version)}` : undefined);
  const owner = rec.tenant_id ?? rec.snippet_id;
  return `${singular}${name === undefined ? '' : ` ${short(name)}`}${owner === undefined ? '' : ` of ${short(owner)}`}`;
}

/** Why one record of `collection` cannot be loaded, or null when it can (`parsed` is what to keep). */
export function checkRecord(collection: Collection, rec: unknown): { problems: string[] } | { parsed: unknown } {
  const depth = jsonValueDepth(rec, RECORD_MAX_DEPTH);
  if (depth > RECORD_MAX_DEPTH) return { problems: [`nests arrays/objects deeper than ${RECORD_MAX_DEPTH} levels`] };
  const parsed = recordSchema(collection).safeParse(rec);
  if (parsed.success) return { parsed: parsed.data };
  return {
    problems: parsed.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : '(record)'}: ${i.message}`),
  };
}

const whole = (problem: string): CheckedDb => ({
  data: emptyDb(),
  items: [{ source: 'db.json', collection: null, index: null, label: 'the whole document', problems: [problem] }],
  whole: true,
});

/** Checks the text of `db.json` (`path` names it in errors). Throws only for a newer emulator's file. */
export function checkDb(text: string, path: string): CheckedDb {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    let why: string;
    try {
      why = describeJsonError(text, err);
    } catch {
      why = (err as Error).message;
    }
    return whole(`is not valid JSON: ${why}`);
  }
  if (!isObject(raw)) return whole(`must hold a JSON object, found ${kindOf(raw)}`);
  const version = raw.schema_version;
  if (typeof version === 'number' && Number.isInteger(version) && version > SCHEMA_VERSION) {
    throw new DataDirError(
      path,
      `schema_version ${version} was written by a newer emulator (this one understands up to ${SCHEMA_VERSION})`,
      'Run the newer emulator on this data dir, or move db.json aside to start this one with an empty state.',
    );
  }
  let doc: Record<string, unknown>;
  try {
    const migrated = migrate(raw);
    if ('error' in migrated) return whole(migrated.error);
    doc = migrated.doc;
  } catch (err) {
    return whole(`could not be migrated to schema_version ${SCHEMA_VERSION}: ${(err as Error).message}`);
  }

  const items: QuarantineItem[] = [];
  const data = emptyDb();
  const seq = doc.journal_seq;
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) data.journal_seq = seq;
  else {
    items.push({
      source: 'db.json',
      collection: 'journal_seq',
      index: null,
      label: 'journal_seq',
      problems: [`must be a non-negative integer, found ${short(seq)}: the whole journal is replayed`],
      record: seq,
    });
  }
  for (const collection of COLLECTIONS) {
    const list = doc[collection];
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      items.push({
        source: 'db.json',
        collection,
        index: null,
        label: `the collection ${collection}`,
        problems: [`must be a list, found ${kindOf(list)}`],
        record: list,
      });
      continue;
    }
    const kept: unknown[] = [];
    list.forEach((rec, index) => {
      const checked = checkRecord(collection, rec);
      if ('parsed' in checked) kept.push(checked.parsed);
      else
        items.push({ source: 'db.json', collection, index, label: recordLabel(collection, rec), problems: checked.problems, record: rec });
    });
    (data as Record<Collection, unknown[]>)[collection] = kept;
  }
  for (const [key, value] of Object.entries(doc)) {
    if (key === 'schema_version' || key === 'journal_seq' || (COLLECTIONS as string[]).includes(key)) continue;
    items.push({
      source: 'db.json',
      collection: key,
      index: null,
      label: `the field ${short(key)}`,
      problems: ['is not part of this emulator’s db.json'],
      record: value,
    });
  }
  return { data, items, whole: false };
}
