import { parseArgs } from 'node:util';

/**
 * The CLI's flags checked before parseArgs' strict pass, so a mistake gets a message that names the flag
 * and the fix instead of parseArgs' own ("Unknown option '--foo'. To specify a positional argument …"):
 * an unknown flag, or one the command does not take, lists the command's flags; a missing value shows the
 * flag's form; a value given to a switch says so. Exit 2 (server/cli/main.ts).
 */
export type OptionTable = Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;

export class FlagError extends Error {}

/** What the flag's value is, in messages and the usage (`--data-dir DIR`). */
const METAVAR: Record<string, string> = {
  'data-dir': 'DIR',
  workspace: 'DIR',
  port: 'N',
  host: 'ADDR',
  'allow-host': 'NAME',
  executor: 'local|lima',
  'egress-profile': 'local|production',
  'egress-allow': 'HOST:PORT',
  'async-workers': 'N',
  'callback-retry-scale': 'F',
  limactl: 'PATH',
  spares: 'all|plain|none',
  tenant: 'NAME',
  'timeout-ms': 'N',
  'max-memory-mb': 'N',
  'max-cpu-percent': 'N',
  'max-concurrency': 'N',
  data: 'JSON',
  env: 'ENV',
  version: 'N',
  snippet: 'NAME',
  outcome: 'OUTCOME',
  limit: 'N',
  runtime: 'bun|python',
  template: 'hello|mastra-agent|langgraph-agent',
  name: 'NAME',
  'egress-mode': 'live|record|replay',
  'replay-speed': 'N',
  cassette: 'NAME',
  against: 'URL',
  target: 'URL',
  key: 'KEY',
  'debug-port': 'N',
};

export const flagForm = (name: string, options: OptionTable) =>
  options[name]?.type === 'string' ? `--${name} ${METAVAR[name] ?? 'VALUE'}` : `--${name}`;

/** A string flag's value that is really the next flag (`--data-dir --json`). */
const looksLikeFlag = (v: string) => /^--?[A-Za-z]/.test(v);

export interface CommandFlags {
  /** As the user types it: `list`, `tenant limits`. */
  command: string;
  /** Flags it takes beyond the global ones. */
  flags: readonly string[];
}

/**
 * Throws a FlagError for the first bad flag of `argv`. `commandOf` names the command of the positionals
 * and its flags, or null when the command has no table (then only flags no command knows are refused).
 */
export function checkFlags(
  argv: string[],
  options: OptionTable,
  globals: readonly string[],
  commandOf: (positionals: string[]) => CommandFlags | null,
): void {
  const { tokens, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: false, tokens: true });
  const cmd = commandOf(positionals);
  const list = (c: CommandFlags) =>
    [...c.flags, ...globals]
      .filter((f) => f !== 'help')
      .map((f) => flagForm(f, options))
      .join(', ');
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    const spec = options[t.name];
    const where = cmd ? ` for \`svc-emu ${cmd.command}\`` : '';
    if (!spec || (cmd && !globals.includes(t.name) && !cmd.flags.includes(t.name))) {
      throw new FlagError(
        `unknown flag ${t.rawName}${where}; ${cmd ? (cmd.flags.length || globals.length ? `flags: ${list(cmd)}` : 'it takes no flags') : 'run `svc-emu --help` for the flags'}`,
      );
    }
    if (spec.type === 'string' && (t.value === undefined || (!t.inlineValue && looksLikeFlag(t.value)))) {
      throw new FlagError(
        `flag --${t.name} needs a value: ${flagForm(t.name, options)}${t.value !== undefined ? ` (or --${t.name}=${t.value})` : ''}`,
      );
    }
    if (spec.type === 'boolean' && t.inlineValue) {
      throw new FlagError(`flag --${t.name} takes no value: --${t.name}, not ${t.rawName}=${t.value ?? ''}`);
    }
  }
}

/** `--flag: a, b or c, not 'x'` for a flag with a closed set of values. */
export function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  const names = allowed.length > 1 ? `${allowed.slice(0, -1).join(', ')} or ${allowed[allowed.length - 1]}` : allowed[0];
  throw new FlagError(`--${flag}: ${names}, not '${value}'`);
}
