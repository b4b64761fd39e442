import { readdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { readSnippetFolder, type FolderRead } from '../workspace/folder';
import { mediaType, problemCode, shapeOf, type Observation } from './observe';
import type { Probe } from './probes';
import type { Side } from './side';

/** How long the reference's loader may take to load the workspace (a LangGraph snippet's first start ~1 s). */
const LOADER_DEADLINE_MS = 90_000;

/**
 * One probe per snippet folder of the workspace: invoked with `{}` on both sides (status, outcome, body
 * shape, run headers). The reference loaded the workspace itself (its loader, as `svc-emu serve` would); on
 * the target the folder is created as `svc-parity-<random>-<name>` through /v1 (the same files and
 * snippet.json limits, deployed where snippet.json says, dev by default), so only with --allow-deploy.
 */
export async function workspaceProbes(workspace: string): Promise<Probe[]> {
  const root = await realpath(workspace);
  let entries: string[];
  try {
    entries = (await readdir(join(root, 'snippets'), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
  const probes: Probe[] = [];
  for (const name of entries.sort()) {
    const read = await readSnippetFolder(join(root, 'snippets', name), name, root);
    if (read.kind === 'missing' || read.kind === 'not_folder') continue;
    probes.push({
      name: `workspace.${name}`,
      group: 'workspace',
      description: `the workspace's snippets/${name} invoked with {}`,
      needs: 'deploy',
      async run(side, obs) {
        const snippet = side.admin ? await loadedOnReference(side, obs, name) : await createOnTarget(side, obs, name, read);
        if (!snippet) return;
        const r = await side.send('POST', `/v1/invoke/${snippet}`, { body: {} });
        obs.set('status', String(r.status));
        obs.set('content-type', mediaType(r.headers));
        obs.set('outcome', r.status === 200 ? 'success' : problemCode(r.body));
        obs.set('body.shape', shapeOf(r.body, { maxDepth: 3 }));
        obs.set('header.x-snippet-version', r.headers.get('x-snippet-version') ?? '(absent)');
        obs.set('header.x-snippet-env', r.headers.get('x-snippet-env') ?? '(absent)');
      },
    });
  }
  return probes;
}

interface FolderView {
  snippet: string;
  state: string;
  version: number | null;
  error: { message: string } | null;
}

async function loadedOnReference(side: Side, obs: Observation, name: string): Promise<string | null> {
  const deadline = Date.now() + LOADER_DEADLINE_MS;
  for (;;) {
    const r = await side.adminGet('/_emu/workspace');
    const folder = ((r.body as { folders?: FolderView[] } | undefined)?.folders ?? []).find((f) => f.snippet === name);
    if (folder && folder.state !== 'loading') {
      if (folder.error) obs.note(`emulator: snippets/${name}: ${folder.error.message}`);
      return obs.gate('snippet', folder.version !== null ? 'created' : 'refused', folder.version !== null) ? name : null;
    }
    if (Date.now() > deadline) {
      obs.note(`emulator: the loader had not loaded snippets/${name} after ${LOADER_DEADLINE_MS / 1000} s`);
      obs.gate('snippet', 'not loaded', false);
      return null;
    }
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function createOnTarget(side: Side, obs: Observation, folder: string, read: FolderRead): Promise<string | null> {
  if (read.kind !== 'ok') {
    obs.note(`target: snippets/${folder} was not read: ${read.kind === 'problem' ? read.problem.message : read.kind}`);
    obs.gate('snippet', 'refused', false);
    return null;
  }
  const name = `${side.prefix}-${folder}`.slice(0, 63).replace(/-+$/, '');
  side.created.push(name);
  const { settings } = read;
  const s = await side.send('POST', '/v1/snippets', {
    body: { name, runtime: read.runtime, ...(settings.description ? { description: settings.description } : {}) },
  });
  const v =
    s.status === 201
      ? await side.send('POST', `/v1/snippets/${name}/versions`, {
          body: {
            files: read.files,
            ...(settings.timeout_ms ? { timeout_ms: settings.timeout_ms } : {}),
            ...(settings.max_memory_mb ? { max_memory_mb: settings.max_memory_mb } : {}),
            ...(settings.max_cpu_percent ? { max_cpu_percent: settings.max_cpu_percent } : {}),
          },
        })
      : s;
  if (v.status !== 201) {
    obs.note(
      `target: snippets/${folder}: ${v.status} ${problemCode(v.body)}: ${JSON.stringify((v.body as { detail?: unknown } | undefined)?.detail ?? null)}`,
    );
    obs.gate('snippet', 'refused', false);
    return null;
  }
  for (const env of settings.deploy ?? ['dev']) {
    const d = await side.send('PUT', `/v1/snippets/${name}/environments/${encodeURIComponent(env)}`, { body: { version: 1 } });
    if (d.status >= 300) obs.note(`target: deploying ${name} v1 to ${env}: ${d.status} ${problemCode(d.body)}`);
  }
  return obs.gate('snippet', 'created', true) ? name : null;
}
