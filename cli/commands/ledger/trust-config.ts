// `stele ledger trust-config`: show the pinned material; advance the pinned checkpoint only
// after proving consistency; replace the key only with --replace-key; manage witness keys
// and the number of cosignatures required.
import type { Command } from 'commander';
import { LedgerApi } from '../../../src/client/api.js';
import { type LedgerConfig, parseKeyId, parseWitnessVkey, readConfigFile, saveConfig } from '../../../src/client/config.js';
import { ConfigError, UsageError, VerificationError } from '../../../src/client/errors.js';
import { ApiView, trustOf, verifyCheckpoint, verifyKeyView } from '../../../src/client/ledger.js';
import { checkCheckpoint, checkConsistency } from '../../../src/client/verify.js';
import { toHex } from '../../../src/hash.js';
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

interface TrustOptions extends CommonOptions {
  advance?: boolean;
  tiles?: string | true;
  replaceKey?: string;
  refreshKey?: boolean;
  resetCheckpoint?: boolean;
  addWitness?: string[];
  removeWitness?: string[];
  witnessThreshold?: number;
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerTrustConfig(ledger: Command): void {
  common(
    ledger
      .command('trust-config')
      .description('show or change the pinned trust material (log key, checkpoint, witnesses)')
      .option('--advance', 'fetch the current checkpoint and move the pin to it, only after proving consistency')
      .addOption(tilesOption())
      .option('--replace-key <key_id>', 'explicitly replace the pinned log key with the one the log serves, if it hashes to <key_id>')
      .option('--reset-checkpoint', 'with --replace-key: accept a checkpoint not provably consistent with the old pin')
      .option('--refresh-key', 'fetch and store the vkey of the pinned key id (for a file that pins only key_id)')
      .option('--add-witness <vkey>', 'pin a witness cosignature key (repeatable)', collect)
      .option('--remove-witness <name>', 'unpin a witness by name (repeatable)', collect)
      .option('--witness-threshold <n>', 'valid witness cosignatures required (≤ pinned witnesses)', intArg('--witness-threshold')),
  ).action(async (opts: TrustOptions) => {
    const { loaded, api, session } = await openSession(opts, {
      online: Boolean(opts.advance || opts.replaceKey || opts.refreshKey),
      requireOnline: Boolean((opts.advance && !opts.tiles) || opts.replaceKey || opts.refreshKey),
    });
    const file: LedgerConfig = await readConfigFile(loaded.path);
    const changes: string[] = [];
    let exitReport: ReturnType<typeof reportJson> | undefined;

    if (opts.replaceKey !== undefined) {
      const keyId = parseKeyId(opts.replaceKey);
      if (!keyId) throw new UsageError(`malformed key id ${JSON.stringify(opts.replaceKey)}: expected 64 hex characters`);
      const key = await api!.key();
      const log = verifyKeyView(key, keyId);
      const cp = await api!.checkpoint();
      const trust = { ...session.trust, origin: log.name, keyId, log, pin: session.trust.pin };
      const cc = checkCheckpoint({ json: cp }, trust);
      if (!cc.signature.ok) throw new VerificationError(`the checkpoint does not verify under the new key: ${cc.signature.detail}`);
      const cons = await checkConsistency(session.trust.pin, { size: cc.size, root: cc.root }, new ApiView(api!).prove);
      if (!cons.ok && !opts.resetCheckpoint) throw new VerificationError(`${cons.detail} (pass --reset-checkpoint to pin it anyway)`);
      file.trust = { ...file.trust, keyId, origin: log.name, vkey: key.vkey, treeSize: cc.size, rootHash: toHex(cc.root) };
      changes.push(`log key replaced: now ${short(keyId)} (${log.name}); checkpoint pinned at size ${cc.size}${cons.ok ? ' (consistent with the old pin)' : ' (RESET: not proven consistent)'}`);
    } else if (opts.refreshKey) {
      const key = await (api as LedgerApi).key();
      verifyKeyView(key, file.trust.keyId);
      file.trust.vkey = key.vkey;
      file.trust.origin = key.origin;
      changes.push(`stored the vkey of key id ${short(file.trust.keyId)}`);
    }

    for (const name of opts.removeWitness ?? []) {
      const before = file.trust.witnesses.length;
      file.trust.witnesses = file.trust.witnesses.filter((w) => w.name !== name);
      if (file.trust.witnesses.length === before) throw new UsageError(`no pinned witness named ${name}`);
      changes.push(`removed witness ${name}`);
    }
    for (const vkey of opts.addWitness ?? []) {
      let v;
      try {
        v = parseWitnessVkey(vkey);
      } catch (e) {
        throw new UsageError(`--add-witness: ${(e as Error).message}`);
      }
      if (v.name === (file.trust.origin ?? session.trust.origin)) throw new UsageError('a witness cannot have the log origin as its name');
      const existing = file.trust.witnesses.find((w) => w.name === v.name);
      if (existing && existing.vkey !== vkey) throw new UsageError(`witness ${v.name} is already pinned with another key; remove it first`);
      if (!existing) {
        file.trust.witnesses.push({ name: v.name, vkey });
        changes.push(`added witness ${v.name}`);
      }
    }
    if (opts.witnessThreshold !== undefined) {
      file.trust.witnessThreshold = opts.witnessThreshold;
      changes.push(`witness threshold set to ${opts.witnessThreshold}`);
    }
    if (file.trust.witnessThreshold > file.trust.witnesses.length) {
      throw new ConfigError(`witness threshold ${file.trust.witnessThreshold} exceeds the ${file.trust.witnesses.length} pinned witness(es)`);
    }
    if (changes.length > 0) await saveConfig(loaded.path, file);

    let advanced: { from: number; to: number } | null = null;
    if (opts.advance) {
      const view = await logView(opts.tiles, loaded, api);
      const fresh = { ...session, trust: await trustOf(file, api ?? undefined) };
      const r = await verifyCheckpoint(fresh, view);
      exitReport = reportJson(r.report);
      if (r.report.failed) {
        if (opts.json) emitJson({ config: loaded.path, changes, advance: exitReport });
        else {
          out(renderReport(r.report));
          out('The pin was not moved.');
        }
        exitFor(r.report);
        return;
      }
      advanced = r.pinMoved ?? { from: fresh.trust.pin.size, to: fresh.trust.pin.size };
      if (r.pinMoved) {
        file.trust.treeSize = r.checkpoint.treeSize;
        file.trust.rootHash = r.checkpoint.rootHash;
        changes.push(`pinned checkpoint advanced from size ${r.pinMoved.from} to ${r.pinMoved.to} (consistency proven)`);
      } else changes.push(`pinned checkpoint already current (size ${file.trust.treeSize})`);
    }

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
        witnessThreshold: file.trust.witnessThreshold,
        witnesses: file.trust.witnesses,
      },
    };
    if (opts.json) {
      emitJson({ ...shown, changes, ...(advanced ? { advanced } : {}), ...(exitReport ? { advance: exitReport } : {}) });
      return;
    }
    for (const c of changes) out(`• ${c}`);
    if (changes.length) out();
    out(`Configuration  ${loaded.path}`);
    out(`Endpoint       ${shown.endpoint ?? '(none)'}${loaded.overridden.endpoint ? '  (from STELE_LEDGER_ENDPOINT)' : ''}`);
    out(`Tenant         ${shown.tenant ?? '(none)'}${loaded.overridden.tenant ? '  (from STELE_LEDGER_TENANT)' : ''}`);
    out(`Scope          ${shown.scope ?? '(none)'}`);
    if (shown.tiles) out(`Tiles          ${shown.tiles}`);
    out(`Log            ${shown.trust.origin ?? '(origin not yet known)'}`);
    out(`Key id         ${file.trust.keyId}`);
    if (file.trust.vkey) out(`Vkey           ${file.trust.vkey}`);
    out(`Pinned         size ${file.trust.treeSize}, root ${file.trust.rootHash}`);
    out(`Witnesses      ${file.trust.witnesses.length} pinned, ${file.trust.witnessThreshold} cosignature(s) required`);
    for (const w of file.trust.witnesses) out(`  ${w.name}  ${w.vkey}`);
  });
}
