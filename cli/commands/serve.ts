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
  program
    .command('serve')
    .description('run the log: sequencer, lookup index, JSON API and tile server on one data directory')
    .option('--data-dir <dir>', `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`)
    .option(
      '--origin <origin>',
      `log origin, the checkpoint's first line (env STELE_ORIGIN; default ${SERVE_DEFAULTS.origin})`,
    )
    .option('--host <host>', `listen address (env STELE_HOST; default ${SERVE_DEFAULTS.host})`)
    .option('--port <port>', `listen port, 0 for any (env STELE_PORT; default ${SERVE_DEFAULTS.port})`)
    .option(
      '--batch-interval <ms>',
      `longest an anchor waits for its batch (env STELE_BATCH_INTERVAL_MS; default ${SERVE_DEFAULTS.batchIntervalMs})`,
    )
    .option(
      '--min-batch-spacing <ms>',
      'shortest time between two batch starts, the knob for per-batch cost (env STELE_MIN_BATCH_SPACING_MS; default 0 on a local directory, 1000 on AWS)',
    )
    .option('--max-batch <n>', `largest batch (env STELE_MAX_BATCH; default ${SERVE_DEFAULTS.maxBatch})`)
    .option(
      '--anchor-timeout <ms>',
      `longest an anchor request waits for its checkpoint before a 503 (env STELE_ANCHOR_TIMEOUT_MS; default ${SERVE_DEFAULTS.anchorTimeoutMs})`,
    )
    .option(
      '--mode <mode>',
      'demo (open anchor route) or production (tokens and rate limits required) (env STELE_MODE; default demo)',
    )
    .option(
      '--anchor-tokens <list>',
      'name=token[@tenant],… bearer tokens for the anchor route (env STELE_ANCHOR_TOKENS)',
    )
    .option(
      '--anchor-policy <dir>',
      'Cedar policy directory deciding each anchor in production mode, hot-reloaded (env STELE_ANCHOR_POLICY; default <data-dir>/anchor-policy)',
    )
    .option(
      '--anchor-rate <n>',
      'anchors per second per client in production mode (env STELE_ANCHOR_RATE; default 100)',
    )
    .option(
      '--demo-witnesses <n>',
      'start N local witnesses in this process so the log is witnessed out of the box; local data directory only, not the S3/AWS backend (env STELE_DEMO_WITNESSES)',
    )
    .option(
      '--witness <vkey=url>',
      'an external tlog-witness, repeatable; every backend (env STELE_WITNESSES, comma-separated)',
      (v: string, acc: string[] = []) => [...acc, v],
    )
    .option(
      '--witness-threshold <m>',
      'cosignatures required before a checkpoint is published (env STELE_WITNESS_THRESHOLD; default: all witnesses)',
    )
    .option(
      '--witness-policy <file>',
      "a C2SP tlog-policy file: its witnesses (each line's URL is the submission prefix; or pair with --witness <vkey>=<url>) and the quorum that publishes a checkpoint (env STELE_WITNESS_POLICY)",
    )
    .option(
      '--signer <file|pkcs11:…>',
      "the checkpoint key: \"file\" (the data dir's private/log.key, created on first start; on the S3/AWS backend STELE_KMS_KEY_ID or STELE_KEY_FILE; default) or an RFC 7512 PKCS#11 URI of an Ed25519 key in an HSM, e.g. 'pkcs11:token=stele;object=log?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin' (the PIN from pin-source or env STELE_PKCS11_PIN, never the command line; the module may come from env STELE_PKCS11_MODULE; every backend; an S3/AWS API replica takes STELE_VKEY instead) (env STELE_SIGNER)",
    )
    .option(
      '--lock <kind>',
      'AWS/S3 backend: the sequencer lock record in dynamodb or in the bucket (env STELE_LOCK; default dynamodb)',
    )
    .option(
      '--reconfigure',
      "replace the witness and mirror settings stored with the log (its data directory, or the S3 log's private prefix) by this start's (a start that omits them uses the stored ones; different ones are refused without this) (env STELE_RECONFIGURE)",
    )
    .option(
      '--mirror <vkey=url>',
      'a C2SP tlog-mirror to push the entries to, repeatable (env STELE_MIRRORS, comma-separated)',
      (v: string, acc: string[] = []) => [...acc, v],
    )
    .option(
      '--mirror-quorum <n>',
      'mirror cosignatures required before a checkpoint is published (env STELE_MIRROR_QUORUM; default 0: push after publishing)',
    )
    .option(
      '--mirror-timeout <ms>',
      'deadline of one round of mirror pushes (env STELE_MIRROR_TIMEOUT_MS; default 10000)',
    )
    .option(
      '--enterprise',
      'also serve the enterprise control plane (/v1) recording into this log (env STELE_ENTERPRISE)',
    )
    .option('--config <file>', 'TOML file with a [server] table (data_dir, origin, host, port, batch_interval_ms, …)')
    .addOption(logLevelOption())
    .option('--json', 'print one JSON line {url, origin, keyId, vkey, dataDir} when ready')
    .addHelpText('after', `\n${serveEnvironmentHelp()}`)
    .action(async (opts: Record<string, unknown>) => {
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
      await Promise.race([closeOnSignal(server, log, 'shutting down: finishing the batch in flight'), stopped]);
    });

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
