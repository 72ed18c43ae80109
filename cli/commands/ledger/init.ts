// `stele ledger init`: pin the log key (only if it hashes to the trusted key id) and the
// current checkpoint (only if it verifies under that key), and write the configuration
// with its trust policy (C2SP tlog-policy, `ledger.policy` beside it): the pinned log key,
// and the witnesses the log advertises with their quorum, shown before they are written.
// Offline (`--vkey` and `--tiles`, no endpoint) the vkey is the key and the checkpoint comes
// from the tiles; no witnesses are known then.
import { promises as fs } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
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
import { ClientError, ClientConfigError, UsageError, VerificationError } from '../../../src/client/errors.js';
import { labelOption } from '../../../src/client/anchor.js';
import { verifyKeyView } from '../../../src/client/session.js';
import { isUrl, openObjectSource } from '../../../src/client/objects.js';
import { type CheckedCheckpoint, NOT_WITNESSED, checkCheckpoint } from '../../../src/client/rules.js';
import { type NoteVerifier, SIG_ED25519, formatVkey, keyIdOf, parseVkey } from '../../../src/core/note.js';
import { EMPTY_ROOT, toHex } from '../../../src/core/hash.js';
import {
  type Policy,
  QUORUM_NONE,
  describeQuorum,
  formatPolicy,
  thresholdPolicy,
} from '../../../src/core/tlog-policy.js';
import type { CheckpointView, KeyView } from '../../../src/client/api.js';
import { type CommonOptions, common, emitJson, out, short } from './common.js';

