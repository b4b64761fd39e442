import { z } from 'zod';

/**
 * The executor VM of macOS (Lima) as `/_emu/vm` reports it. The executor builds these values
 * (executor/lima/manager.ts declares the same shapes: it may import nothing of the contract);
 * server/api/vm.ts fails to compile when the two drift apart.
 */
export const VmInfo = z
  .object({
    name: z.string(),
    /** `missing` (not created), `unknown` (limactl unusable), or Lima's own status (`Running`, `Stopped`, `Broken`…). */
    status: z.string(),
    dir: z.string().optional(),
    vm_type: z.string().optional(),
    arch: z.string().optional(),
    cpus: z.number().int().optional(),
    /** Bytes. */
    memory: z.number().optional(),
    /** Bytes. */
    disk: z.number().optional(),
    message: z.string().optional(),
    errors: z.array(z.string()).optional(),
  })
  .meta({ id: 'VmInfo' });
export type VmInfo = z.infer<typeof VmInfo>;

export const VmOperationKind = z.enum(['create', 'start', 'stop']);
export type VmOperationKind = z.infer<typeof VmOperationKind>;

export const VmOperation = z
  .object({
    kind: VmOperationKind,
    state: z.enum(['running', 'succeeded', 'failed']),
    started_at: z.string(),
    finished_at: z.string().optional(),
    /** limactl's exit code (null: it could not start, or a signal ended it). */
    exit_code: z.number().int().nullable().optional(),
    /** Why it failed, in a sentence. */
    error: z.string().optional(),
    /** The command run (the first log line shows it too). */
    command: z.array(z.string()),
    /** The last lines of limactl's output, stdout and stderr by line as they came. */
    log: z.array(z.string()),
    /** Lines seen since the start (more than `log` holds once old lines were dropped): a follower's cursor. */
    log_total: z.number().int(),
  })
  .meta({ id: 'VmOperation' });
export type VmOperation = z.infer<typeof VmOperation>;

export const VmStatus = z
  .object({
    /** Whether the VM can be managed from here (limactl known). */
    available: z.boolean(),
    /** Why not, when it cannot. */
    reason: z.string().optional(),
    limactl: z.string().nullable(),
    limactl_version: z.string().optional(),
    /** limactl failed or printed something unreadable: the VM's state is unknown. */
    error: z.string().optional(),
    vm: VmInfo,
    /** The running operation, or the last one since this process started. */
    operation: VmOperation.nullable(),
  })
  .meta({ id: 'VmStatus' });
export type VmStatus = z.infer<typeof VmStatus>;
