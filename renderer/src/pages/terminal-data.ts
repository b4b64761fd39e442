// What `/_emu/terminals` answers, and how an ending is said.

import type { Terminal, TerminalAvailability } from '../types';

export type TerminalSession = Terminal;
export type TerminalTarget = Terminal['target'];
export type TerminalExit = Pick<Terminal, 'exit_code' | 'signal'>;

export type Availability = TerminalAvailability;

export interface TerminalList {
  data: TerminalSession[];
  targets: Record<TerminalTarget, Availability>;
  max_live: number;
}

/** "exited with 0", "killed by SIGHUP". */
export const describeExit = (e: TerminalExit) => (e.signal ? `killed by ${e.signal}` : `exited with ${e.exit_code ?? '?'}`);

/** The last part of a path (`/bin/bash` → `bash`). */
export const baseName = (path: string) => path.split('/').filter(Boolean).pop() ?? path;
