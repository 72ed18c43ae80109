// A client session: the pinned trust (the log key by its key id, the witnesses and their
// quorum, a checkpoint), the checkpoint rules every command runs (1, 2 and 5), moving the pin,
// and the result pieces the commands share. Nothing the log says is used before it is verified.
import { bytesEqual, hashFromHex, leafHash, toHex } from '../core/hash.js';
import { type NoteVerifier, SIG_ED25519, keyIdOf, parseVkey } from '../core/note.js';
import type { ObjectReader } from '../store/store.js';
import type { CheckpointView, EntryView, KeyView, LedgerApi } from './api.js';
import { type LedgerConfig, type LoadedConfig, advancePin, pinnedLogVerifier, trustWitnesses } from './config.js';
import { ClientConfigError, VerificationError } from './errors.js';
import { type ProofBundle, PROOF_FORMAT, type ProofStore } from './proofs.js';
import {
  type CheckedCheckpoint,
  type CheckpointInput,
  type Outcome,
  type ProveConsistency,
  type Report,
  type Trust,
  checkCheckpoint,
  type StatusOutcome,
  checkConsistency,
  checkCopyConsistency,
} from './rules.js';
import { type LogView, TilesView } from './views.js';

/** Checks a /api/ledger/key answer against the key id the user trusts; returns the log verifier. */
export function verifyKeyView(k: KeyView, trustedKeyId: string): NoteVerifier {
  const pub = Buffer.from(k.publicKey, 'base64');
  if (pub.length !== 32 || pub.toString('base64') !== k.publicKey)
    throw new VerificationError('the log key is not base64 of a 32-byte Ed25519 public key');
  const actual = keyIdOf(new Uint8Array(pub));
  if (actual !== trustedKeyId) {
    throw new VerificationError(
      `the log's public key hashes to key id ${actual}, not the trusted ${trustedKeyId}: refusing to pin it`,
    );
  }
  if (k.keyId !== trustedKeyId)
    throw new VerificationError(`the log reports key id ${k.keyId} for a key whose id is ${actual}`);
  let v: NoteVerifier;
  try {
    v = parseVkey(k.vkey);
  } catch (e) {
    throw new VerificationError(`the log's vkey is malformed: ${(e as Error).message}`);
  }
  if (v.type !== SIG_ED25519 || !bytesEqual(v.publicKey, new Uint8Array(pub)))
    throw new VerificationError('the log vkey is not the same Ed25519 key as its publicKey');
  if (v.name !== k.origin) throw new VerificationError(`the log vkey is named ${v.name}, not the origin ${k.origin}`);
  return v;
}

/** The pinned trust of a configuration; fetches the key (checked against key_id) if the file lacks its vkey. */
export async function trustOf(cfg: LedgerConfig, api?: LedgerApi): Promise<Trust> {
  let log = pinnedLogVerifier(cfg.trust);
  if (!log) {
    if (!api)
      throw new ClientConfigError(
        'the configuration pins only a key id; run a command online once (or `stele ledger trust-config --refresh-key`) to fetch the key',
      );
    log = verifyKeyView(await api.key(), cfg.trust.keyId);
  }
  return {
    origin: log.name,
    keyId: cfg.trust.keyId,
    log,
    ...trustWitnesses(cfg.trust),
    pin: { size: cfg.trust.treeSize, root: hashFromHex(cfg.trust.rootHash) },
  };
}

export interface Session {
  readonly config: LoadedConfig;
  readonly trust: Trust;
  readonly proofs: ProofStore;
  /** Leave the pinned checkpoint where it is even after verifying a newer one. */
  readonly keepPin?: boolean;
  /**
   * Where the log's tiles are (the CDN, the endpoint itself, a mirror): API answers are
   * bound to the log by reading the previous entry hash from the entry bundles.
   */
  readonly tiles?: ObjectReader;
  /** Where a line for the user goes that is neither a result nor an error (a cache not saved). */
  readonly onNotice?: (line: string) => void;
}

export interface PinMove {
  from: number;
  to: number;
}

/**
 * Rules 1, 2 and 5 for a checkpoint; moves the pin forward when all three pass. A checkpoint
 * read from a copy of the log (`copy`: tiles, a mirror) may be older than the pin (rule 2 by
 * checkCopyConsistency); one the log's API answered may not.
 */
export async function checkpointRules(
  s: Session,
  report: Report,
  input: CheckpointInput,
  prove: ProveConsistency | null,
  copy?: LogView,
): Promise<{ cc: CheckedCheckpoint; consistency: Outcome | StatusOutcome; pinMoved: PinMove | null }> {
  const cc = checkCheckpoint(input, s.trust);
  report.add('signature', cc.signature);
  const tree = { size: cc.size, root: cc.root };
  const consistency =
    copy instanceof TilesView
      ? await checkCopyConsistency(s.trust.pin, tree, prove, copy.proveToPin)
      : await checkConsistency(s.trust.pin, tree, prove);
  report.add('consistency', consistency);
  report.add('witnesses', cc.witnesses);
  let pinMoved: PinMove | null = null;
  const consistent = 'ok' in consistency && consistency.ok;
  if (!s.keepPin && cc.signature.ok && consistent && cc.witnesses.ok && cc.size > s.trust.pin.size) {
    const from = { treeSize: s.trust.pin.size, rootHash: toHex(s.trust.pin.root) };
    if (await advancePin(s.config.path, from, { treeSize: cc.size, rootHash: toHex(cc.root) }))
      pinMoved = { from: s.trust.pin.size, to: cc.size };
  }
  return { cc, consistency, pinMoved };
}

/**
 * The checkpoint as verified: origin, size and root are signed; `witnessedAt` is the signed
 * time of a valid policy witness's cosignature. The JSON `timestamp` is signed by no one
 * (docs/design.md §1.4), so it is kept apart, under `unsigned`.
 */
export interface CheckpointSummary {
  origin: string;
  treeSize: number;
  rootHash: string;
  witnessedAt?: string;
  unsigned?: UnsignedFields;
}

export function checkpointSummary(cc: CheckedCheckpoint): CheckpointSummary {
  return {
    origin: cc.origin,
    treeSize: cc.size,
    rootHash: toHex(cc.root),
    ...(cc.cosignedAt !== undefined ? { witnessedAt: new Date(cc.cosignedAt * 1000).toISOString() } : {}),
    ...(cc.unsignedTimestamp ? { unsigned: { timestamp: cc.unsignedTimestamp } } : {}),
  };
}

/** JSON checkpoint fields outside the signed note body: anyone between log and client can change them. */
export interface UnsignedFields {
  timestamp?: string;
  lifetimeEntries?: number;
  keyId?: string;
  witnesses?: CheckpointView['witnesses'];
}

export function bundleOf(
  entry: EntryView,
  leafIndex: number,
  auditPath: string[],
  cp: CheckpointView,
  s: Session,
  file?: string,
  prior?: string,
): ProofBundle {
  const b: ProofBundle = {
    format: PROOF_FORMAT,
    savedAt: new Date().toISOString(),
    origin: s.trust.origin,
    keyId: s.trust.keyId,
    entry,
    leafIndex,
    treeSize: cp.treeSize,
    leafHash: toHex(leafHash(hashFromHex(entry.proof.entryHash))),
    auditPath,
    rootHash: cp.rootHash,
    checkpoint: cp,
  };
  if (file !== undefined) b.file = file;
  if (prior !== undefined) b.priorEntryHash = prior;
  return b;
}
