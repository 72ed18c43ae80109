// `stele witness serve`: a tlog-witness cosigner for Stele or any other tlog-tiles log.
import type { Command } from 'commander';
import { SIG_ED25519, parseVkey } from '../../src/core/note.js';
import { KeyFileError } from '../../src/keys/local-signer.js';
import { CliError, EXIT, hsmError } from '../errors.js';
import { closeOnSignal } from '../lifecycle.js';
import { logLevelOption, stderrLogger } from '../logger.js';

export function registerWitnessCommands(program: Command): void {
  program
    .command('witness')
    .description('run a witness that cosigns checkpoints of the logs it follows (C2SP tlog-witness)')
    .command('serve')
    .description(
      'serve POST /add-checkpoint and GET /<hex sha256(origin)>/checkpoint (the latest cosigned checkpoint); the key is created on first start (mode 0600) and its vkey printed',
    )
    .requiredOption('--data-dir <dir>', 'witness key and per-log state')
    .requiredOption('--name <name>', 'witness name (its key name, e.g. witness.example.com)')
    .requiredOption('--log <vkey>', 'vkey of a log to follow, repeatable', (v: string, acc: string[] = []) => [
      ...acc,
      v,
    ])
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--port <port>', 'listen port, 0 for any', '8081')
    .addOption(logLevelOption())
    .option(
      '--signer <file|pkcs11:…>',
      'the cosigning key: "file" (<data-dir>/witness.key; default) or the PKCS#11 URI of an Ed25519 key in an HSM (PIN by pin-source or env STELE_PKCS11_PIN) (env STELE_WITNESS_SIGNER)',
    )
    .option('--json', 'print one JSON line {url, name, vkey} when ready')
    .action(
      async (o: {
        dataDir: string;
        name: string;
        log: string[];
        host: string;
        port: string;
        logLevel: string;
        signer?: string;
        json?: boolean;
      }) => {
        const logs = o.log.map((v) => {
          try {
            const key = parseVkey(v);
            if (key.type !== SIG_ED25519) throw new Error('log vkeys are Ed25519 (type 0x01)');
            return key;
          } catch (e) {
            throw new CliError(EXIT.USAGE, `--log ${v}: ${(e as Error).message}`);
          }
        });
        const port = Number(o.port);
        if (!Number.isInteger(port) || port < 0 || port > 65_535)
          throw new CliError(EXIT.USAGE, '--port must be 0..65535');
        const { startWitness } = await import('../../src/witness/host.js');
        const logger = await stderrLogger(o.logLevel);
        const spec = o.signer ?? process.env.STELE_WITNESS_SIGNER;
        if (spec !== undefined && spec !== 'file' && !/^pkcs11:/i.test(spec))
          throw new CliError(EXIT.USAGE, '--signer must be "file" or a pkcs11: URI');
        let hsmKey: { close(): void } | undefined;
        const w = await (async () => {
          let signer;
          if (spec !== undefined && spec !== 'file') {
            const { Pkcs11Signer } = await import('../../src/pkcs11/signer.js');
            signer = hsmKey = await Pkcs11Signer.open({ uri: spec, name: o.name });
          }
          return startWitness({
            dataDir: o.dataDir,
            name: o.name,
            logs,
            host: o.host,
            port,
            logger,
            ...(signer ? { signer } : {}),
          });
        })().catch((e: unknown) => {
          hsmKey?.close();
          if (e instanceof KeyFileError) throw new CliError(EXIT.USAGE, e.message);
          throw hsmError(e) ?? e;
        });
        const closed = closeOnSignal(
          {
            close: async () => {
              await w.close();
              hsmKey?.close();
            },
          },
          logger,
          'shutting down',
        );
        if (o.json) process.stdout.write(`${JSON.stringify({ url: w.url, name: w.name, vkey: w.vkey })}\n`);
        else
          process.stdout.write(
            `stele: witness ${w.name} at ${w.url}\n  vkey  ${w.vkey}\n  follows ${logs.map((l) => l.name).join(', ')}\n`,
          );
        await closed;
      },
    );
}
