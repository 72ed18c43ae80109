// Commands registered lazily: a command's module (and so the libraries it imports) is loaded
// only when the command runs; every other command is listed by its help line alone, from a
// table beside the parent (cli/commands/groups.ts for `stele`, ledger.ts for `stele ledger`).
// test/cli/startup.test.ts checks each table against the modules' own definitions.
import { type Command, Help } from 'commander';

/** A command as its parent's help lists it. */
export interface ListedCommand {
  readonly name: string;
  /** Its term in the command list: name, `[options]` and arguments. */
  readonly term: string;
  readonly summary: string;
}

/**
 * Registers commands on a parent. `args` are the words after the parent (process.argv
 * without node, the script and the parent's own path); `every`: register every command in
 * full (`stele completion`, the tests).
 */
export type Registrar = (parent: Command, args: readonly string[], every: boolean) => void | Promise<void>;

/** A module that registers some commands, and the help lines of those commands. */
export interface CommandModule {
  readonly commands: readonly ListedCommand[];
  load(): Promise<Registrar>;
}

/** The command `args` invoke (`help <command>` too), or undefined: the first words that are no option. */
export function invokedCommand(args: readonly string[]): string | undefined {
  const words: string[] = [];
  for (const a of args) {
    if (a === '--') break;
    if (!a.startsWith('-')) words.push(a);
    if (words.length === 2) break;
  }
  return words[0] === 'help' ? words[1] : words[0];
}

/** The words after the invoked command: what its own registrar is given. */
function argsAfter(args: readonly string[], name: string): readonly string[] {
  const at = args.indexOf(name);
  return at < 0 ? [] : args.slice(at + 1);
}

/**
 * Registers on `parent` in full the modules that define the command `args` invoke (every
 * module with `every`), and every other command by its help line alone.
 */
export async function registerModules(
  parent: Command,
  modules: readonly CommandModule[],
  args: readonly string[],
  every: boolean,
): Promise<void> {
  const invoked = invokedCommand(args);
  const terms = new Map<Command, string>();
  for (const m of modules) {
    if (every || m.commands.some((c) => c.name === invoked)) {
      await (await m.load())(parent, invoked === undefined ? [] : argsAfter(args, invoked), every);
      continue;
    }
    for (const c of m.commands) terms.set(parent.command(c.name).description(c.summary), c.term);
  }
  parent.configureHelp({
    subcommandTerm(this: Help, cmd: Command): string {
      return terms.get(cmd) ?? Help.prototype.subcommandTerm.call(this, cmd);
    },
  });
}
