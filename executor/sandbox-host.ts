import type { Readable } from 'node:stream';
import type { InitErrorFrame, ReadyFrame } from './protocol';
import type { RunnerChannel } from './runner-client';
import type { UsageSample } from './limits/types';
import type { Runtime } from './types';

/**
 * Where sandboxes live: on this host (LocalSandboxHost) or inside a VM behind a remote agent
 * (RemoteSandboxHost over `limactl shell`). The executor's pool and limits logic sees only this.
 */
export interface SandboxSpec {
  id: string;
  runtime: Runtime;
  /** Bundle digest: the host materialises the files once per digest. */
  bundleSha: string;
  entrypoint: string;
  memoryMb: number;
  pidsMax: number;
  tmpSizeMb: number;
}

export interface Sandbox {
  readonly id: string;
  readonly channel: RunnerChannel;
  /** What the runner said after loading the bundle. */
  readonly ready: ReadyFrame | InitErrorFrame;
  /** Spawn → ready, measured by the host (runtime start + imports). */
  readonly initMs: number;
  setCpuPercent(percent: number | null): Promise<void>;
  sample(): Promise<UsageSample>;
  /** Starts a new peak-memory reading, where the backend can (see LimitGroup.resetPeak). */
  resetPeak?(): Promise<void>;
  killAll(): Promise<void>;
  destroy(): Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** Raw stdout/stderr of the runner (output that bypassed the runner's capture, e.g. native writes). */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
}

export interface SandboxHostInfo {
  backend: string;
  sandbox: 'bwrap' | 'none';
  transport: string;
  /** Why parity is degraded on this host (empty when it is not). */
  degraded: string[];
}

export interface SandboxHost {
  readonly info: SandboxHostInfo;
  /** Makes the bundle's files available where sandboxes run (idempotent per digest). */
  materialize(sha: string, entrypoint: string, files: Record<string, string>): Promise<void>;
  hasBundle(sha: string): Promise<boolean>;
  create(spec: SandboxSpec): Promise<Sandbox>;
  /** Runners started ahead, ready to be claimed, and how many cold starts they served. */
  spareStats?(): { ready: Record<Runtime, number>; claimed: number };
  close(): Promise<void>;
}