interface InitOptions extends CommonOptions {
  endpoint?: string;
  tenant?: string;
  scope?: string;
  trustKey?: string;
  vkey?: string;
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

/** The log key the user gives: --vkey (checked against --trust-key if both) and/or --trust-key. */
function givenKey(opts: InitOptions): { keyId: string; vkey?: NoteVerifier } {
  const keyId = opts.trustKey !== undefined ? parseKeyId(opts.trustKey) : null;
  if (opts.trustKey !== undefined && !keyId)
    throw new UsageError(
      `malformed key id ${JSON.stringify(opts.trustKey)}: expected 64 hex characters (the SHA-256 of the log's public key)`,
    );
  if (opts.vkey === undefined) {
    if (!keyId)
      throw new UsageError(
        'say which log key to trust: --trust-key <key_id> (fetched from the endpoint and checked), or --vkey <vkey>',
      );
    return { keyId };
  }
  let v: NoteVerifier;
  try {
    v = parseVkey(opts.vkey);
  } catch (e) {
    throw new UsageError(`--vkey: ${(e as Error).message}`);
  }
  if (v.type !== SIG_ED25519) throw new UsageError('--vkey must be an Ed25519 (type 0x01) log key');
  const id = keyIdOf(v.publicKey);
  if (keyId && keyId !== id)
    throw new VerificationError(
      `the --vkey key hashes to key id ${id}, not the --trust-key ${keyId}: refusing to pin it (check both with the log's operator)`,
    );
  return { keyId: id, vkey: v };
}

/** A tiles location as kept in the configuration: a URL as given, a directory made absolute. */
const tilesSetting = (where: string): string => (isUrl(where) ? where : resolve(where));

interface Pinned {
  readonly log: NoteVerifier;
  readonly vkey: string;
  readonly cc: CheckedCheckpoint;
  readonly advertised: Policy;
  readonly key?: KeyView;
  /** Where the key and checkpoint were read, for the policy file's comment and the messages. */
  readonly from: string;
}

function firstLook(log: NoteVerifier, keyId: string, input: { json?: CheckpointView; note?: string }) {
  const cc = checkCheckpoint(input, {
    origin: log.name,
    keyId,
    log,
    witnesses: [],
    quorum: NOT_WITNESSED,
    pin: { size: 0, root: EMPTY_ROOT },
  });
  if (!cc.signature.ok)
    throw new VerificationError(`the log's checkpoint does not verify under the key: ${cc.signature.detail}`);
  return cc;
}

/** Online: the key from /api/ledger/key, checked against the key id (and the --vkey), and its checkpoint. */
async function pinFromApi(api: LedgerApi, keyId: string, given: NoteVerifier | undefined): Promise<Pinned> {
  const key = await api.key();
  const log = verifyKeyView(key, keyId);
  if (given && given.name !== log.name)
    throw new VerificationError(
      `the log is named ${log.name}, not ${given.name} as the --vkey says: refusing to pin it`,
    );
  const cc = firstLook(log, keyId, { json: await api.checkpoint() });
  const from = `${api.endpoint}/api/ledger/key`;
  return { log, vkey: key.vkey, cc, advertised: advertisedPolicy(key, keyId, from), key, from };
}

/** Offline: the --vkey pins the key; the checkpoint is read from the tiles and must verify under it. */
async function pinFromTiles(where: string, log: NoteVerifier): Promise<Pinned> {
  const source = await openObjectSource(where);
  const bytes = await source.get('checkpoint');
  if (!bytes) throw new ClientError('io', `no checkpoint in ${source.describe()}: is it a copy of the log's tiles?`);
  const cc = firstLook(log, keyIdOf(log.publicKey), { note: Buffer.from(bytes).toString('utf8') });
  const vkey = formatVkey(log);
  // No API: the log advertises no witnesses here; pin them with `trust-config --policy`.
  return {
    log,
    vkey,
    cc,
    advertised: { logs: [{ vkey }], witnesses: [], groups: [], quorum: QUORUM_NONE },
    from: source.describe(),
  };
}

export function registerInit(ledger: Command): void {
  common(
    ledger
      .command('init')
      .description(
        'pin the log key and its current checkpoint, and write the configuration file (online from an endpoint, or offline from --vkey and --tiles)',
      )
      .option('--endpoint <url>', 'ledger base URL (default: STELE_LEDGER_ENDPOINT)')
      .option('--tenant <tenant>', 'tenant name (default: STELE_LEDGER_TENANT)')
      .option('--scope <scope>', 'default scope label for anchors')
      .option(
        '--trust-key <key_id>',
        'the log key id you trust: hex SHA-256 of its Ed25519 public key (64 characters); with --vkey, the vkey must hash to it',
      )
      .option(
        '--vkey <vkey>',
        'the log key you trust as a signed-note vkey (<origin>+<hash>+<base64 key>): pins it with no API at all',
      )
      .option(
        '--tiles <url|dir>',
        'where to read tiles from for --tiles verification (default: the endpoint); with --vkey and no endpoint, the checkpoint is read here',
      )
      .option('--no-witnesses', 'pin no witnesses (quorum none): checkpoints will be reported as not witnessed')
      .option('--force', 'replace an existing configuration (re-pins key and checkpoint)')
      .addHelpText(
        'after',
        `
Examples:
  stele ledger init --endpoint http://127.0.0.1:8080 --trust-key <key_id>
  stele ledger init --vkey '<origin>+<hash>+<key>' --tiles ./mirror      (offline: no API)`,
      ),
  ).action(runInit);
}

/** `stele ledger init`: fetches and checks the log's key and witnesses, then writes the client configuration. */
async function runInit(opts: InitOptions) {
  const given = givenKey(opts);
  const keyId = given.keyId;
  const endpointArg = opts.endpoint ?? process.env.STELE_LEDGER_ENDPOINT;
  if (!endpointArg && opts.tiles === undefined)
    throw new UsageError(
      'no endpoint: pass --endpoint <url> (or set STELE_LEDGER_ENDPOINT), or start offline with --vkey <vkey> --tiles <dir|url>',
    );
  if (!endpointArg && !given.vkey)
    throw new UsageError('offline (no endpoint) the key comes from --vkey <vkey>: a key id alone cannot be checked');
  const api = endpointArg ? new LedgerApi(endpointArg) : null;
  const path = configPath(opts.config);
  if (!opts.force) await refuseExisting(path);

  const pinned = api ? await pinFromApi(api, keyId, given.vkey) : await pinFromTiles(opts.tiles!, given.vkey!);
  const { log, cc, advertised } = pinned;
  const policy: Policy = opts.witnesses
    ? advertised
    : { logs: advertised.logs, witnesses: [], groups: [], quorum: QUORUM_NONE };
  const policyFile = defaultPolicyFile(path);
  const cfg: LedgerConfig = {
    ...(api ? { endpoint: api.endpoint } : {}),
    trust: {
      keyId,
      origin: log.name,
      vkey: pinned.vkey,
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
  if (opts.tiles !== undefined) cfg.tiles = tilesSetting(opts.tiles);
  // Shown before it is written: the witnesses are the log's word until the user reviews them.
  if (!opts.json) showPolicy(log.name, pinned.vkey, policy, opts.witnesses ? 0 : advertised.witnesses.length);
  const policyText =
    `# C2SP tlog-policy written by \`stele ledger init\` from ${pinned.from}.\n` +
    (api
      ? '# The witnesses and quorum are what the log advertised: review them, and set your own\n'
      : '# Offline: no witnesses are known here; set the ones you trust and their quorum\n') +
    '# with `stele ledger trust-config --policy <file>`.\n' +
    formatPolicy(policy);
  await saveConfig(path, cfg, policyText);

  if (opts.json) {
    emitJson({
      config: path,
      endpoint: api?.endpoint ?? null,
      tiles: cfg.tiles ?? null,
      offline: api === null,
      origin: log.name,
      keyId,
      vkey: pinned.vkey,
      pinned: { treeSize: cc.size, rootHash: toHex(cc.root) },
      availableWitnesses: pinned.key?.witnesses ?? [],
      witnessPolicy: pinned.key?.witnessPolicy ?? null,
      policy: {
        file: join(dirname(path), policyFile),
        witnesses: policy.witnesses.map((w) => ({ name: w.name, vkey: w.vkey })),
        quorum: describeQuorum(policy),
      },
    });
    return;
  }
  out(
    `Pinned ${log.name} (key id ${short(keyId)}) at checkpoint size ${cc.size}, root ${short(toHex(cc.root))}${api ? '' : `, read from ${pinned.from} (offline)`}`,
  );
  out(`Wrote ${path} and its trust policy ${join(dirname(path), policyFile)}`);
  if (policy.quorum === QUORUM_NONE)
    out('No witnesses pinned: verification will say "not witnessed" (a split view would go unnoticed).');
}

/** An existing configuration is replaced only with --force: replacing it re-pins the key and checkpoint. */
async function refuseExisting(path: string): Promise<void> {
  const exists = await fs.stat(path).then(
    () => true,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return false;
      throw new ClientConfigError(`cannot check ${path}: ${e.code}`);
    },
  );
  if (exists)
    throw new ClientConfigError(
      `${path} already exists; pass --force to replace it (this re-pins the key and checkpoint)`,
    );
}

/** The trust policy about to be written; `unpinned`: how many advertised witnesses --no-witnesses left out. */
function showPolicy(origin: string, vkey: string, policy: Policy, unpinned: number): void {
  out(`Trust policy (C2SP tlog-policy) for ${origin}:`);
  out(`  log      ${vkey}`);
  for (const w of policy.witnesses) out(`  witness  ${w.name}  ${w.vkey}`);
  out(
    `  quorum   ${policy.quorum === QUORUM_NONE ? 'none: checkpoints will be reported as not witnessed' : describeQuorum(policy)}`,
  );
  if (unpinned > 0) out(`  (--no-witnesses: the ${unpinned} witness(es) the log lists are not pinned)`);
}
