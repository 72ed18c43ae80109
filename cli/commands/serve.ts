// `stele serve` (the one-command local log) and `stele index rebuild`.
// The server, index and AWS modules load inside the actions, so other commands start fast.
import { join } from 'node:path';
import type { Command } from 'commander';
import { SERVE_DEFAULTS, resolveServeConfig, serveEnvironmentHelp } from '../../src/serve/config.js';
import { ConfigError } from '../../src/settings/errors.js';
import { CliError, EXIT, hsmError } from '../errors.js';
import { invocation } from '../invocation.js';
import { logLevelOption, stderrLogger } from '../logger.js';
import { closeOnSignal } from '../lifecycle.js';
import { addServeOptions } from './serve-options.js';
import { intArg, progress } from './ledger/common.js';

function config(opts: Record<string, unknown>) {
  try {
    return resolveServeConfig(opts);
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(EXIT.USAGE, e.message);
    throw e;
  }
}

export function registerServeCommands(program: Command): void {
  serveServe(program);
  serveIndex(program);
}

function serveServe(program: Command): void {
  addServeOptions(
    program
      .command('serve')
      .description('run the log: sequencer, lookup index, JSON API and tile server on one data directory'),
  )
    .option('--config <file>', 'TOML file with a [server] table (data_dir, origin, host, port, batch_interval_ms, …)')
    .addOption(logLevelOption())
    .option('--json', 'print one JSON line {url, origin, keyId, vkey, dataDir} when ready')
    .addHelpText('after', `\n${serveEnvironmentHelp()}`)
    .action(runServe);
}

function serveIndex(program: Command): void {
  program
    .command('index')
    .description('maintain the lookup index')
    .command('rebuild')
    .description(
      'rebuild the lookup index from the record bundles, on every core (stop `stele serve` first); an interrupted rebuild continues where it stopped when run again',
    )
    .option('--data-dir <dir>', `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`)
    .option('--origin <origin>', 'log origin (env STELE_ORIGIN)')
    .option('--chunk <n>', 'most entries written per transaction (default 4194304)', intArg('--chunk', 256))
    .addOption(logLevelOption().default('warn'))
    .option('--json', 'print the result as JSON')
    .action(async (opts: { dataDir?: string; origin?: string; chunk?: number; logLevel: string; json?: boolean }) => {
      const cfg = config({ dataDir: opts.dataDir, origin: opts.origin });
      const { openLocalLog, localPaths } = await import('../../src/serve/local-log.js');
      const { LmdbIndex } = await import('../../src/index/lmdb.js');
      const { rebuildIndex } = await import('../../src/index/rebuild.js');
      const log = await stderrLogger(opts.logLevel);
      const { sequencer } = await openLocalLog({ dataDir: cfg.dataDir, origin: cfg.origin, logger: log });
      const bar = progress('indexing', opts.json, 'entries');
      // Not removed first: a rebuild that was interrupted continues from what it committed.
      const index = new LmdbIndex(join(cfg.dataDir, 'private', 'index'));
      const started = performance.now();
      const { size, resumedFrom } = await rebuildIndex(index, localPaths(cfg.dataDir).publicDir, sequencer.checkpoint, {
        ...(opts.chunk === undefined ? {} : { maxChunk: opts.chunk }),
        onProgress: (done, total) => bar.update(done, total),
        // The durable high-water mark: a rerun after a kill continues from here.
        onCommitted: (indexed) => log.info({ indexed }, 'index rebuild: committed'),
      }).finally(async () => {
        bar.stop();
        await index.close();
        await sequencer.close();
      });
      const seconds = (performance.now() - started) / 1000;
      const resumed = resumedFrom > 0 ? ` (continuing an interrupted rebuild from ${resumedFrom})` : '';
      if (opts.json) process.stdout.write(`${JSON.stringify({ indexed: size, resumedFrom, seconds })}\n`);
      else process.stdout.write(`stele: indexed ${size} entries in ${seconds.toFixed(1)} s${resumed}\n`);
    });
}

/** `stele serve`: resolves the settings, starts the server, prints where it listens, and runs until a signal. */
async function runServe(opts: Record<string, unknown>) {
  const { batchInterval, minBatchSpacing, anchorTimeout, json, logLevel, witness, mirror, mirrorTimeout, ...rest } =
    opts;
  const cfg = config({
    ...rest,
    batchIntervalMs: batchInterval,
    minBatchSpacingMs: minBatchSpacing,
    anchorTimeoutMs: anchorTimeout,
    mirrorTimeoutMs: mirrorTimeout,
    witnesses: (witness as string[] | undefined)?.join(','),
    mirrors: (mirror as string[] | undefined)?.join(','),
  });
  const log = await stderrLogger(String(logLevel));
  const { startServer } = await import('../../src/serve/log-server.js');
  const { KeyFileError } = await import('../../src/keys/local-signer.js');
  const server = await startServer(cfg, log).catch((e: unknown) => {
    const config = e instanceof KeyFileError || e instanceof ConfigError || (e as Error)?.name === 'AwsConfigError';
    if (config) throw new CliError(EXIT.USAGE, (e as Error).message);
    const hsm = hsmError(e);
    if (hsm) throw hsm;
    if ((e as NodeJS.ErrnoException).code === 'ENOSPC') {
      throw new CliError(
        EXIT.IO,
        `the filesystem holding ${cfg.dataDir} is full (no space left on device): free space there and start again; nothing acknowledged is lost`,
      );
    }
    if ((e as Error)?.name === 'DataDirInUseError') throw new CliError(EXIT.IO, (e as Error).message);
    throw e;
  });
  const closed = closeOnSignal(server, log, 'shutting down: finishing the batch in flight');
  const info = {
    url: server.url,
    origin: server.origin,
    keyId: server.keyId,
    vkey: server.vkey,
    dataDir: server.dataDir,
  };
  if (json) process.stdout.write(`${JSON.stringify(info)}\n`);
  else {
    process.stdout.write(
      [
        `stele: serving ${server.origin} at ${server.url}`,
        `  data dir  ${server.dataDir}${server.keyCreated ? ' (new log key created)' : ''}`,
        `  key id    ${server.keyId}`,
        `  vkey      ${server.vkey}`,
        ...server.witnesses.map((w) => `  witness   ${w}`),
        ...server.mirrors.map((m) => `  mirror    ${m.vkey} (copy at ${m.tiles})`),
        `  quorum    ${server.quorum}`,
        ...(server.demoWitnesses > 0
          ? [
              '  note      the demo witnesses run in this process and keep their state in the data directory: they protect against nothing a restore of it does',
            ]
          : []),
        `  try       ${invocation()} ledger init --endpoint ${server.url} --tenant demo --scope demo --trust-key ${server.keyId}`,
        '',
      ].join('\n'),
    );
  }
  const stopped = server.stopped.then(async (err) => {
    // Answering 503 forever helps nobody: exit, so a supervisor or an operator looks.
    await server.close().catch(() => undefined);
    throw new CliError(EXIT.LOG_STATE, `the log stopped: ${err.message}`);
  });
  await Promise.race([closed, stopped]);
}
