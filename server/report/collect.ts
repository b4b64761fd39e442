import type { z } from 'zod';
import { HarEntry, CASSETTE_FORMAT, type Cassette } from '../../contract/schemas/cassette';
import type { EgressEntry as EgressEntrySchema } from '../../contract/schemas/egress';
import type { AgentRun } from '../../contract/schemas/agent';
import type { TimelineSample } from '../../contract/schemas/emu';
import { REPORT_REPRO_FORMAT, REPORT_REPRO_VERSION, type ReportRepro, type ReproInvocation } from '../../contract/schemas/report';
import type { CoreDeps } from '../core-deps';
import { notFound } from '../domain/errors';
import type { DomainServices } from '../services';
import type { InvocationView } from '../services/invocations';
import type { StreamEvent } from '../services/stream-log';
import { redactSecrets } from '../services/stored-input';
import type { CapsRecord, InvocationRecord, SnippetRecord, TenantRecord, VersionRecord } from '../storage/schema';

/** Everything the report shows about one invocation, read once (server/report/html.ts renders it). */
export interface ReportItem {
  view: InvocationView;
  record: InvocationRecord;
  tenant: { name: string; caps: CapsRecord };
  snippet: { name: string; runtime: 'bun' | 'python'; description: string };
  version:
    | (Pick<VersionRecord, 'version' | 'entrypoint' | 'timeout_ms' | 'max_memory_mb' | 'max_cpu_percent' | 'egress'> & {
        files: Record<string, string>;
      })
    | null;
  logs: { text: string; truncated: boolean };
  timeline: z.infer<typeof TimelineSample>[];
  evidence: Record<string, unknown> | null;
  stored: { input: Record<string, unknown> | null; input_truncated: boolean; overrides: InvocationRecord['overrides'] | null };
  /** The run's outbound calls as HAR entries (its `egress_blob`), and the egress log's lines for it (while the core keeps them). */
  har: HarEntry[];
  egressLog: z.infer<typeof EgressEntrySchema>[];
  stream: { events: StreamEvent[]; truncated: boolean };
  agent: AgentRun | null;
}

export type ReportServices = Pick<DomainServices, 'invocations' | 'snippets' | 'streams' | 'agentSteps' | 'egress' | 'secrets'>;

/**
 * Reads one invocation's report data; unknown ids are 404 (any tenant's: the operator's view). The file is
 * meant to leave the machine: every value of the tenant's secrets is replaced by `[secret NAME]` wherever
 * the run put it (output, error, logs, frames, agent steps, calls), as the stored input already is. The
 * version's code is left as written (it is what reruns).
 */
export async function collectItem(deps: CoreDeps, services: ReportServices, id: string): Promise<ReportItem> {
  const record = services.invocations.byId(id);
  const found = deps.repo.read((db) => {
    const snippet: SnippetRecord | undefined = db.snippets.find((s) => s.id === record.snippet_id);
    const version = db.versions.find((v) => v.snippet_id === record.snippet_id && v.version === record.version);
    const tenant: TenantRecord | undefined = db.tenants.find((t) => t.id === record.tenant_id);
    return { snippet, version, tenant };
  });
  if (!found.tenant) throw notFound('invocation', id);
  const [view, logs, timeline, stored, har, stream, agent, files] = await Promise.all([
    services.invocations.view(record),
    services.invocations.logs(record),
    services.invocations.timeline(record),
    services.invocations.stored(record),
    readHar(deps, record),
    services.streams.read(record),
    services.agentSteps.run(record).catch(() => null),
    found.version ? services.snippets.readFiles(found.version) : Promise.resolve(null),
  ]);
  const v = found.version;
  const secrets = services.secrets.reveal(found.tenant);
  const r = <T>(value: T): T => redactSecrets(value, secrets) as T;
  const egressLog = services.egress.log.list({ invocation_id: record.id }).reverse();
  return {
    view: keepCoreFields(r(view), view),
    record: keepCoreFields(r(record), record),
    tenant: { name: found.tenant.name, caps: { ...found.tenant.caps } },
    snippet: {
      name: found.snippet?.name ?? record.snippet,
      runtime: found.snippet?.runtime ?? 'bun',
      description: found.snippet?.description ?? '',
    },
    version:
      v && files
        ? {
            version: v.version,
            entrypoint: v.entrypoint,
            timeout_ms: v.timeout_ms,
            max_memory_mb: v.max_memory_mb,
            max_cpu_percent: v.max_cpu_percent,
            ...(v.egress ? { egress: v.egress } : {}),
            files,
          }
        : null,
    logs: { text: r(logs.logs), truncated: logs.truncated },
    timeline: timeline as ReportItem['timeline'],
    evidence: r(record.error?.evidence ?? null),
    stored,
    har: r(har),
    egressLog: r(egressLog).map((e, i) => keepCoreFields(e, egressLog[i]!)),
    stream: r(stream),
    agent: r(agent),
  };
}

