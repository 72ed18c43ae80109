#!/usr/bin/env node
// `stele`: the ledger's command-line client and server launcher (cli/program.ts). This file
// imports nothing but Node's own modules: `stele --version` answers from here, `stele --help`
// from the help kept by the last run that rendered it, and every other run loads the
// program, which loads only the command group it runs.
import module from 'node:module';

// Compiled code of the modules loaded below is cached on disk (Node ≥ 22.1; $TMPDIR, or
// NODE_COMPILE_CACHE), so a run after the first skips most of their compilation.
module.enableCompileCache?.();

// The API's tile reads and the audit stream's writes run on libuv's thread pool (the local
// store's writes have a thread of their own); its default of four threads queues them under
// load. Read once, at the pool's first use, which has not happened yet.
process.env.UV_THREADPOOL_SIZE ??= '16';

// `stele … | head` closes the pipe early: that ends the command quietly, not with a trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
}

const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  // The same string as commander's `.version()` in cli/program.ts (test/cli/startup.test.ts).
  process.stdout.write('0.1.0\n');
} else {
  // `stele --help` as commander rendered it for this build, when kept (cli/help-cache.ts).
  // Only a one-word run can be that help: any other loads no more than it needs.
  const help = args.length === 1 ? await import('./help-cache.js') : undefined;
  if (!(help?.isTopHelp(args) && help.replayHelp())) {
    const { run } = await import('./program.js');
    await run(process.argv);
  }
}
