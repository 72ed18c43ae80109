// `stele ledger init`: pin the log key (only if it hashes to the trusted key id) and the
// current checkpoint (only if it verifies under that key), and write the configuration
// with its trust policy (C2SP tlog-policy, `ledger.policy` beside it): the pinned log key,
// and the witnesses the log advertises with their quorum, shown before they are written.
import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { LedgerApi } from '../../../src/client/api.js';
import {
  type LedgerConfig,
  checkPolicy,
  configPath,
  defaultPolicyFile,
  parseKeyId,
  policyFromText,
  saveConfig,
} from '../../../src/client/config.js';
import { ConfigError, UsageError, VerificationError } from '../../../src/client/errors.js';
import { labelOption, verifyKeyView } from '../../../src/client/ledger.js';
import { NOT_WITNESSED, checkCheckpoint } from '../../../src/client/verify.js';
import { EMPTY_ROOT, toHex } from '../../../src/core/hash.js';
import {
  type Policy,
  QUORUM_NONE,
  describeQuorum,
  formatPolicy,
  thresholdPolicy,
} from '../../../src/core/tlog-policy.js';
import type { KeyView } from '../../../src/client/api.js';
import { type CommonOptions, common, emitJson, out, short } from './common.js';

interface InitOptions extends CommonOptions {
  endpoint?: string;
  tenant?: string;
  scope?: string;
  trustKey: string;
  tiles?: string;
  force?: boolean;
  /** --no-witnesses: pin no witnesses (`quorum none`). */
  witnesses: boolean;
}

/**
 * The witnesses and quorum the log advertises at /api/ledger/key (its tlog-policy text, or
 * an older log's witness list and threshold), under the log key just verified.
 */
function advertisedPolicy(key: KeyView, keyId: string, where: string): Policy {
  const logs = [{ vkey: key.vkey }];
  const text = key.witnessPolicy?.policy;
  if (text === undefined) {
    const k = Math.min(key.witnessPolicy?.threshold ?? 0, key.witnesses.length);
    return thresholdPolicy(
      logs,
      key.witnesses.map((w) => ({ name: w.name, vkey: w.vkey })),
      k,
    );
  }
  const p = policyFromText(text, `${where} (the log's witness policy)`);
  checkPolicy(p, keyId, `${where} (the log's witness policy)`);
  return { ...p, logs };
}

export function registerInit(ledger: Command): void {
  common(
    ledger
      .command('init')
      .description('pin the log key and its current checkpoint, and write the configuration file')
      .option('--endpoint <url>', 'ledger base URL (default: STELE_LEDGER_ENDPOINT)')
      .option('--tenant <tenant>', 'tenant name (default: STELE_LEDGER_TENANT)')
      .option('--scope <scope>', 'default scope label for anchors')
      .requiredOption(
        '--trust-key <key_id>',
        'the log key id you trust: hex SHA-256 of its Ed25519 public key (64 characters)',
      )
      .option('--tiles <url|dir>', 'where to read tiles from for --tiles verification (default: the endpoint)')
      .option('--no-witnesses', 'pin no witnesses (quorum none): checkpoints will be reported as not witnessed')
      .option('--force', 'replace an existing configuration (re-pins key and checkpoint)'),
  ).action(async (opts: InitOptions) => {
    const keyId = parseKeyId(opts.trustKey);
    if (!keyId)
      throw new UsageError(
        `malformed key id ${JSON.stringify(opts.trustKey)}: expected 64 hex characters (the SHA-256 of the log's public key)`,
      );
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
      if (exists)
        throw new ConfigError(
          `${path} already exists; pass --force to replace it (this re-pins the key and checkpoint)`,
        );
    }

    const key = await api.key();
    const log = verifyKeyView(key, keyId);
    const cpJson = await api.checkpoint();
    const cc = checkCheckpoint(
      { json: cpJson },
      { origin: log.name, keyId, log, witnesses: [], quorum: NOT_WITNESSED, pin: { size: 0, root: EMPTY_ROOT } },
    );
    if (!cc.signature.ok)
      throw new VerificationError(`the log's checkpoint does not verify under the key: ${cc.signature.detail}`);

    const advertised = advertisedPolicy(key, keyId, `${api.endpoint}/api/ledger/key`);
    const policy: Policy = opts.witnesses
      ? advertised
      : { logs: advertised.logs, witnesses: [], groups: [], quorum: QUORUM_NONE };
    const policyFile = defaultPolicyFile(path);
    const cfg: LedgerConfig = {
      endpoint: api.endpoint,
      trust: {
        keyId,
        origin: log.name,
        vkey: key.vkey,
        treeSize: cc.size,
        rootHash: toHex(cc.root),
        policy,
        policyFile,
      },
    };
    const tenant = labelOption('tenant', opts.tenant ?? process.env.STELE_LEDGER_TENANT);
    if (tenant !== undefined) cfg.tenant = tenant;
    const scope = labelOption('scope', opts.scope);
    if (scope !== undefined) cfg.scope = scope;
    if (opts.tiles !== undefined) cfg.tiles = opts.tiles;
    // Shown before it is written: the witnesses are the log's word until the user reviews them.
    if (!opts.json) {
      out(`Trust policy (C2SP tlog-policy) for ${log.name}:`);
      out(`  log      ${key.vkey}`);
      for (const w of policy.witnesses) out(`  witness  ${w.name}  ${w.vkey}`);
      out(
        `  quorum   ${policy.quorum === QUORUM_NONE ? 'none: checkpoints will be reported as not witnessed' : describeQuorum(policy)}`,
      );
      if (!opts.witnesses && advertised.witnesses.length > 0)
        out(`  (--no-witnesses: the ${advertised.witnesses.length} witness(es) the log lists are not pinned)`);
    }
    const policyText =
      `# C2SP tlog-policy written by \`stele ledger init\` from ${api.endpoint}/api/ledger/key.\n` +
      '# The witnesses and quorum are what the log advertised: review them, and set your own\n' +
      '# with `stele ledger trust-config --policy <file>`.\n' +
      formatPolicy(policy);
    await saveConfig(path, cfg, policyText);

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
        policy: {
          file: join(dirname(path), policyFile),
          witnesses: policy.witnesses.map((w) => ({ name: w.name, vkey: w.vkey })),
          quorum: describeQuorum(policy),
        },
      });
      return;
    }
    out(`Pinned ${log.name} (key id ${short(keyId)}) at checkpoint size ${cc.size}, root ${short(toHex(cc.root))}`);
    out(`Wrote ${path} and its trust policy ${join(dirname(path), policyFile)}`);
    if (policy.quorum === QUORUM_NONE)
      out('No witnesses pinned: verification will say "not witnessed" (a split view would go unnoticed).');
  });
}
