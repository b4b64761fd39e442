import { z } from 'zod';

/**
 * `svc-emu parity --against URL --key KEY --json` (server/cli/parity.ts): the report of one parity check, the
 * contract probes of server/parity/probes.ts run against the target and a fresh reference emulator side by
 * side. Every probe is listed, whatever its status; `differences` name what differs, aspect by aspect, with
 * both sides' normalised observation (ids, times, request ids and durations stripped).
 */
export const PARITY_REPORT_FORMAT = 'svc-emu-parity';

export const PARITY_STATUSES = ['same', 'differs', 'skipped', 'error'] as const;
export type ParityStatus = (typeof PARITY_STATUSES)[number];

export const ParityDifference = z
  .object({
    aspect: z
      .string()
      .meta({ description: 'What was compared: `status`, `code`, `header.x-snippet-env`, `body.shape`, `outcome`, `timing`, …' }),
    emulator: z.string().nullable().meta({ description: 'The reference emulator’s observation, normalised; null when it has none.' }),
    target: z.string().nullable().meta({ description: 'The target’s observation, normalised; null when it has none.' }),
  })
  .meta({ id: 'ParityDifference' });
export type ParityDifference = z.infer<typeof ParityDifference>;

export const ParityProbeResult = z
  .object({
    name: z.string().meta({ description: 'The probe’s name (server/parity/probes.ts), e.g. `outcome.timeout`.' }),
    group: z.string(),
    description: z.string(),
    status: z.enum(PARITY_STATUSES),
    reason: z
      .string()
      .nullable()
      .meta({ description: 'Why a probe was skipped (`not deployed: …`) or failed to run (`error`); null when it ran.' }),
    differences: z.array(ParityDifference),
    notes: z.array(z.string()).meta({ description: 'What was measured but not compared (e.g. the time each side took to answer 504).' }),
    emulator: z.record(z.string(), z.string()).meta({ description: 'Every aspect the reference showed, normalised.' }),
    target: z.record(z.string(), z.string()).meta({ description: 'Every aspect the target showed, normalised.' }),
  })
  .meta({ id: 'ParityProbeResult' });
export type ParityProbeResult = z.infer<typeof ParityProbeResult>;

export const ParityReport = z
  .object({
    format: z.literal(PARITY_REPORT_FORMAT),
    target: z.string().meta({ description: 'The deployment checked (its base URL).' }),
    reference: z.object({
      emulator_version: z.string(),
      egress_profile: z.literal('production'),
      workspace: z.string().nullable(),
    }),
    allow_deploy: z.boolean(),
    started_at: z.string(),
    duration_ms: z.number().int(),
    result: z.enum(['same', 'differs']).meta({ description: '`differs` when any probe differs or could not run (exit 1).' }),
    summary: z.object({
      same: z.number().int(),
      differs: z.number().int(),
      skipped: z.number().int(),
      error: z.number().int(),
    }),
    probes: z.array(ParityProbeResult),
    cleanup: z
      .object({
        created: z.array(z.string()).meta({ description: 'Snippets the check created on the target (with --allow-deploy).' }),
        deleted: z.array(z.string()),
        failed: z.array(z.object({ snippet: z.string(), error: z.string() })),
      })
      .meta({ description: 'What the check wrote to the target and whether it was all deleted again.' }),
  })
  .meta({ id: 'ParityReport' });
export type ParityReport = z.infer<typeof ParityReport>;
