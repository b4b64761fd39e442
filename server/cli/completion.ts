import { OUTCOMES } from '../../contract/schemas/invocations';
import { snippetNames } from './client';
import type { OptionTable } from './flags';
import type { Target } from './locate';

/**
 * `svc-emu completion bash|zsh`: a completion script for the shell, generated from the CLI's own command
 * and flag tables (server/cli/main.ts), so it cannot drift from them. Snippet names (after `invoke`,
 * `deploy`, `--snippet`) come from the running emulator through the hidden `svc-emu __complete snippets`.
 *   bash:  source <(svc-emu completion bash)       (or save it in ~/.local/share/bash-completion/completions/svc-emu)
 *   zsh:   source <(svc-emu completion zsh)        (after compinit)
 */
export const COMPLETION_USAGE = `  svc-emu completion bash|zsh     (a completion script: \`source <(svc-emu completion bash)\`)`;

export interface CompletionCommand {
  subs?: string[];
  flags: readonly string[];
  /** Its positional argument is a snippet name. */
  snippetArg?: boolean;
}

export interface CompletionInput {
  options: OptionTable;
  commands: Record<string, CompletionCommand>;
}

/** Fixed values of flags, offered after the flag. */
const VALUES: Record<string, readonly string[]> = {
  runtime: ['bun', 'python'],
  template: ['hello', 'mastra-agent', 'langgraph-agent'],
  outcome: OUTCOMES,
  executor: ['local', 'lima'],
  'egress-profile': ['local', 'production'],
  spares: ['all', 'plain', 'none'],
  // The ports the example workspace's VS Code launch configurations attach to (server/cli/debug.ts).
  'debug-port': ['9229', '5678'],
};
const DIR_FLAGS = ['data-dir', 'workspace'];
const FILE_FLAGS = ['limactl'];

/** Candidates for `svc-emu __complete WHAT`, one a line. */
export async function completeWords(args: string[], target: () => Promise<Target>): Promise<string> {
  if (args[0] !== 'snippets') return '';
  const names = await Promise.race([target().then(snippetNames), new Promise<string[]>((res) => setTimeout(() => res([]), 2_000).unref())]);
  return names.map((n) => n + '\n').join('');
}

const words = (list: readonly string[]) => list.join(' ');
/** Shell-safe: every word generated here is [a-z0-9-] (checked), so plain quoting is enough. */
function checked(list: readonly string[]): readonly string[] {
  for (const w of list) if (!/^[a-z0-9_-]+$/.test(w)) throw new Error(`completion: '${w}' is not a plain word`);
  return list;
}

