// `stele completion bash|zsh|fish`: a completion script generated from the command tree
// itself, so it never drifts from the commands and options that exist.
import { type Command, InvalidArgumentError } from 'commander';

interface Node {
  /** The words of the command path after `stele`, e.g. ['ledger', 'verify']. */
  readonly path: string[];
  readonly description: string;
  readonly subcommands: string[];
  readonly options: string[];
}

function walk(cmd: Command, path: string[] = []): Node[] {
  const subs = cmd.commands.filter((c) => !(c as Command & { _hidden?: boolean })._hidden);
  const options = [...cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f))), '--help'];
  const node: Node = { path, description: cmd.description(), subcommands: subs.map((c) => c.name()), options };
  return [node, ...subs.flatMap((c) => walk(c, [...path, c.name()]))];
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function bash(nodes: Node[]): string {
  const known = nodes.filter((n) => n.path.length > 0).map((n) => `"${n.path.join(' ')}"`);
  const cases = nodes.map(
    (n) => `    "${n.path.join(' ')}") words=${quote([...n.subcommands, ...n.options].join(' '))} ;;`,
  );
  return `# stele completion for bash: eval "$(stele completion bash)"
_stele() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" w i words=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ $w == -* ]] && continue
    case "\${path:+$path }$w" in
      ${known.join('|')}) path="\${path:+$path }$w" ;;
    esac
  done
  case "$path" in
${cases.join('\n')}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
  if [[ \${#COMPREPLY[@]} -eq 0 && $cur != -* ]]; then COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -o filenames -F _stele stele
`;
}

function zsh(nodes: Node[]): string {
  return `# stele completion for zsh: eval "$(stele completion zsh)"
autoload -U +X bashcompinit && bashcompinit
${bash(nodes).split('\n').slice(1).join('\n')}`;
}

function fish(nodes: Node[]): string {
  const lines = ['# stele completion for fish: stele completion fish | source'];
  const condition = (path: string[]) =>
    path.length === 0 ? '__fish_use_subcommand' : `__fish_seen_subcommand_from ${path[path.length - 1]}`;
  for (const n of nodes) {
    for (const child of nodes.filter(
      (c) => c.path.length === n.path.length + 1 && c.path.slice(0, -1).join(' ') === n.path.join(' '),
    )) {
      lines.push(
        `complete -c stele -f -n ${quote(condition(n.path))} -a ${quote(child.path.at(-1)!)} -d ${quote(child.description.slice(0, 60))}`,
      );
    }
    for (const o of n.options) {
      const flag = o.startsWith('--') ? `-l ${o.slice(2)}` : `-s ${o.slice(1)}`;
      lines.push(`complete -c stele -n ${quote(condition(n.path))} ${flag}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

const SHELLS = { bash, zsh, fish } as const;
type Shell = keyof typeof SHELLS;

export function registerCompletionCommand(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .argument('<shell>', 'bash, zsh or fish', (v: string): Shell => {
      if (!(v in SHELLS)) throw new InvalidArgumentError('the shell must be bash, zsh or fish');
      return v as Shell;
    })
    .addHelpText(
      'after',
      `
Examples:
  eval "$(stele completion bash)"       # in ~/.bashrc
  eval "$(stele completion zsh)"        # in ~/.zshrc
  stele completion fish | source        # in ~/.config/fish/config.fish`,
    )
    .action((shell: Shell) => {
      process.stdout.write(SHELLS[shell](walk(program)));
    });
}
