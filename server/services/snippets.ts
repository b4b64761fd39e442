import { conflict, limitExceedsTenantCap, notFound, payloadTooLarge, validationFailed, type FieldError } from '../domain/errors';
import { newId, sha256Hex } from '../ids';
import type { DbData, SnippetRecord, TenantRecord, VersionRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import type { z } from 'zod';
import { BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES, type CreateVersion, type Version } from '../../contract/schemas/snippets';
import { paginate, type PageRequest } from './pagination';
import type { CodeProblem } from '../../executor';

export const DEFAULT_VERSION_LIMITS = { timeout_ms: 60_000, max_memory_mb: 200, max_cpu_percent: 10 } as const;
const LIMIT_FIELDS = ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const;

export type Runtime = SnippetRecord['runtime'];
export const DEFAULT_ENTRYPOINT: Record<Runtime, string[]> = {
  bun: ['index.ts', 'index.js', 'index.mjs', 'index.tsx'],
  python: ['main.py'],
};
const ENTRY_EXT: Record<Runtime, RegExp> = { bun: /\.(ts|tsx|js|mjs)$/, python: /\.py$/ };

/**
 * Checks a bundle's code for its runtime (compiles, exports a handler). Supplied by the executor; the
 * problems name the file and line. Without one, only the shape of the bundle is checked.
 */
export type CodeValidator = (input: { runtime: Runtime; entrypoint: string; files: Record<string, string> }) => Promise<CodeProblem[]>;

/** How createVersion commits a version (the workspace loader's save-to-live path). */
export interface VersionCommit {
  /** A bundle and limits equal to the latest version's make no new version. */
  reuseUnchanged?: boolean;
  /** Environments pointed at the new version in the version's own write. */
  deploy?: string[];
  /** True once newer content is on its way: the version is dropped unwritten (SupersededError). */
  superseded?: () => boolean;
  /**
   * Told once the bundle passed every check, before its blobs and record are written, with the version
   * number it is about to get (another writer in between makes it the next one): the loader starts the
   * version's sandbox then, beside the durable write.
   */
  onChecked?: (planned: PlannedVersion) => void;
  /** `egress` of the snippet.json (workspace versions): kept on the version; a change makes a new version. */
  egress?: VersionRecord['egress'];
}

/** A version about to be written: what starting its sandbox needs. */
export interface PlannedVersion {
  snippet: SnippetRecord;
  version: number;
  sha256: string;
  entrypoint: string;
  files: Record<string, string>;
  limits: { timeout_ms: number; max_memory_mb: number; max_cpu_percent: number };
}

/** createVersion dropped a version because `superseded` said newer content is on its way. */
export class SupersededError extends Error {
  constructor() {
    super('newer content arrived while the version was checked: it was not stored');
  }
}

/** A stored version as the API answers it (contract/schemas/snippets.ts). */
export type VersionView = z.output<typeof Version>;

/** Snippets, their immutable versions, and which version each environment runs. */
export class SnippetService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly validateCode: CodeValidator | null = null,
    /** Told after anything that changes which versions of a snippet can run (warm sandboxes retire). */
    private readonly onChanged: (snippetId: string) => void = () => {},
  ) {}

  /** Versions of a snippet that may still be asked for without naming them: deployed ones and the latest. */
  liveVersions(snippetId: string): number[] {
    return this.deps.repo.read((db) => {
      const snippet = db.snippets.find((s) => s.id === snippetId);
      const deployed = db.deployments.filter((d) => d.snippet_id === snippetId).map((d) => d.version);
      return snippet ? [...new Set([...deployed, snippet.latest_version])] : [];
    });
  }

  // ---- snippets -----------------------------------------------------------------------------------

  /** By id or by name; another tenant's snippet is exactly as missing as one that never existed. */
  find(db: Readonly<DbData>, tenant: TenantRecord, idOrName: string): SnippetRecord | undefined {
    return db.snippets.find((s) => s.tenant_id === tenant.id && (s.id === idOrName || s.name === idOrName));
  }

  findByName(tenant: TenantRecord, name: string): SnippetRecord | undefined {
    return this.deps.repo.read((db) => db.snippets.find((s) => s.tenant_id === tenant.id && s.name === name));
  }

  get(tenant: TenantRecord, idOrName: string): SnippetRecord {
    const snippet = this.deps.repo.read((db) => this.find(db, tenant, idOrName));
    if (!snippet) throw notFound('snippet', idOrName);
    return snippet;
  }

  view(snippet: SnippetRecord) {
    const deployments = this.deps.repo.read((db) =>
      Object.fromEntries(
        db.deployments
          .filter((d) => d.snippet_id === snippet.id)
          .sort((a, b) => a.env.localeCompare(b.env))
          .map((d) => [d.env, d.version]),
      ),
    );
    return {
      id: snippet.id,
      name: snippet.name,
      runtime: snippet.runtime,
      description: snippet.description,
      latest_version: snippet.latest_version === 0 ? null : snippet.latest_version,
      deployments,
      created_at: snippet.created_at,
      updated_at: snippet.updated_at,
    };
  }

  async create(tenant: TenantRecord, input: { name: string; runtime: Runtime; description?: string }) {
    const snippet = await this.deps.repo.mutate((db) => {
      if (db.snippets.some((s) => s.tenant_id === tenant.id && s.name === input.name)) {
        throw conflict(`snippet '${input.name}' already exists`);
      }
      const now = nowIso(this.deps.clock);
      const rec: SnippetRecord = {
        id: newId('snp'),
        tenant_id: tenant.id,
        name: input.name,
        runtime: input.runtime,
        description: input.description ?? '',
        latest_version: 0,
        created_at: now,
        updated_at: now,
      };
      db.snippets.push(rec);
      return rec;
    });
    this.deps.events.publish('snippet.created', { ...snippetRef(snippet), runtime: snippet.runtime });
    return this.view(snippet);
  }

  list(tenant: TenantRecord, page: PageRequest) {
    const sorted = this.deps.repo.read((db) =>
      db.snippets.filter((s) => s.tenant_id === tenant.id).sort((a, b) => (a.name < b.name ? -1 : 1)),
    );
    return paginate(
      sorted,
      (s) => s.name,
      page,
      (s) => this.view(s),
    );
  }

  async delete(tenant: TenantRecord, idOrName: string): Promise<void> {
    await this.deps.repo
      .mutate((db) => {
        const snippet = this.find(db, tenant, idOrName);
        if (!snippet) throw notFound('snippet', idOrName);
        db.snippets = db.snippets.filter((s) => s.id !== snippet.id);
        db.versions = db.versions.filter((v) => v.snippet_id !== snippet.id);
        db.deployments = db.deployments.filter((d) => d.snippet_id !== snippet.id);
        return snippet;
      })
      .then((snippet) => {
        this.deps.events.publish('snippet.deleted', snippetRef(snippet));
        this.onChanged(snippet.id);
      });
  }

  // ---- versions -----------------------------------------------------------------------------------

  /** Everything `POST …/versions` checks, in the order a person fixing the request would want it. */
  private async checkBundle(snippet: SnippetRecord, body: CreateVersion) {
    const errors: FieldError[] = [];
    if (body.code !== undefined && body.files !== undefined) {
      errors.push({ location: 'body', message: 'give either code or files, not both' });
    }
    if (body.code === undefined && body.files === undefined) {
      errors.push({ location: 'body.code', message: 'is required (or files, for a multi-file bundle)' });
    }
    if (errors.length) throw validationFailed(errors);

    const defaults = DEFAULT_ENTRYPOINT[snippet.runtime];
    let files: Record<string, string>;
    let entrypoint: string;
    if (body.code !== undefined) {
      entrypoint = body.entrypoint ?? defaults[0]!;
      files = { [entrypoint]: body.code };
    } else {
      files = body.files!;
      const paths = Object.keys(files);
      if (paths.length === 0) throw validationFailed([{ location: 'body.files', message: 'must hold at least one file' }]);
      if (paths.length > BUNDLE_MAX_FILES) {
        throw validationFailed([{ location: 'body.files', message: `must hold at most ${BUNDLE_MAX_FILES} files` }]);
      }
      const found = body.entrypoint ?? defaults.find((d) => Object.hasOwn(files, d));
      if (!found) {
        throw validationFailed([{ location: 'body.entrypoint', message: `is required: none of ${defaults.join(', ')} is in files` }]);
      }
      if (!Object.hasOwn(files, found)) {
        throw validationFailed([{ location: 'body.entrypoint', message: `'${found}' is not one of the files` }]);
      }
      entrypoint = found;
    }
    if (!ENTRY_EXT[snippet.runtime].test(entrypoint)) {
      throw validationFailed([{ location: 'body.entrypoint', message: `'${entrypoint}' is not a ${snippet.runtime} source file` }]);
    }
    const entryCode = files[entrypoint]!;
    if (entryCode.trim() === '') {
      throw validationFailed([
        { location: body.code !== undefined ? 'body.code' : `body.files.${entrypoint}`, message: 'must not be empty' },
      ]);
    }
    const size = Object.values(files).reduce((n, c) => n + Buffer.byteLength(c, 'utf8'), 0);
    if (size > BUNDLE_MAX_BYTES) {
      throw payloadTooLarge(`the code bundle is ${size} bytes; at most ${BUNDLE_MAX_BYTES} (1 MiB) are allowed`);
    }
    if (this.validateCode) {
      const problems = await this.validateCode({ runtime: snippet.runtime, entrypoint, files });
      if (problems.length) {
        throw validationFailed(
          problems.map((p) => ({
            location: body.code !== undefined ? 'body.code' : `body.files.${p.file}`,
            message: `${p.file}${p.line ? `:${p.line}${p.column ? `:${p.column}` : ''}` : ''}: ${p.message}`,
            file: p.file,
            ...(p.line ? { line: p.line } : {}),
            ...(p.column ? { column: p.column } : {}),
          })),
        );
      }
    }
    return { files, entrypoint, size };
  }

  private checkLimits(tenant: TenantRecord, body: CreateVersion) {
    const limits = { ...DEFAULT_VERSION_LIMITS };
    for (const field of LIMIT_FIELDS) {
      const value = body[field] ?? DEFAULT_VERSION_LIMITS[field];
      const cap = tenant.caps[field];
      if (value > cap) throw limitExceedsTenantCap(field, value, cap);
      limits[field] = value as never;
    }
    return limits as { timeout_ms: number; max_memory_mb: number; max_cpu_percent: number };
  }

  /**
   * Stores a new version. With `reuseUnchanged` (the workspace loader), a bundle and limits equal to the
   * latest version's make no new version: that one is returned with `unchanged: true`. `deploy` points
   * those environments at the new version in the same durable write (one db.json write, not one per step);
   * `superseded` (asked after the code check and again just before the write) drops the version unwritten
   * when newer content is on its way (SupersededError).
   */
  async createVersion(
    tenant: TenantRecord,
    idOrName: string,
    body: CreateVersion,
    source: 'api' | 'workspace' = 'api',
    opts: VersionCommit = {},
  ): Promise<VersionView & { unchanged?: boolean }> {
    const { reuseUnchanged = false, deploy = [], superseded, onChecked, egress } = opts;
    const snippet = this.get(tenant, idOrName);
    const current = this.deps.repo.read((db) => db.tenants.find((t) => t.id === tenant.id)) ?? tenant;
    const limits = this.checkLimits(current, body);
    const { files, entrypoint, size } = await this.checkBundle(snippet, body);

    const manifest: VersionRecord['files'] = Object.keys(files)
      .sort()
      .map((path) => ({ path, size: Buffer.byteLength(files[path]!, 'utf8'), sha256: sha256Hex(files[path]!) }));
    const bundleHash = sha256Hex(JSON.stringify({ entrypoint, files: manifest.map((f) => [f.path, f.sha256]) }));
    if (reuseUnchanged) {
      const latest = this.findVersion(snippet, snippet.latest_version);
      const sameEgress = JSON.stringify(latest?.egress ?? null) === JSON.stringify(egress ?? null);
      if (latest && latest.sha256 === bundleHash && LIMIT_FIELDS.every((f) => latest[f] === limits[f]) && sameEgress) {
        return { ...this.versionView(snippet, latest), unchanged: true };
      }
    }
    if (superseded?.()) throw new SupersededError();
    onChecked?.({ snippet, version: snippet.latest_version + 1, sha256: bundleHash, entrypoint, files, limits });
    await Promise.all(manifest.map((f) => this.deps.blobs.put(files[f.path]!)));

    const record = await this.deps.repo.mutate((db) => {
      const live = this.find(db, tenant, snippet.id);
      if (!live) throw notFound('snippet', idOrName); // deleted while the blobs were written
      for (const env of deploy) this.requireEnv(db, tenant, env);
      if (superseded?.()) throw new SupersededError();
      const now = nowIso(this.deps.clock);
      const rec: VersionRecord = {
        snippet_id: live.id,
        version: live.latest_version + 1,
        entrypoint,
        files: manifest,
        sha256: bundleHash,
        size_bytes: size,
        ...limits,
        source,
        ...(egress ? { egress } : {}),
        created_at: now,
      };
      db.versions.push(rec);
      live.latest_version = rec.version;
      live.updated_at = now;
      for (const env of deploy) this.applyDeploy(db, live, env, rec.version, now);
      return rec;
    });
    this.deps.events.publish('version.created', { ...snippetRef(snippet), version: record.version, source });
    for (const env of deploy) this.deps.events.publish('deployment.changed', { ...snippetRef(snippet), env, version: record.version });
    this.onChanged(snippet.id);
    return this.versionView(snippet, record);
  }

  versionView(snippet: SnippetRecord, v: VersionRecord): VersionView {
    return {
      snippet: snippet.name,
      snippet_id: snippet.id,
      version: v.version,
      runtime: snippet.runtime,
      entrypoint: v.entrypoint,
      manifest: v.files.map((f) => ({ ...f })),
      sha256: v.sha256,
      size_bytes: v.size_bytes,
      timeout_ms: v.timeout_ms,
      max_memory_mb: v.max_memory_mb,
      max_cpu_percent: v.max_cpu_percent,
      source: v.source,
      created_at: v.created_at,
    };
  }

  listVersions(tenant: TenantRecord, idOrName: string, page: PageRequest) {
    const snippet = this.get(tenant, idOrName);
    const sorted = this.deps.repo.read((db) =>
      db.versions.filter((v) => v.snippet_id === snippet.id).sort((a, b) => b.version - a.version),
    );
    return paginate(
      sorted,
      (v) => String(v.version),
      page,
      (v) => this.versionView(snippet, v),
      (a, b) => Number(b) - Number(a),
      (k) => /^\d+$/.test(k),
    );
  }

  findVersion(snippet: SnippetRecord, version: number): VersionRecord | undefined {
    return this.deps.repo.read((db) => db.versions.find((v) => v.snippet_id === snippet.id && v.version === version));
  }

  async getVersion(tenant: TenantRecord, idOrName: string, version: number, withFiles = true): Promise<VersionView> {
    const snippet = this.get(tenant, idOrName);
    const rec = this.findVersion(snippet, version);
    if (!rec) throw notFound('version', version);
    const view = this.versionView(snippet, rec);
    if (withFiles) view.files = await this.readFiles(rec);
    return view;
  }

  async readFiles(rec: VersionRecord): Promise<Record<string, string>> {
    const files: Record<string, string> = {};
    for (const f of rec.files) files[f.path] = await this.deps.blobs.getText(f.sha256);
    return files;
  }

  // ---- environments and deployments --------------------------------------------------------------

  listEnvironments(tenant: TenantRecord, page: PageRequest) {
    const sorted = this.deps.repo.read((db) =>
      db.environments.filter((e) => e.tenant_id === tenant.id).sort((a, b) => (a.name < b.name ? -1 : 1)),
    );
    return paginate(
      sorted,
      (e) => e.name,
      page,
      (e) => ({ name: e.name, builtin: e.builtin, created_at: e.created_at }),
    );
  }

  async createEnvironment(tenant: TenantRecord, name: string) {
    const created = await this.deps.repo.mutate((db) => {
      if (db.environments.some((e) => e.tenant_id === tenant.id && e.name === name)) {
        throw conflict(`environment '${name}' already exists`);
      }
      const rec = { tenant_id: tenant.id, name, builtin: false, created_at: nowIso(this.deps.clock) };
      db.environments.push(rec);
      return { name: rec.name, builtin: rec.builtin, created_at: rec.created_at };
    });
    this.deps.events.publish('environment.created', { tenant_id: tenant.id, env: created.name });
    return created;
  }

  async deleteEnvironment(tenant: TenantRecord, name: string) {
    await this.deps.repo.mutate((db) => {
      const env = db.environments.find((e) => e.tenant_id === tenant.id && e.name === name);
      if (!env) throw notFound('environment', name);
      if (env.builtin) throw conflict(`environment '${name}' is built in and cannot be deleted`);
      const mine = new Set(db.snippets.filter((s) => s.tenant_id === tenant.id).map((s) => s.id));
      const deployed = db.deployments.filter((d) => d.env === name && mine.has(d.snippet_id)).length;
      if (deployed) throw conflict(`environment '${name}' still runs ${deployed} snippet(s); undeploy them first`);
      db.environments = db.environments.filter((e) => e !== env);
    });
  }

  private requireEnv(db: Readonly<DbData>, tenant: TenantRecord, env: string) {
    if (!db.environments.some((e) => e.tenant_id === tenant.id && e.name === env)) throw notFound('environment', env);
  }

  listDeployments(tenant: TenantRecord, idOrName: string) {
    const snippet = this.get(tenant, idOrName);
    return this.deps.repo.read((db) => {
      const envs = db.environments.filter((e) => e.tenant_id === tenant.id).sort((a, b) => (a.name < b.name ? -1 : 1));
      return envs.map((e) => {
        const d = db.deployments.find((x) => x.snippet_id === snippet.id && x.env === e.name);
        return {
          env: e.name,
          version: d?.version ?? null,
          previous_version: d?.previous_version ?? null,
          deployed_at: d?.deployed_at ?? null,
        };
      });
    });
  }

  /** Points an environment at a version; pointing it back at an older one is the rollback. */
  async deploy(tenant: TenantRecord, idOrName: string, env: string, version: number) {
    const result = await this.deps.repo.mutate((db) => {
      const snippet = this.find(db, tenant, idOrName);
      if (!snippet) throw notFound('snippet', idOrName);
      this.requireEnv(db, tenant, env);
      if (!db.versions.some((v) => v.snippet_id === snippet.id && v.version === version)) {
        throw notFound('version', version);
      }
      return { snippet, view: this.applyDeploy(db, snippet, env, version, nowIso(this.deps.clock)) };
    });
    this.deps.events.publish('deployment.changed', { ...snippetRef(result.snippet), env, version });
    this.onChanged(result.snippet.id);
    return result.view;
  }

  /** The change a deploy makes, once every check passed (deploy, and createVersion's `deploy`). */
  private applyDeploy(db: DbData, snippet: SnippetRecord, env: string, version: number, now: string) {
    let d = db.deployments.find((x) => x.snippet_id === snippet.id && x.env === env);
    if (d) {
      if (d.version !== version) d.previous_version = d.version;
      d.version = version;
      d.deployed_at = now;
    } else {
      d = { snippet_id: snippet.id, env, version, previous_version: null, deployed_at: now };
      db.deployments.push(d);
    }
    return { env, version: d.version, previous_version: d.previous_version, deployed_at: d.deployed_at };
  }

  async undeploy(tenant: TenantRecord, idOrName: string, env: string) {
    const snippet = await this.deps.repo.mutate((db) => {
      const snippet = this.find(db, tenant, idOrName);
      if (!snippet) throw notFound('snippet', idOrName);
      this.requireEnv(db, tenant, env);
      const before = db.deployments.length;
      db.deployments = db.deployments.filter((x) => !(x.snippet_id === snippet.id && x.env === env));
      if (db.deployments.length === before) throw notFound('deployment', env);
      return snippet;
    });
    this.deps.events.publish('deployment.changed', { ...snippetRef(snippet), env, version: null });
    this.onChanged(snippet.id);
  }

  /** Blob hashes still referenced by some version (for garbage collection). */
  liveBlobs(db: Readonly<DbData>): string[] {
    return db.versions.flatMap((v) => v.files.map((f) => f.sha256));
  }
}

/** How the live feed names a snippet (contract/schemas/events.ts). */
const snippetRef = (s: SnippetRecord) => ({ snippet_id: s.id, snippet: s.name, tenant_id: s.tenant_id });
