// The shapes the core answers with, for the pages: the contract's own zod schemas (contract/schemas/*.ts), read
// as their parsed output. Type-only: nothing of zod or the contract reaches the GUI's bundle from here.
import type { z } from 'zod';
import type {
  CallbackDelivery as CallbackDeliverySchema,
  CallbackInfo,
  CreatedKey as CreatedKeySchema,
  Deployment as DeploymentSchema,
  EgressEntry as EgressEntrySchema,
  EmuInvocation as EmuInvocationSchema,
  EmuInvocationEvents as EmuInvocationEventsSchema,
  Environment as EnvironmentSchema,
  FaultRule as FaultRuleSchema,
  FolderStatus,
  InboxDelivery as InboxDeliverySchema,
  InboxResponse as InboxResponseSchema,
  InboxSummary as InboxSummarySchema,
  Invocation as InvocationSchema,
  NewFaultRule as NewFaultRuleSchema,
  Runtime as RuntimeSchema,
  RuntimeLimits as RuntimeLimitsSchema,
  SecretInfo as SecretInfoSchema,
  SkippedEntry,
  Snippet as SnippetSchema,
  Availability as AvailabilitySchema,
  StoreEntry as StoreEntrySchema,
  StoreKeyInfo as StoreKeyInfoSchema,
  StreamEventRecord as StreamEventRecordSchema,
  TenantInfo as TenantInfoSchema,
  TerminalView,
  TimelineSample as TimelineSampleSchema,
  Version as VersionSchema,
  VmOperation as VmOperationSchema,
  VmStatus as VmStatusSchema,
  WorkspaceView as WorkspaceViewSchema,
} from '../../contract';

/** One page of a `/v1` list (contract/schemas/common.ts's `page`). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export type Callback = z.output<typeof CallbackInfo>;
export type CallbackDelivery = z.output<typeof CallbackDeliverySchema>;
export type CreatedKey = z.output<typeof CreatedKeySchema>;
export type Deployment = z.output<typeof DeploymentSchema>;
export type EgressEntry = z.output<typeof EgressEntrySchema>;
/** `GET /_emu/invocations/{id}`: the record plus the emulator's evidence. */
export type EmuInvocation = z.output<typeof EmuInvocationSchema>;
/** `GET /_emu/invocations/{id}/events`: a streamed invocation's recorded events. */
export type EmuInvocationEvents = z.output<typeof EmuInvocationEventsSchema>;
export type Environment = z.output<typeof EnvironmentSchema>;
export type FaultRule = z.output<typeof FaultRuleSchema>;
export type InboxDelivery = z.output<typeof InboxDeliverySchema>;
export type InboxResponse = z.output<typeof InboxResponseSchema>;
export type InboxSummary = z.output<typeof InboxSummarySchema>;
export type Invocation = z.output<typeof InvocationSchema>;
export type NewFaultRule = z.input<typeof NewFaultRuleSchema>;
export type Runtime = z.output<typeof RuntimeSchema>;
export type RuntimeLimits = z.output<typeof RuntimeLimitsSchema>;
export type SecretInfo = z.output<typeof SecretInfoSchema>;
export type SecretPage = Page<SecretInfo>;
export type Snippet = z.output<typeof SnippetSchema>;
export type StoreEntry = z.output<typeof StoreEntrySchema>;
export type StoreKeyInfo = z.output<typeof StoreKeyInfoSchema>;
export type StoreKeyPage = Page<StoreKeyInfo>;
export type StreamEventRecord = z.output<typeof StreamEventRecordSchema>;
export type TenantInfo = z.output<typeof TenantInfoSchema>;
export type Terminal = z.output<typeof TerminalView>;
export type TerminalAvailability = z.output<typeof AvailabilitySchema>;
export type TimelineSample = z.output<typeof TimelineSampleSchema>;
export type Version = z.output<typeof VersionSchema>;
export type VmOperation = z.output<typeof VmOperationSchema>;
export type VmStatus = z.output<typeof VmStatusSchema>;
export type WorkspaceFolderStatus = z.output<typeof FolderStatus>;
export type WorkspaceSkippedEntry = z.output<typeof SkippedEntry>;
export type WorkspaceView = z.output<typeof WorkspaceViewSchema>;
