// `stele ledger trust-config`: show the pinned material; advance the pinned checkpoint only
// after proving consistency; replace the key only with --replace-key; set the witnesses and
// their quorum from a C2SP tlog-policy file (--policy), or edit an M-of-N one in place.
import { promises as fs } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import type { LedgerApi } from '../../../src/client/api.js';
import {
  type LedgerConfig,
  checkPolicy,
  defaultPolicyFile,
  parseKeyId,
  policyFromText,
  readConfigFile,
  saveConfig,
} from '../../../src/client/config.js';
import {
  type PolicyWitness,
  describeQuorum,
  formatPolicy,
  simpleThreshold,
  thresholdPolicy,
} from '../../../src/core/tlog-policy.js';
import { parseCosignerVkey, parseVkey } from '../../../src/core/note.js';
import { ClientConfigError, UsageError, VerificationError } from '../../../src/client/errors.js';
import { ApiView } from '../../../src/client/views.js';
import { trustOf, verifyKeyView } from '../../../src/client/session.js';
import { verifyCheckpoint } from '../../../src/client/checkpoint.js';
import { checkCheckpoint, checkConsistency } from '../../../src/client/rules.js';
import { toHex } from '../../../src/core/hash.js';
import {
  type CommonOptions,
  common,
  emitJson,
  exitFor,
  intArg,
  openSession,
  out,
  renderReport,
  reportJson,
  short,
  tilesOption,
  logView,
} from './common.js';
import { fsReason } from '../../../src/store/files.js';

