// `stele ledger init`: pin the log key (only if it hashes to the trusted key id) and the
// current checkpoint (only if it verifies under that key), and write the configuration.
import { promises as fs } from 'node:fs';
import type { Command } from 'commander';
import { LedgerApi } from '../../../src/client/api.js';
import { type LedgerConfig, configPath, parseKeyId, saveConfig } from '../../../src/client/config.js';
import { ConfigError, UsageError, VerificationError } from '../../../src/client/errors.js';
import { verifyKeyView } from '../../../src/client/ledger.js';
import { checkCheckpoint } from '../../../src/client/verify.js';
import { EMPTY_ROOT, toHex } from '../../../src/hash.js';
import { type CommonOptions, common, emitJson, out, short } from './common.js';

interface InitOptions extends CommonOptions {
  endpoint?: string;
  tenant?: string;
  scope?: string;
  trustKey: string;
  tiles?: string;
  force?: boolean;
}

export function registerInit(ledger: Command): void {
  common(
    ledger
      .command('init')
      .description('pin the log key and its current checkpoint, and write the configuration file')
      .option('--endpoint <url>', 'ledger base URL (default: STELE_LEDGER_ENDPOINT)')
      .option('--tenant <tenant>', 'tenant name (default: STELE_LEDGER_TENANT)')
      .option('--scope <scope>', 'default scope label for anchors')
      .requiredOption('--trust-key <key_id>', 'the log key id you trust: hex SHA-256 of its Ed25519 public key (64 characters)')
      .option('--tiles <url|dir>', 'where to read tiles from for --tiles verification (default: the endpoint)')
      .option('--force', 'replace an existing configuration (re-pins key and checkpoint)'),
  ).action(async (opts: InitOptions) => {
    const keyId = parseKeyId(opts.trustKey);
    if (!keyId) throw new UsageError(`malformed key id ${JSON.stringify(opts.trustKey)}: expected 64 hex characters (the SHA-256 of the log's public key)`);
    const endpointArg = opts.endpoint ?? process.env.STELE_LEDGER_ENDPOINT;
    if (!endpointArg) throw new UsageError('no endpoint: pass --endpoint <url> or set STELE_LEDGER_ENDPOINT');
    const api = new LedgerApi(endpointArg);
    const path = configPath(opts.config);
    if (!opts.force) {
      const exists = await fs.stat(path).then(
        () => true,
        (e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') return false;
          throw new ConfigError(`cannot check ${path}: ${e.code}`);
        },
      );
      if (exists) throw new ConfigError(`${path} already exists; pass --force to replace it (this re-pins the key and checkpoint)`);
    }

    const key = await api.key();
    const log = verifyKeyView(key, keyId);
    const cpJson = await api.checkpoint();
    const cc = checkCheckpoint(
      { json: cpJson },
      { origin: log.name, keyId, log, witnesses: [], threshold: 0, pin: { size: 0, root: EMPTY_ROOT } },
    );
    if (!cc.signature.ok) throw new VerificationError(`the log's checkpoint does not verify under the key: ${cc.signature.detail}`);

    const cfg: LedgerConfig = {
      endpoint: api.endpoint,
      trust: {
        keyId,
        origin: log.name,
        vkey: key.vkey,
        treeSize: cc.size,
        rootHash: toHex(cc.root),
        witnessThreshold: 0,
        witnesses: [],
      },
    };
    const tenant = opts.tenant ?? process.env.STELE_LEDGER_TENANT;
    if (tenant !== undefined) cfg.tenant = tenant;
    if (opts.scope !== undefined) cfg.scope = opts.scope;
    if (opts.tiles !== undefined) cfg.tiles = opts.tiles;
    await saveConfig(path, cfg);

    if (opts.json) {
      emitJson({
        config: path,
        endpoint: api.endpoint,
        origin: log.name,
        keyId,
        vkey: key.vkey,
        pinned: { treeSize: cc.size, rootHash: toHex(cc.root) },
        availableWitnesses: key.witnesses,
        witnessPolicy: key.witnessPolicy ?? null,
      });
      return;
    }
    out(`Pinned ${log.name} (key id ${short(keyId)}) at checkpoint size ${cc.size}, root ${short(toHex(cc.root))}`);
    out(`Wrote ${path}`);
    if (key.witnesses.length > 0) {
      out(`The log lists ${key.witnesses.length} witness${key.witnesses.length === 1 ? '' : 'es'} (not pinned; review, then pin with \`stele ledger trust-config --add-witness <vkey> --witness-threshold <n>\`):`);
      for (const w of key.witnesses) out(`  ${w.name}  ${w.vkey}`);
    }
  });
}