/**
 * An object's top-level fields the core itself wrote, as they were before redaction: ids (`id`, `…_id`) and blob
 * names (`…_blob`). No run writes them, and a secret's value can occur inside a random id by chance (a one-character
 * secret often does): redacted there, the report would name an invocation that does not exist.
 */
function keepCoreFields<T extends object>(redacted: T, original: T): T {
  const out: Record<string, unknown> = { ...(redacted as Record<string, unknown>) };
  for (const [k, v] of Object.entries(original)) if (k === 'id' || k.endsWith('_id') || k.endsWith('_blob')) out[k] = v;
  return out as T;
}

/** The run's `egress_blob`: only entries that read as HAR entries (a damaged blob shows as none). */
async function readHar(deps: CoreDeps, record: InvocationRecord): Promise<HarEntry[]> {
  if (!record.egress_blob) return [];
  try {
    const parsed = JSON.parse(await deps.blobs.getText(record.egress_blob)) as unknown;
    if (!Array.isArray(parsed)) return [];
    return parsed.flatMap((e) => {
      const r = HarEntry.safeParse(e);
      return r.success ? [r.data] : [];
    });
  } catch {
    return [];
  }
}

/** The run's calls as a cassette of its own (one episode: this run), with the version's matchers. */
export function cassetteOf(item: ReportItem, emulatorVersion: string): Cassette | null {
  if (!item.har.length) return null;
  const match = item.version?.egress?.match;
  return {
    log: {
      version: '1.2',
      creator: { name: 'svc-emu report', version: emulatorVersion },
      entries: item.har,
      _svcEmu: { format: CASSETTE_FORMAT, tenant: item.tenant.name, snippet: item.snippet.name, ...(match ? { match } : {}) },
    },
  };
}

/** The reproduction payload embedded in the report (contract/schemas/report.ts); items without their version are left out. */
export function reproOf(items: readonly ReportItem[], emulatorVersion: string, now: Date): ReportRepro | null {
  const invocations: ReproInvocation[] = items.flatMap((item) => {
    const v = item.version;
    if (!v) return [];
    const r = item.record;
    return [
      {
        invocation_id: r.id,
        tenant: item.tenant.name,
        runtime: item.snippet.runtime,
        snippet: { name: item.snippet.name, description: item.snippet.description || null },
        version: {
          version: v.version,
          files: v.files,
          entrypoint: v.entrypoint,
          timeout_ms: v.timeout_ms,
          max_memory_mb: v.max_memory_mb,
          max_cpu_percent: v.max_cpu_percent,
          egress: v.egress ?? null,
        },
        env: r.env,
        mode: r.mode,
        input: item.stored.input,
        overrides: item.stored.overrides ?? null,
        summary: {
          status: r.status,
          outcome: r.outcome,
          output: item.view.output ?? null,
          error: item.view.error,
          usage: r.usage,
          created_at: r.created_at,
          finished_at: r.finished_at,
        },
        cassette: cassetteOf(item, emulatorVersion),
      },
    ];
  });
  if (!invocations.length) return null;
  return {
    format: REPORT_REPRO_FORMAT,
    version: REPORT_REPRO_VERSION,
    generated_at: now.toISOString(),
    emulator: emulatorVersion,
    invocations,
  };
}
