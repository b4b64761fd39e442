import { z } from 'zod';
import { limitField, ResourceName, Timestamp } from './common';
import { RuntimeLimits } from './tenant';

/** The emulator's own surface (`/_emu`): tenants, keys and the operator's views. */

// ---- operator surface (/_emu) ---------------------------------------------------------------------

export const CreateTenant = z.object({ name: ResourceName }).strict().meta({ id: 'CreateTenant' });
export const CapsPatch = z
  .object({
    timeout_ms: limitField('Cap for timeout_ms.', 900000).optional(),
    max_memory_mb: limitField('Cap for max_memory_mb.', 2048).optional(),
    max_cpu_percent: limitField('Cap for max_cpu_percent.', 100).optional(),
    max_concurrency: limitField('Invocations running at once.', 10).optional(),
  })
  .strict()
  .meta({ id: 'CapsPatch' });
export const TenantInfo = z
  .object({
    id: z.string(),
    name: z.string(),
    caps: RuntimeLimits,
    keys: z.array(z.object({ id: z.string(), prefix: z.string(), created_at: Timestamp })),
    created_at: Timestamp,
  })
  .meta({ id: 'TenantInfo' });
export const CreatedKey = z
  .object({ id: z.string(), tenant: z.string(), key: z.string(), prefix: z.string(), created_at: Timestamp })
  .meta({ id: 'CreatedKey', description: 'The key is shown this once; only its hash is kept.' });

export const EmuInfo = z
  .object({
    version: z.string(),
    url: z.string(),
    data_dir: z.string(),
    workspace: z.string().nullable(),
    started_at: z.string(),
    pid: z.number().int(),
    local_api_key: z.string().nullable().meta({ description: 'The local tenant’s key, for the GUI and the tour.' }),
    egress: z.object({ profile: z.enum(['local', 'production']), allow: z.array(z.string()) }),
    async_queue: z.object({
      queued: z.number().int(),
      running: z.number().int(),
      max_workers: z.number().int(),
      tenants_waiting: z.number().int(),
    }),
    tenants: z.array(TenantInfo),
  })
  .meta({ id: 'EmuInfo' });

export const CoreMemory = z
  .object({
    rss_bytes: z.number().int(),
    heap_used_bytes: z.number().int(),
    heap_total_bytes: z.number().int(),
    external_bytes: z.number().int(),
    array_buffers_bytes: z.number().int(),
    gc: z.enum(['forced', 'not_asked']).meta({ description: 'Whether a full garbage collection ran just before the reading.' }),
  })
  .meta({ id: 'CoreMemory' });
export type CoreMemory = z.infer<typeof CoreMemory>;

// ---- what the core reports about itself -------------------------------------------------------------
// These reports gather facts from many parts (the executor, the host probe, the runtime lock); the fields
// listed are what the GUI and the CLI read, and each report may carry more (additionalProperties).

const Parity = z.object({ status: z.enum(['full', 'degraded']), reasons: z.array(z.string()) });
const Facts = z.record(z.string(), z.unknown());

export const SpareRunner = z
  .object({
    id: z.string().meta({ description: 'Empty while it is starting.' }),
    runtime: z.enum(['bun', 'python']),
    profile: z.enum(['plain', 'mastra', 'langgraph']).meta({
      description: 'What it imported ahead: nothing (`plain`), or its runtime’s framework, for versions whose code imports it.',
    }),
    state: z.enum(['starting', 'preloading', 'ready']),
    rss_mb: z
      .number()
      .nullable()
      .meta({ description: 'Sum of VmRSS over its processes (runtime, bubblewrap, wrapper); null where /proc cannot tell.' }),
    preload_ms: z.number().optional().meta({ description: 'How long its framework import took.' }),
  })
  .catchall(z.unknown())
  .meta({ id: 'SpareRunner', description: 'A runner started ahead, claimed by one new version’s first run and never by another.' });

const SparePool = z
  .object({
    ready: z.record(z.string(), z.number().int()).meta({ description: 'Plain spares ready, per runtime.' }),
    claimed: z.number().int().meta({ description: 'Cold starts a spare served.' }),
    claimed_by_profile: z.record(z.string(), z.number().int()).optional(),
    spares: z.array(SpareRunner).optional(),
  })
  .catchall(z.unknown())
  .meta({ description: 'Runners started ahead (`svc-emu serve --spares`): absent where the executor keeps none (behind an agent).' });

export const ExecutorFacts = z
  .object({
    backend: z.string().meta({ description: 'The limit backend: `cgroup-v2`, `cgroup-v1`, `systemd`, `none`, or the VM’s.' }),
    sandbox: z.enum(['bwrap', 'none']),
    transport: z.string().meta({ description: '`local`, or the agent’s transport (Lima).' }),
    parity: Parity,
    pool: z
      .object({
        idle: z.number().int(),
        busy: z.number().int(),
        created: z.number().int(),
        reused: z.number().int(),
        spares: SparePool.optional(),
      })
      .catchall(z.unknown())
      .meta({ description: 'The warm pool of sandboxes.' }),
  })
  .catchall(z.unknown())
  .meta({ id: 'ExecutorFacts' });

export const RuntimeMismatch = z
  .object({ name: z.string(), expected: z.string(), actual: z.string().nullable() })
  .meta({ id: 'RuntimeMismatch', description: 'A package whose installed version is not the manifest’s (`actual` null: missing).' });

export const RuntimeReport = z
  .union([
    z
      .object({
        manifest: Facts.meta({ description: 'Production’s pinned versions (executor/runtimes/manifest.json).' }),
        installed: Facts.meta({ description: 'What is installed here (.runtimes/runtime-lock.json).' }),
        mismatches: z.array(RuntimeMismatch),
        stale: z.boolean().meta({ description: 'The lock was written for another manifest (setup has not run since an edit).' }),
      })
      .catchall(z.unknown()),
    z.object({ note: z.string() }).meta({ description: 'An executor supplied by an embedding program: nothing to report.' }),
  ])
  .meta({ id: 'RuntimeReport' });

export const DoctorReport = z
  .object({
    node: z.string(),
    platform: z.string(),
    arch: z.string(),
    root: z.boolean(),
    cgroup: Facts,
    electron_binary: z.boolean(),
    limits: Facts,
    sandbox: Facts,
    runtime: Facts,
    lima: Facts,
    parity: z.enum(['full', 'degraded']),
    notes: z.array(z.string()),
    quarantine: Facts.nullable().meta({ description: 'What starts kept aside from the data dir (null without a data dir).' }),
    executor: ExecutorFacts.omit({ pool: true }).optional(),
  })
  .catchall(z.unknown())
  .meta({ id: 'DoctorReport' });

export const TimelineSample = z
  .object({ t_ms: z.number(), memory_mb: z.number(), cpu_percent: z.number(), throttled: z.boolean() })
  .meta({ id: 'TimelineSample', description: 'One sample of a run’s memory and CPU, every ~50 ms.' });

export const CallbackDelivery = z
  .object({
    at: z.string(),
    status_code: z.number().int().nullable(),
    error: z.string().nullable(),
    duration_ms: z.number(),
    scheduled: z.boolean().meta({ description: 'False for a redelivery asked for through the API.' }),
  })
  .meta({ id: 'CallbackDelivery' });
