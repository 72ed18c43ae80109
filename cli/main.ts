#!/usr/bin/env node
// `stele`: the ledger's command-line client and server launcher. Each command group lives
// in its own module under cli/commands/ and registers itself here.
import { Command, CommanderError } from 'commander';
import { registerControlCommands } from './commands/control.js';
import { registerKeyCommands } from './commands/key.js';
import { registerLedgerCommands } from './commands/ledger.js';
import { registerLogCommands } from './commands/log.js';
import { registerServeCommands } from './commands/serve.js';
import { registerWitnessCommands } from './commands/witness.js';
import { EXIT, describeError } from './errors.js';

// The API's tile reads and the audit stream's writes run on libuv's thread pool (the local
// store's writes have a thread of their own); its default of four threads queues them under
// load. Read once, at the pool's first use, which has not happened yet: the imports above
// do no asynchronous I/O.
process.env.UV_THREADPOOL_SIZE ??= '16';

const program = new Command('stele')
  .description('Stele: a tiled transparency ledger (C2SP tlog-tiles) — serve it, anchor to it, verify it')
  .version('0.1.0')
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride()
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
registerControlCommands(program);
registerKeyCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    // Help and version requests exit 0; usage errors were already printed by commander.
    process.exitCode = e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  } else {
    const { code, message } = describeError(e);
    process.stderr.write(`stele: ${message}\n`);
    process.exitCode = code;
  }
}
