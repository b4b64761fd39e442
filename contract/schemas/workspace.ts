import { z } from 'zod';
import { SnippetEgress } from './cassette';

/**
 * What `/_emu/workspace` answers (and the GUI's Snippets page shows): which folder became which version,
 * the load error of a refused save, and every entry the loader did not read, with the reason
 * (server/workspace/safe-read.ts decides what is skipped).
 */
export const SKIP_CODES = [
  'special_file',
  'symlink_outside',
  'symlink_broken',
  'symlink_not_file',
  'too_large',
  'too_deep',
  'unreadable',
  'changed_while_reading',
  'not_a_folder',
  'too_many_entries',
] as const;
export type SkipCode = (typeof SKIP_CODES)[number];

export const SkippedEntry = z
  .object({
    path: z.string().meta({ description: 'Relative to the snippet folder (per folder) or to the workspace (workspace-level).' }),
    code: z.enum(SKIP_CODES),
    reason: z.string().meta({ description: 'What the entry is, why it was not read, and what to do about it.' }),
  })
  .meta({ id: 'WorkspaceSkippedEntry' });
export type SkippedEntry = z.infer<typeof SkippedEntry>;

export const FolderProblem = z
  .object({
    message: z.string(),
    file: z.string().optional(),
    line: z.number().int().optional(),
    column: z.number().int().optional(),
  })
  .meta({ id: 'WorkspaceFolderProblem' });

export const FolderStatus = z
  .object({
    folder: z.string().meta({ description: 'snippets/<name>, relative to the workspace.' }),
    snippet: z.string(),
    state: z.enum(['loaded', 'unchanged', 'error', 'deleted', 'loading']),
    runtime: z.enum(['bun', 'python']).nullable(),
    version: z.number().int().nullable().meta({
      description: 'The version serving now (after a refused save: the last good one; after a start failure: the one that failed).',
    }),
    deployed: z.array(z.string()),
    error: FolderProblem.nullable().meta({
      description:
        'A save that failed: the previous version keeps serving. Or a new version that failed to start (its module ' +
        'threw or ran out of memory while loading, found when the loader started its sandbox): it is deployed, and its runs fail the same way.',
    }),
    load_ms: z.number().nullable().optional().meta({
      description: 'How long the load that made this status took (read, validate/compile, store, deploy), for loaded and unchanged.',
    }),
    notes: z.array(z.string()),
    egress: SnippetEgress.nullable().optional().meta({
      description: 'The `egress` of the snippet.json the last good load read (record/replay mode, cassette, matchers); null: none.',
    }),
    skipped: z.array(SkippedEntry).meta({
      description:
        'Entries of the folder that were not read (FIFOs, sockets, devices, symlinks out of the workspace, ' +
        'files over the limits…), with the reason.',
    }),
    updated_at: z.string(),
  })
  .meta({ id: 'WorkspaceFolderStatus' });
export type FolderStatus = z.infer<typeof FolderStatus>;

export const WorkspaceView = z
  .object({
    workspace: z.string().nullable(),
    snippets_dir: z.string().optional(),
    watching: z.boolean(),
    polling: z.boolean().optional(),
    folders: z.array(FolderStatus),
    skipped: z.array(SkippedEntry).meta({
      description:
        'Entries directly under snippets/ that are no snippet folder the loader may read, with the reason ' +
        '(paths relative to the workspace).',
    }),
  })
  .meta({ id: 'WorkspaceView' });
export type WorkspaceView = z.infer<typeof WorkspaceView>;
