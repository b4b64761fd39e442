// executor/runtimes/manifest.json as the steps read it.
import { relative } from 'node:path';
import { readJson, readText } from './files.mjs';
import { MANIFEST, ROOT } from './paths.mjs';
import { SetupError } from './tool.mjs';

/** The manifest, checked just enough that the steps can rely on its shape (runtime-info.ts has the zod schema). */
export function readManifest() {
  const manifest = readJson(MANIFEST);
  const ok =
    manifest &&
    typeof manifest.bun?.version === 'string' &&
    manifest.bun.packages &&
    typeof manifest.python?.version === 'string' &&
    manifest.python.packages &&
    typeof manifest.tools?.uv === 'string';
  if (!ok)
    throw new SetupError(
      `${relative(ROOT, MANIFEST)} is missing or malformed (bun.version, bun.packages, python.version, python.packages, tools.uv)`,
    );
  return manifest;
}

/** One part of the manifest as text, for a step's hash (an edit elsewhere in the manifest does not re-run it). */
export function manifestSection(...keys) {
  const text = readText(MANIFEST);
  try {
    const manifest = JSON.parse(text);
    return JSON.stringify(keys.map((k) => manifest[k] ?? null));
  } catch {
    return text; // malformed: the step runs and readManifest() says what is wrong
  }
}