interface TrustOptions extends CommonOptions {
  advance?: boolean;
  tiles?: string | true;
  replaceKey?: string;
  refreshKey?: boolean;
  resetCheckpoint?: boolean;
  addWitness?: string[];
  removeWitness?: string[];
  witnessThreshold?: number;
  policy?: string;
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerTrustConfig(ledger: Command): void {
  common(
    ledger
      .command('trust-config')
      .description('show or change the pinned trust material (log key, checkpoint, witnesses)')
      .option('--advance', 'fetch the current checkpoint and move the pin to it, only after proving consistency')
      .addOption(tilesOption())
      .option(
        '--replace-key <key_id>',
        'explicitly replace the pinned log key with the one the log serves, if it hashes to <key_id>',
      )
      .option('--reset-checkpoint', 'with --replace-key: accept a checkpoint not provably consistent with the old pin')
      .option('--refresh-key', 'fetch and store the vkey of the pinned key id (for a file that pins only key_id)')
      .option('--add-witness <vkey>', 'pin a witness cosignature key (repeatable)', collect)
      .option('--remove-witness <name>', 'unpin a witness by name (repeatable)', collect)
      .option(
        '--witness-threshold <n>',
        'valid witness cosignatures required (≤ pinned witnesses)',
        intArg('--witness-threshold'),
      )
      .option(
        '--policy <file>',
        'trust the witnesses and quorum of this C2SP tlog-policy file (copied beside the configuration; its log lines must include the pinned key)',
      ),
  ).action(runTrustConfig);
}

/** `stele ledger trust-config`: builds, checks and writes the trust settings. */
async function runTrustConfig(opts: TrustOptions) {
  const { loaded, api, session } = await openSession(opts, {
    online: Boolean(opts.advance || opts.replaceKey || opts.refreshKey),
    requireOnline: Boolean((opts.advance && !opts.tiles) || opts.replaceKey || opts.refreshKey),
  });
  const file: LedgerConfig = await readConfigFile(loaded.path);
  const changes: string[] = [];
  await changeKey(opts, api, session, file, changes);
  const editing = Boolean(opts.addWitness?.length || opts.removeWitness?.length || opts.witnessThreshold !== undefined);
  let policyText: string | undefined;
  if (opts.policy !== undefined) policyText = await setPolicy(opts.policy, editing, loaded.path, file, changes);
  if (editing) policyText = editWitnesses(opts, session, file, changes) ?? policyText;
  if (changes.length > 0) await saveConfig(loaded.path, file, policyText);
  const advance = opts.advance ? await advancePin(opts, loaded, api, session, file, changes) : undefined;
  if (advance?.failed) return;
  showTrust(opts, loaded, file, changes, advance);
}

type Session = Awaited<ReturnType<typeof openSession>>;
type AdvanceResult = {
  readonly failed: boolean;
  readonly advanced?: { from: number; to: number };
  readonly report: ReturnType<typeof reportJson>;
};

/** --replace-key (to the key the log serves, if it hashes to the id given) or --refresh-key (the pinned id's vkey). */
async function changeKey(
  opts: TrustOptions,
  api: Session['api'],
  session: Session['session'],
  file: LedgerConfig,
  changes: string[],
): Promise<void> {
  if (opts.replaceKey !== undefined) {
    const keyId = parseKeyId(opts.replaceKey);
    if (!keyId) throw new UsageError(`malformed key id ${JSON.stringify(opts.replaceKey)}: expected 64 hex characters`);
    const key = await api!.key();
    const log = verifyKeyView(key, keyId);
    const cp = await api!.checkpoint();
    const trust = { ...session.trust, origin: log.name, keyId, log, pin: session.trust.pin };
    const cc = checkCheckpoint({ json: cp }, trust);
    if (!cc.signature.ok)
      throw new VerificationError(`the checkpoint does not verify under the new key: ${cc.signature.detail}`);
    const cons = await checkConsistency(session.trust.pin, { size: cc.size, root: cc.root }, new ApiView(api!).prove);
    if (!cons.ok && !opts.resetCheckpoint)
      throw new VerificationError(`${cons.detail} (pass --reset-checkpoint to pin it anyway)`);
    file.trust = {
      ...file.trust,
      keyId,
      origin: log.name,
      vkey: key.vkey,
      treeSize: cc.size,
      rootHash: toHex(cc.root),
    };
    changes.push(
      `log key replaced: now ${short(keyId)} (${log.name}); checkpoint pinned at size ${cc.size}${cons.ok ? ' (consistent with the old pin)' : ' (RESET: not proven consistent)'}`,
    );
  } else if (opts.refreshKey) {
    const key = await (api as LedgerApi).key();
    verifyKeyView(key, file.trust.keyId);
    file.trust.vkey = key.vkey;
    file.trust.origin = key.origin;
    changes.push(`stored the vkey of key id ${short(file.trust.keyId)}`);
  }
}

/** --policy: the witnesses and quorum of a tlog-policy file, whose log lines must include the pinned key. */
async function setPolicy(
  path: string,
  editing: boolean,
  configPath: string,
  file: LedgerConfig,
  changes: string[],
): Promise<string> {
  if (editing)
    throw new UsageError(
      '--policy sets the witnesses and their quorum: do not combine it with --add-witness, --remove-witness or --witness-threshold',
    );
  const text = await fs.readFile(path, 'utf8').catch((e: unknown) => {
    throw new ClientConfigError(`cannot read the policy ${path}: ${fsReason(e)}`);
  });
  const policy = policyFromText(text, path);
  const vkey = checkPolicy(policy, file.trust.keyId, path);
  if (vkey !== undefined && file.trust.vkey !== undefined && vkey !== file.trust.vkey) {
    throw new ClientConfigError(`${path}: its log line for the pinned key id differs from the pinned vkey`);
  }
  if (vkey !== undefined && file.trust.vkey === undefined) {
    file.trust.vkey = vkey;
    file.trust.origin = parseVkey(vkey).name;
  }
  file.trust.policy = policy;
  file.trust.policyFile ??= defaultPolicyFile(configPath);
  changes.push(
    `trust policy set from ${path}: ${policy.witnesses.length} witness(es), quorum ${describeQuorum(policy)}`,
  );
  return text;
}

/** --add-witness, --remove-witness, --witness-threshold: an M-of-N policy edited in place; its new text if it has a file. */
function editWitnesses(
  opts: TrustOptions,
  session: Session['session'],
  file: LedgerConfig,
  changes: string[],
): string | undefined {
  const k = simpleThreshold(file.trust.policy);
  if (k === null) {
    throw new UsageError(
      `the trust policy's quorum is not M of N (${describeQuorum(file.trust.policy)}): edit the policy file and set it again with --policy`,
    );
  }
  const witnesses: PolicyWitness[] = [...file.trust.policy.witnesses];
  for (const name of opts.removeWitness ?? []) {
    const at = witnesses.findIndex((w) => w.name === name || parseCosignerVkey(w.vkey).name === name);
    if (at < 0) throw new UsageError(`no pinned witness named ${name}`);
    witnesses.splice(at, 1);
    changes.push(`removed witness ${name}`);
  }
  for (const vkey of opts.addWitness ?? []) {
    let v;
    try {
      v = parseCosignerVkey(vkey);
    } catch (e) {
      throw new UsageError(`--add-witness: ${(e as Error).message}`);
    }
    if (v.name === (file.trust.origin ?? session.trust.origin))
      throw new UsageError('a witness cannot have the log origin as its name');
    const existing = witnesses.find((w) => w.name === v.name);
    if (existing && existing.vkey !== vkey)
      throw new UsageError(`witness ${v.name} is already pinned with another key; remove it first`);
    if (!existing) {
      witnesses.push({ name: v.name, vkey });
      changes.push(`added witness ${v.name}`);
    }
  }
  const threshold = opts.witnessThreshold ?? k;
  if (opts.witnessThreshold !== undefined) changes.push(`witness threshold set to ${opts.witnessThreshold}`);
  if (threshold > witnesses.length)
    throw new ClientConfigError(`witness threshold ${threshold} exceeds the ${witnesses.length} pinned witness(es)`);
  file.trust.policy = thresholdPolicy(file.trust.policy.logs, witnesses, threshold);
  return file.trust.policyFile !== undefined ? formatPolicy(file.trust.policy) : undefined;
}

/** --advance: verify the log's current checkpoint and move the pin to it once consistency is proven. */
async function advancePin(
  opts: TrustOptions,
  loaded: Session['loaded'],
  api: Session['api'],
  session: Session['session'],
  file: LedgerConfig,
  changes: string[],
): Promise<AdvanceResult> {
  const view = await logView(opts.tiles, loaded, api);
  const fresh = { ...session, trust: await trustOf(file, api ?? undefined) };
  const r = await verifyCheckpoint(fresh, view);
  const report = reportJson(r.report);
  if (r.report.failed) {
    if (opts.json) emitJson({ config: loaded.path, changes, advance: report });
    else {
      out(renderReport(r.report));
      out('The pin was not moved.');
    }
    exitFor(r.report);
    return { failed: true, report };
  }
  const advanced = r.pinMoved ?? { from: fresh.trust.pin.size, to: fresh.trust.pin.size };
  if (r.pinMoved) {
    file.trust.treeSize = r.checkpoint.treeSize;
    file.trust.rootHash = r.checkpoint.rootHash;
    changes.push(`pinned checkpoint advanced from size ${r.pinMoved.from} to ${r.pinMoved.to} (consistency proven)`);
  } else changes.push(`pinned checkpoint already current (size ${file.trust.treeSize})`);
  return { failed: false, advanced, report };
}

/** The trust settings as they now stand, and what changed (text or --json). */
function showTrust(
  opts: TrustOptions,
  loaded: Session['loaded'],
  file: LedgerConfig,
  changes: string[],
  advance: AdvanceResult | undefined,
): void {
  const shown = {
    config: loaded.path,
    endpoint: loaded.effective.endpoint ?? null,
    endpointFromEnv: loaded.overridden.endpoint,
    tenant: loaded.effective.tenant ?? null,
    tenantFromEnv: loaded.overridden.tenant,
    scope: file.scope ?? null,
    tiles: file.tiles ?? null,
    trust: {
      keyId: file.trust.keyId,
      origin: file.trust.origin ?? null,
      vkey: file.trust.vkey ?? null,
      treeSize: file.trust.treeSize,
      rootHash: file.trust.rootHash,
      policy: file.trust.policyFile !== undefined ? resolve(dirname(loaded.path), file.trust.policyFile) : null,
      quorum: describeQuorum(file.trust.policy),
      /** M of an M-of-N policy (0: none required); null for any other quorum. */
      witnessThreshold: simpleThreshold(file.trust.policy),
      witnesses: file.trust.policy.witnesses.map((w) => ({ name: w.name, vkey: w.vkey })),
    },
  };
  if (opts.json) {
    emitJson({
      ...shown,
      changes,
      ...(advance?.advanced ? { advanced: advance.advanced } : {}),
      ...(advance ? { advance: advance.report } : {}),
    });
    return;
  }
  for (const c of changes) out(`• ${c}`);
  if (changes.length) out();
  out(`Configuration  ${loaded.path}`);
  out(
    `Endpoint       ${shown.endpoint ?? '(none)'}${loaded.overridden.endpoint ? '  (from STELE_LEDGER_ENDPOINT)' : ''}`,
  );
  out(`Tenant         ${shown.tenant ?? '(none)'}${loaded.overridden.tenant ? '  (from STELE_LEDGER_TENANT)' : ''}`);
  out(`Scope          ${shown.scope ?? '(none)'}`);
  if (shown.tiles) out(`Tiles          ${shown.tiles}`);
  out(`Log            ${shown.trust.origin ?? '(origin not yet known)'}`);
  out(`Key id         ${file.trust.keyId}`);
  if (file.trust.vkey) out(`Vkey           ${file.trust.vkey}`);
  out(`Pinned         size ${file.trust.treeSize}, root ${file.trust.rootHash}`);
  if (shown.trust.policy) out(`Policy         ${shown.trust.policy}`);
  out(
    `Witnesses      ${shown.trust.witnesses.length} pinned; quorum: ${shown.trust.quorum === 'none' ? 'none (checkpoints are not witnessed)' : shown.trust.quorum}`,
  );
  for (const w of shown.trust.witnesses) out(`  ${w.name}  ${w.vkey}`);
}
