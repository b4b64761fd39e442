import { join } from 'node:path';
import { PROJECT_ROOT } from './core';

/** The executor agent as the Lima transport runs it, minus `limactl shell`: through a plain shell on this host. */
export const shellAgentArgv = (bun: string, work: string, extra: string[] = []) => [
  '/bin/sh',
  '-c',
  'exec "$0" "$@"',
  bun,
  join(PROJECT_ROOT, 'executor', 'agent.ts'),
  '--root',
  PROJECT_ROOT,
  '--work',
  work,
  ...extra,
];
