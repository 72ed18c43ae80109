#!/usr/bin/env node
// `stele`: the ledger's command-line client and server launcher. Each command group lives
// in its own module under cli/commands/ and registers itself here.
import { Command, CommanderError } from 'commander';
import { registerCompletionCommand } from './commands/completion.js';
import { registerControlCommands } from './commands/control.js';
import { registerDevIdpCommands } from './commands/dev-idp.js';
import { registerHammerCommand } from './commands/hammer.js';
import { registerKeyCommands } from './commands/key.js';
import { registerLedgerCommands } from './commands/ledger.js';
import { registerLogCommands } from './commands/log.js';
import { registerMirrorCommands } from './commands/mirror.js';
import { registerMonitorCommands } from './commands/monitor.js';
import { registerServeCommands } from './commands/serve.js';
import { registerWitnessCommands } from './commands/witness.js';
import { emittedJson } from './commands/ledger/common.js';
import { EXIT, describeError, errorJson } from './errors.js';
import { asInvoked } from './invocation.js';
import { setVerbosity, traceHttp } from './verbosity.js';

// The API's tile reads and the audit stream's writes run on libuv's thread pool (the local
// store's writes have a thread of their own); its default of four threads queues them under
// load. Read once, at the pool's first use, which has not happened yet: the imports above
// do no asynchronous I/O.
process.env.UV_THREADPOOL_SIZE ??= '16';

// `stele … | head` closes the pipe early: that ends the command quietly, not with a trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? EXIT.OK);
    throw e;
  });
}

const program = new Command('stele')
  .description('Stele: a tiled transparency ledger (C2SP tlog-tiles) — serve it, anchor to it, verify it')
  .version('0.1.0')
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

registerServeCommands(program);
registerLedgerCommands(program);
registerLogCommands(program);
registerWitnessCommands(program);
registerMirrorCommands(program);
registerMonitorCommands(program);
registerControlCommands(program);
registerDevIdpCommands(program);
registerHammerCommand(program);
registerKeyCommands(program);
registerCompletionCommand(program);

// Under --json a failure is also one JSON document on stdout, so scripts parse every outcome.
const wantsJson = process.argv.slice(2, endOfOptions()).includes('--json');

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    // Help and version requests exit 0; usage errors were already printed by commander.
    process.exitCode = e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    if (e.exitCode !== 0 && wantsJson)
      process.stdout.write(errorJson({ code: EXIT.USAGE, message: e.message.replace(/^error: /, '') }));
  } else {
    const described = describeError(e);
    const message = asInvoked(described.message);
    process.stderr.write(`stele: ${message}\n`);
    if (wantsJson && !emittedJson()) process.stdout.write(errorJson({ code: described.code, message }));
    process.exitCode = described.code;
  }
}

function endOfOptions(): number {
  const i = process.argv.indexOf('--');
  return i < 0 ? process.argv.length : i;
}
