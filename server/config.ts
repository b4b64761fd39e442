import { z } from 'zod';
import type { Logger } from './logger';
import type { SecretKeyProvider } from './crypto/secret-box';
import type { Clock } from './core-deps';
import type { CodeValidator } from './services/snippets';
import type { Executor } from '../executor';

/** What `startEmulator` accepts: plain data validated here, dependencies passed as they are. */
export const EmulatorConfigSchema = z.object({
  dataDir: z.string().min(1),
  port: z.number().int().min(0).max(65535).default(7070),
  host: z.string().min(1).default('127.0.0.1'),
  workspace: z.string().nullable().default(null),
  allowedHosts: z.array(z.string()).default([]),
  rendererDir: z.string().nullable().default(null),
  storeSweepMs: z.number().int().min(10).default(30_000),
  /** The project root: where `.runtimes/` (installed runtimes) and `executor/runtimes/` (runners) are. */
  projectRoot: z.string().nullable().default(null),
  /**
   * Run sandboxes behind an agent started with this argv (the Lima VM on macOS: see
   * executor/lima/template.ts) instead of on this host. Null: on this host.
   */
  executorAgent: z.array(z.string()).min(1).nullable().default(null),
  /** Invocation records kept per tenant. */
  historyLimit: z.number().int().min(1).default(1000),
  /** node_modules/electron/path.txt: present when the Electron binary is installed (doctor reports it). */
  electronPathFile: z.string().optional(),
});

export type EmulatorConfig = z.input<typeof EmulatorConfigSchema> & {
  logger?: Logger;
  secretKeyProvider?: SecretKeyProvider;
  clock?: Clock;
  validateCode?: CodeValidator;
  /** An executor to use instead of the one built from projectRoot (tests, a remote VM). */
  executor?: Executor;
};
