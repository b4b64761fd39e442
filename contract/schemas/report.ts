import { z } from 'zod';
import { Runtime } from './common';
import { Cassette, SnippetEgress } from './cassette';
import { LimitOverrides, OUTCOMES, Usage } from './invocations';

/**
 * The run report (`GET /_emu/report`, `svc-emu report`): one self-contained HTML file per hand-over. It
 * embeds a reproduction payload in `<script type="application/json" id="svc-emu-repro">` that
 * `svc-emu import-report` (`POST /_emu/report/import`) turns back into a snippet version, a cassette and an
 * imported invocation on another emulator, so `svc-emu invoke --replay <id>` reruns it there.
 */
export const REPORT_REPRO_FORMAT = 'svc-emu-report-repro';
export const REPORT_REPRO_VERSION = 1;
export const REPORT_REPRO_ELEMENT_ID = 'svc-emu-repro';
/** Cassettes written by import-report are named `report-<source invocation id>` (lower-cased, trimmed to a cassette name). */
export const REPORT_CASSETTE_PREFIX = 'report-';
/** At most this many invocations in one report. */
export const REPORT_MAX_INVOCATIONS = 20;

export const ReportQuery = z.object({
  ids: z
    .string()
    .min(1)
    .max(2000)
    .regex(/^[A-Za-z0-9_-]+(,[A-Za-z0-9_-]+)*$/, 'must be invocation ids separated by commas')
    .meta({ description: `Invocation ids, comma-separated (at most ${REPORT_MAX_INVOCATIONS}).` }),
});

/** One invocation as the report's reproduction payload carries it. */
export const ReproInvocation = z
  .object({
    /** The invocation's id on the emulator that made the report. */
    invocation_id: z.string(),
    tenant: z.string(),
    runtime: Runtime,
    snippet: z.object({ name: z.string(), description: z.string().nullable() }),
    version: z.object({
      /** Its number on the source emulator (the importer makes a new version with its own number). */
      version: z.number().int(),
      files: z.record(z.string(), z.string()),
      entrypoint: z.string(),
      timeout_ms: z.number().int(),
      max_memory_mb: z.number().int(),
      max_cpu_percent: z.number().int(),
      egress: SnippetEgress.nullable(),
    }),
    env: z.string().nullable(),
    mode: z.enum(['sync', 'async', 'stream']),
    /** The input the handler received, secrets already redacted (null when it was not kept). */
    input: z.record(z.string(), z.unknown()).nullable(),
    /** The run's `X-Emu-Limits` overrides, pinned so a rerun uses the same limits. */
    overrides: LimitOverrides.nullable(),
    summary: z.object({
      status: z.string(),
      outcome: z.enum(OUTCOMES).nullable(),
      output: z.unknown(),
      error: z.object({ code: z.string(), message: z.string(), stack: z.string().optional() }).nullable(),
      usage: Usage.nullable(),
      created_at: z.string(),
      finished_at: z.string().nullable(),
    }),
    /** The run's outbound calls as a cassette (null when it made none). */
    cassette: Cassette.nullable(),
  })
  .meta({ id: 'ReproInvocation' });
export type ReproInvocation = z.infer<typeof ReproInvocation>;

export const ReportRepro = z
  .object({
    format: z.literal(REPORT_REPRO_FORMAT),
    version: z.literal(REPORT_REPRO_VERSION),
    generated_at: z.string(),
    /** The emulator version that wrote it. */
    emulator: z.string(),
    invocations: z.array(ReproInvocation).min(1).max(REPORT_MAX_INVOCATIONS),
  })
  .meta({ id: 'ReportRepro' });
export type ReportRepro = z.infer<typeof ReportRepro>;

export const ImportReportBody = z
  .object({
    html: z.string().optional().meta({ description: 'The report file as it is (the server finds the payload in it).' }),
    repro: z.unknown().optional().meta({ description: 'Or the payload itself (the JSON of `#svc-emu-repro`, a `ReportRepro`).' }),
    tenant: z.string().max(63).optional().meta({ description: 'The tenant to import into (default `local`).' }),
  })
  .strict()
  .meta({ id: 'ImportReportBody' });

export const ImportedInvocation = z
  .object({
    source_id: z.string().meta({ description: 'The invocation’s id on the emulator that made the report.' }),
    id: z.string().meta({ description: 'The imported invocation here: `svc-emu invoke --replay <id>` reruns it.' }),
    snippet: z.string(),
    snippet_created: z.boolean(),
    version: z.number().int().meta({ description: 'The version made here from the report’s files and limits.' }),
    cassette: z.string().nullable().meta({ description: 'The cassette written (`report-<source id>`), null when the run made no calls.' }),
    cassette_entries: z.number().int(),
    outcome: z.enum(OUTCOMES).nullable(),
    rerun: z.string().meta({ description: 'The command that reruns it.' }),
  })
  .meta({ id: 'ImportedInvocation' });

export const ImportReportResult = z
  .object({ tenant: z.string(), invocations: z.array(ImportedInvocation) })
  .meta({ id: 'ImportReportResult' });
export type ImportReportResult = z.infer<typeof ImportReportResult>;