export function completionScript(shell: 'bash' | 'zsh', input: CompletionInput): string {
  const cmds = input.commands;
  const valued = checked(
    Object.entries(input.options)
      .filter(([, o]) => o.type === 'string')
      .map(([n]) => n),
  );
  const caseLines = (fn: (c: string, spec: CompletionCommand) => string) =>
    Object.entries(cmds)
      .map(([c, spec]) => `      ${checked([c])[0]}) ${fn(c, spec)} ;;`)
      .join('\n');
  const flagsOf = caseLines((_c, spec) => `flags="${words(checked(spec.flags).map((f) => `--${f}`))}"`);
  const subsOf = caseLines((_c, spec) => `subs="${words(checked(spec.subs ?? []))}"`);
  const snippetCmds = Object.entries(cmds)
    .filter(([, s]) => s.snippetArg)
    .map(([c]) => c);
  const valueCases = Object.entries(VALUES)
    .map(([f, v]) => `    --${checked([f])[0]}) vals="${words(checked(v))}" ;;`)
    .join('\n');
  if (shell === 'bash') {
    return `# svc-emu completion for bash (svc-emu completion bash). Use: source <(svc-emu completion bash)
_svc_emu_snippets() {
  "\${COMP_WORDS[0]}" __complete snippets \${1:+--data-dir "$1"} 2>/dev/null
}
_svc_emu() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local valued=" ${words(valued.map((f) => `--${f}`))} "
  local cmd="" sub="" dd="" i word
  for (( i=1; i<COMP_CWORD; i++ )); do
    word="\${COMP_WORDS[i]}"
    if [[ "$word" == --data-dir ]]; then dd="\${COMP_WORDS[i+1]}"; fi
    if [[ "$word" == -* ]]; then
      [[ "$valued" == *" $word "* ]] && i=$((i+1))
      continue
    fi
    if [[ -z "$cmd" ]]; then cmd="$word"; elif [[ -z "$sub" ]]; then sub="$word"; fi
  done
  local vals=""
  case "$prev" in
${valueCases}
    --snippet) vals="$(_svc_emu_snippets "$dd")" ;;
    ${DIR_FLAGS.map((f) => `--${f}`).join('|')}) COMPREPLY=( $(compgen -d -- "$cur") ); return ;;
    ${FILE_FLAGS.map((f) => `--${f}`).join('|')}) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;
    *) if [[ "$valued" == *" $prev "* ]]; then COMPREPLY=(); return; fi ;;
  esac
  if [[ -n "$vals" ]]; then COMPREPLY=( $(compgen -W "$vals" -- "$cur") ); return; fi
  if [[ -z "$cmd" ]]; then
    if [[ "$cur" == -* ]]; then COMPREPLY=( $(compgen -W "--help --version --data-dir --json" -- "$cur") ); return; fi
    COMPREPLY=( $(compgen -W "${words(checked(Object.keys(cmds)))}" -- "$cur") ); return
  fi
  local flags="" subs=""
  case "$cmd" in
${flagsOf}
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=( $(compgen -W "$flags" -- "$cur") ); return; fi
  case "$cmd" in
${subsOf}
  esac
  if [[ -n "$subs" && -z "$sub" ]]; then COMPREPLY=( $(compgen -W "$subs" -- "$cur") ); return; fi
  case "$cmd" in
    ${snippetCmds.join('|') || '__none'}) [[ -z "$sub" ]] && COMPREPLY=( $(compgen -W "$(_svc_emu_snippets "$dd")" -- "$cur") ) ;;
    init) COMPREPLY=( $(compgen -d -- "$cur") ) ;;
  esac
}
complete -F _svc_emu svc-emu
`;
  }
  return `#compdef svc-emu
# svc-emu completion for zsh (svc-emu completion zsh). Use, after compinit: source <(svc-emu completion zsh)
_svc_emu_snippets() {
  local -a names
  names=(\${(f)"$(\${words[1]} __complete snippets \${1:+--data-dir "$1"} 2>/dev/null)"})
  compadd -a names
}
_svc_emu() {
  local cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}"
  local valued=" ${words(valued.map((f) => `--${f}`))} "
  local cmd="" sub="" dd="" i word
  for (( i=2; i<CURRENT; i++ )); do
    word="\${words[i]}"
    if [[ "$word" == --data-dir ]]; then dd="\${words[i+1]}"; fi
    if [[ "$word" == -* ]]; then
      [[ "$valued" == *" $word "* ]] && i=$((i+1))
      continue
    fi
    if [[ -z "$cmd" ]]; then cmd="$word"; elif [[ -z "$sub" ]]; then sub="$word"; fi
  done
  local vals=""
  case "$prev" in
${valueCases}
    --snippet) _svc_emu_snippets "$dd"; return ;;
    ${DIR_FLAGS.map((f) => `--${f}`).join('|')}) _files -/; return ;;
    ${FILE_FLAGS.map((f) => `--${f}`).join('|')}) _files; return ;;
    *) if [[ "$valued" == *" $prev "* ]]; then return; fi ;;
  esac
  if [[ -n "$vals" ]]; then compadd -- \${=vals}; return; fi
  if [[ -z "$cmd" ]]; then
    if [[ "$cur" == -* ]]; then compadd -- --help --version --data-dir --json; return; fi
    compadd -- ${words(checked(Object.keys(cmds)))}; return
  fi
  local flags="" subs=""
  case "$cmd" in
${flagsOf}
  esac
  if [[ "$cur" == -* ]]; then compadd -- \${=flags}; return; fi
  case "$cmd" in
${subsOf}
  esac
  if [[ -n "$subs" && -z "$sub" ]]; then compadd -- \${=subs}; return; fi
  case "$cmd" in
    ${snippetCmds.join('|') || '__none'}) [[ -z "$sub" ]] && _svc_emu_snippets "$dd" ;;
    init) _files -/ ;;
  esac
}
if (( $+functions[compdef] )); then compdef _svc_emu svc-emu; fi
`;
}
