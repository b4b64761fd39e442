import type { Adapter } from 'lowdb';
import type { ZodType } from 'zod';
import { DataDirError } from '../errors';
import { describeJsonError, readFileIfExists, writeFileAtomic } from './atomic-file';
import { migrate } from './migrations';

/**
 * lowdb adapter for `db.json`: atomic writes, and reads that validate and migrate (strict: any problem
 * throws). The core's repository reads through the load check instead (db-check.ts), which quarantines
 * what does not fit rather than refusing to start. We do not use lowdb's
 * JSONFile presets (under vitest they keep data in memory, docs/host-facts.md) nor steno (no fsync).
 */
export class ValidatedJsonFile<T> implements Adapter<T> {
  constructor(
    private readonly path: string,
    private readonly schema: ZodType<T>,
  ) {}

  async read(): Promise<T | null> {
    const text = await readFileIfExists(this.path);
    if (text === null) return null;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new DataDirError(this.path, `is not valid JSON: ${describeJsonError(text, err)}`, HINT);
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new DataDirError(this.path, 'must hold a JSON object', HINT);
    }
    const migrated = migrate(raw as Record<string, unknown>);
    if ('error' in migrated) throw new DataDirError(this.path, migrated.error, HINT);
    const parsed = this.schema.safeParse(migrated.doc);
    if (!parsed.success) {
      const issues = parsed.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
        .join('; ');
      throw new DataDirError(this.path, `does not match the expected layout: ${issues}`, HINT);
    }
    return parsed.data;
  }

  async write(data: T): Promise<void> {
    await writeFileAtomic(this.path, JSON.stringify(data));
  }
}

const HINT = 'Fix the file by hand, restore it from a backup or an export, or move it aside to start with an empty state.';
