import { z } from 'zod';
import type { Logger } from './logger';
import type { SecretKeyProvider } from './crypto/secret-box';
import type { Clock } from './core-deps';
import type { CodeValidator } from './services/snippets';
import type { Executor } from '../executor';
import { EgressAllowEntry } from './egress/policy';
import { EGRESS_MODES } from '../contract/schemas/cassette';

/** What `startEmulator` accepts: plain data validated here, dependencies passed as they are. */
export const EmulatorConfigSchema = z.object({
  dataDir: z.string().min(1),
  port: z.number().int().min(0).max(65535).default(7070),
  host: z.string().min(1).default('127.0.0.1'),
  workspace: z.string().nullable().default(null),
  allowedHosts: z.array(z.string()).default([]),
  rendererDir: z.string().nullable().default(null),
  storeSweepMs: z.number().int().min(10).default(30_000),
  /** How often blobs no record names any more are deleted while the core runs (BlobStore.sweep). */
  blobSweepMs: z
    .number()
    .int()
    .min(10)
    .default(10 * 60_000),
  /** How often leftovers of dead cores (temp files, limit groups) are swept while the core runs (server/housekeeping.ts). */
  housekeepingMs: z
    .number()
    .int()
    .min(10)
    .default(5 * 60_000),
  /** A temp file untouched this long is a leftover even when the pid in its name is alive (reused). */
  leftoverAgeMs: z
    .number()
    .int()
    .min(0)
    .default(10 * 60_000),
  /** The project root: where `.runtimes/` (installed runtimes) and `executor/runtimes/` (runners) are. */
  projectRoot: z.string().nullable().default(null),
  /**
   * Run sandboxes behind an agent started with this argv (the Lima VM on macOS: see
   * executor/lima/template.ts) instead of on this host. Null: on this host.
   */
  executorAgent: z.array(z.string()).min(1).nullable().default(null),
  /**
   * Spare runners started ahead (executor/local-host.ts): `all` (the default of serve and the desktop app) keeps,
   * per runtime, a plain one and one that has imported its framework (Mastra, LangGraph); `plain` only the plain
   * ones (the test helpers' default: a LangGraph import is ~1 s of CPU per core start); `none` none.
   */
  spares: z.enum(['all', 'plain', 'none']).default('all'),
  /** Invocation records kept per tenant. */
  historyLimit: z.number().int().min(1).default(1000),
  /**
   * `production`: callback targets production would refuse (private, loopback, link-local, metadata)
   * are refused here too. `local`: allowed, with a parity warning on the invocation.
   */
  egressProfile: z.enum(['local', 'production']).default('local'),
  /** HOST:PORT targets allowed under the production profile anyway. */
  egressAllow: z.array(EgressAllowEntry).default([]),
  /**
   * The server's egress mode (contract/schemas/cassette.ts): what a run gets when neither it
   * (`X-Emu-Egress-Mode`) nor its snippet.json says. `PUT /_emu/egress/mode` switches it while the core runs.
   */
  egressMode: z.enum(EGRESS_MODES).default('live'),
  /** Replayed chunks come this many times faster than recorded (1: as recorded; 0: no waits). */
  replaySpeed: z.number().min(0).max(1000).default(1),
  /** Async jobs running at once on this host (each tenant is also bounded by its max_concurrency). */
  asyncWorkers: z.number().int().min(1).max(256).default(8),
  /** Multiplies the callback retry schedule: 1 = production's (0, 5 s, 5 min … 24 h); 0.001 for QA. */
  callbackRetryScale: z.number().min(0).max(1).default(1),
  /** Per callback attempt (production: 15 s). */
  callbackTimeoutMs: z.number().int().min(1).max(60_000).default(15_000),
  /** Silence after which a stream gets a `: ping` comment (production: 15 s). */
  streamPingMs: z.number().int().min(10).max(15_000).default(15_000),
  /**
   * The GUI's terminals (a shell over HTTP, for the admin token's holder). Default: on when the core
   * listens on loopback, off otherwise (on a network address a shell is remote code execution).
   */
  terminal: z.boolean().optional(),
  /**
   * The limactl that manages the executor VM (`/_emu/vm`). Unset: found on PATH on macOS, none elsewhere
   * (Lima is not needed there). A path makes the VM manageable on any host (tests drive a fake one; users
   * with Lima installed elsewhere); null: none.
   */
  limactl: z.string().min(1).nullable().optional(),
  /** node_modules/electron/path.txt: present when the Electron binary is installed (doctor reports it). */
  electronPathFile: z.string().optional(),
  /**
   * Record this core in the per-user list of running emulators (server/storage/running-cores.ts) in this
   * folder while it runs, so the CLI finds it from any folder. `svc-emu serve` and the desktop app pass
   * coresDir(); null (the default, and the tests'): not recorded.
   */
  coresDir: z.string().min(1).nullable().default(null),
});

export type EmulatorConfig = z.input<typeof EmulatorConfigSchema> & {
  logger?: Logger;
  secretKeyProvider?: SecretKeyProvider;
  clock?: Clock;
  validateCode?: CodeValidator;
  /** An executor to use instead of the one built from projectRoot (tests, a remote VM). */
  executor?: Executor;
};
