// `stele mirror serve`: a C2SP tlog-mirror for Stele or any other tlog-tiles log. Not to be
// confused with `stele ledger mirror`, the one-shot tile copier for offline audit.
import type { Command } from 'commander';
import { KeyFileError } from '../../src/keys/local-signer.js';
import { CliError, EXIT } from '../errors.js';
import { closeOnSignal } from '../lifecycle.js';
import { logLevelOption, stderrLogger } from '../logger.js';

export function registerMirrorCommands(program: Command): void {
  program
    .command('mirror')
    .description(
      'run a mirror that stores copies of logs, serves them as tlog-tiles and cosigns them (C2SP tlog-mirror)',
    )
    .command('serve')
    .description(
      "serve POST /add-checkpoint and /add-entries, and each copy at GET /<hex sha256(origin)>/checkpoint and /tile/…; the key (a cosignature/v1 key like a witness's) is created on first start (mode 0600) and its vkey printed",
    )
    .requiredOption(
      '--data-dir <dir>',
      'mirror key, ticket secret, per-log state and copies (logs/<hex sha256(origin)>/)',
    )
    .requiredOption('--name <name>', 'mirror name (its key name, e.g. mirror.example.com)')
    .requiredOption(
      '--log <vkey[=url]>',
      'vkey of a log to mirror, repeatable; for a Stele log add =<its URL> so the mirror also copies (and checks) its record bundles, which `stele ledger audit` needs, and keeps the cosignatures of the witnesses and mirrors the log advertises, so the copy verifies under its policy',
      (v: string, acc: string[] = []) => [...acc, v],
    )
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--port <port>', 'listen port, 0 for any', '8082')
    .addOption(logLevelOption())
    .option('--json', 'print one JSON line {url, name, vkey, logs: [{origin, prefix}]} when ready')
    .action(
      async (o: {
        dataDir: string;
        name: string;
        log: string[];
        host: string;
        port: string;
        logLevel: string;
        json?: boolean;
      }) => {
        const { parseLogVkey, startMirror } = await import('../../src/mirror/host.js');
        const { HttpObjectReader } = await import('../../src/client/objects.js');
        const { originHash } = await import('../../src/witness/protocol.js');
        const { advertisedCosigners } = await import('../../src/mirror/advertised.js');
        const logs = o.log.map((spec) => {
          const at = spec.indexOf('=http');
          try {
            const verifier = parseLogVkey(at < 0 ? spec : spec.slice(0, at));
            if (at < 0) return { verifier };
            const url = spec.slice(at + 1);
            return { verifier, records: new HttpObjectReader(url), cosigners: advertisedCosigners(url) };
          } catch (e) {
            throw new CliError(EXIT.USAGE, `--log ${spec}: ${(e as Error).message}`);
          }
        });
        const port = Number(o.port);
        if (!Number.isInteger(port) || port < 0 || port > 65_535)
          throw new CliError(EXIT.USAGE, '--port must be 0..65535');
        const logger = await stderrLogger(o.logLevel);
        const m = await startMirror({ dataDir: o.dataDir, name: o.name, logs, host: o.host, port, logger }).catch(
          (e: unknown) => {
            if (e instanceof KeyFileError) throw new CliError(EXIT.USAGE, e.message);
            throw e;
          },
        );
        const served = logs.map((l) => ({
          origin: l.verifier.name,
          prefix: `${m.url}/${originHash(l.verifier.name)}`,
        }));
        const closed = closeOnSignal(m, logger, 'shutting down');
        if (o.json)
          process.stdout.write(`${JSON.stringify({ url: m.url, name: m.name, vkey: m.vkey, logs: served })}\n`);
        else
          process.stdout.write(
            `stele: mirror ${m.name} at ${m.url}\n  vkey  ${m.vkey}\n${served.map((s) => `  copy  ${s.origin} at ${s.prefix}\n`).join('')}`,
          );
        await closed;
      },
    );
}
