// What `/_emu/terminals` answers, and how an ending is said.

export type TerminalTarget = 'workspace' | 'vm';

export interface TerminalExit {
  exit_code: number | null;
  signal: string | null;
}

export interface TerminalSession extends TerminalExit {
  id: string;
  target: TerminalTarget;
  shell: string;
  cwd: string;
  pid: number;
  cols: number;
  rows: number;
  status: 'running' | 'exited';
  created_at: string;
  exited_at: string | null;
}

export interface Availability {
  available: boolean;
  reason: string | null;
}

export interface TerminalList {
  data: TerminalSession[];
  targets: Record<TerminalTarget, Availability>;
  max_live: number;
}

/** "exited with 0", "killed by SIGHUP". */
export const describeExit = (e: TerminalExit) => (e.signal ? `killed by ${e.signal}` : `exited with ${e.exit_code ?? '?'}`);

/** The last part of a path (`/bin/bash` → `bash`). */
export const baseName = (path: string) => path.split('/').filter(Boolean).pop() ?? path;
