// Small file helpers of the set-up: JSON stamps (written atomically), text, content hashes, PATH lookups.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative, sep } from 'node:path';
import { ROOT, SKIP_DIRS } from './paths.mjs';

export function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

export function writeJson(file, value) {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, file);
}

export function readText(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

export function sha256(...parts) {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part ?? '\0missing\0').update('\0');
  return hash.digest('hex');
}

/** Content hash of every file under `dirs` (small trees: our own libraries), skipping build litter. */
export function hashTree(dirs) {
  const hash = createHash('sha256');
  const visit = (abs) => {
    let st;
    try {
      st = statSync(abs);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) {
        if (name.startsWith('.') || SKIP_DIRS.has(name) || name === 'build' || name.endsWith('.egg-info')) continue;
        visit(join(abs, name));
      }
    } else if (st.isFile()) {
      hash
        .update(`${relative(ROOT, abs).split(sep).join('/')}\0`)
        .update(readFileSync(abs))
        .update('\0');
    }
  };
  for (const dir of dirs) visit(join(ROOT, dir));
  return hash.digest('hex');
}

export function realpathSafe(path) {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** An executable named `name` on PATH (or in the usual system dirs), or null. Stat only: cheap. */
export function findOnPath(name) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/bin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      if (statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return null;
}
