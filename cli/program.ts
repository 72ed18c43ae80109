// The `stele` program: global options, the command groups, and how a failure is told.
// cli/main.ts loads this once it knows the run is more than `--version`. Only the group the
// arguments name is loaded (cli/commands/groups.ts); the others are listed by their help
// line, so `stele --help` and a mistyped command load commander and nothing else.
import { Command, CommanderError } from 'commander';
import { GROUPS, LOADS_EVERY_GROUP } from './commands/groups.js';
import { invokedCommand, registerModules } from './commands/lazy.js';
import { EXIT } from './exit.js';
import { setVerbosity, traceHttp } from './verbosity.js';

export const VERSION = '0.1.0';

export { invokedCommand } from './commands/lazy.js';

/**
 * The program for `args` (process.argv without node and the script): the group that
 * defines the invoked command is registered in full, every other top-level command by its
 * help line alone. `every`: register every group in full (`stele completion`, and tests).
 */
export async function buildProgram(args: readonly string[], every = false): Promise<Command> {
  const loadAll = every || invokedCommand(args) === LOADS_EVERY_GROUP;
  const program = new Command('stele')
    .description('Stele: a tiled transparency ledger (C2SP tlog-tiles) — serve it, anchor to it, verify it')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .option('-q, --quiet', 'print nothing on success: the exit code says the result (errors still go to stderr)')
    .option('-v, --verbose', 'also print each HTTP request and its answer on stderr')
    .hook('preAction', (cmd) => {
      const { quiet, verbose } = cmd.optsWithGlobals<{ quiet?: boolean; verbose?: boolean }>();
      setVerbosity(quiet ? 'quiet' : verbose ? 'verbose' : 'normal');
      if (verbose) traceHttp();
    })
    .addHelpText(
      'after',
      `
Exit codes:
  0  success / verified
  1  a verification failed (a FAIL in the report, a bad proof or signature)
  2  usage or configuration error
  3  network or I/O error (a full disk, a data directory in use)
  4  the log's storage needs an operator: serve refused to start or its sequencer stopped
     (a lost or rolled-back lock, another writer); see \`stele log fsck\``,
    );
  await registerModules(program, GROUPS, args, loadAll);
  return program;
}

/** Runs `stele` on process.argv and sets process.exitCode. */
export async function run(argv: readonly string[]): Promise<void> {
  const args = argv.slice(2);
  // Under --json a failure is also one JSON document on stdout, so scripts parse every outcome.
  const end = args.indexOf('--');
  const wantsJson = (end < 0 ? args : args.slice(0, end)).includes('--json');
  // The top-level help is kept as printed, for cli/main.ts to replay next time. main.ts has
  // loaded help-cache.js already for a one-word run (no other can be that help); imported
  // here rather than at the top so that the bundle keeps it in a file of its own, which a
  // replayed help loads without commander.
  const help = args.length === 1 ? await import('./help-cache.js') : undefined;
  const topHelp = help?.isTopHelp(args) ?? false;
  let helpText = '';
  try {
    const program = await buildProgram(args);
    if (topHelp)
      program.configureOutput({
        writeOut: (text) => {
          helpText += text;
          process.stdout.write(text);
        },
      });
    await program.parseAsync([...argv]);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version requests exit 0; usage errors were already printed by commander.
      process.exitCode = e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
      if (topHelp && e.code === 'commander.helpDisplayed') help?.keepHelp(helpText);
      if (e.exitCode !== 0 && wantsJson) {
        const { errorJson } = await import('./errors.js');
        process.stdout.write(errorJson({ code: EXIT.USAGE, message: e.message.replace(/^error: /, '') }));
      }
    } else {
      const { describeError, errorJson } = await import('./errors.js');
      const { asInvoked } = await import('./invocation.js');
      const described = describeError(e);
      const message = asInvoked(described.message);
      process.stderr.write(`stele: ${message}\n`);
      if (wantsJson) {
        const { emittedJson } = await import('./commands/ledger/common.js');
        if (!emittedJson()) process.stdout.write(errorJson({ code: described.code, message }));
      }
      process.exitCode = described.code;
    }
  }
}
