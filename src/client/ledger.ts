// The client's operations (docs/interface.md §4.3), independent of the command line: each returns a
// result with a PASS/FAIL report; the CLI renders it. Nothing the log says is used before
// it is verified against the pinned key, the pinned checkpoint and the pinned witnesses.
import { basename } from 'node:path';
import { parseCheckpointBody } from '../core/checkpoint.js';
import { type LabelField, checkLabel } from '../core/labels.js';
import { ZERO_HASH, presentEntry } from '../core/entry.js';
import { bytesEqual, hashFromHex, leafHash, toHex } from '../core/hash.js';
import { type NoteVerifier, SIG_ED25519, keyIdOf, parseNote, parseVkey } from '../core/note.js';
import { LogReader } from '../read/reader.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { readBundle } from '../read/tilestore.js';
import type { AnchorBody, CheckpointView, EntryView, KeyView, LedgerApi } from './api.js';
import { type LedgerConfig, type LoadedConfig, advancePin, pinnedLogVerifier, trustWitnesses } from './config.js';
import { ApiError, ConfigError, UsageError, VerificationError } from './errors.js';
import { type ScanProgress, cacheFileFor, entryIndex, scanForDigest } from './entry-index.js';
import { type FileDigest, sha256File } from './hashfile.js';
import { type ProofBundle, PROOF_FORMAT, type ProofStore } from './proofs.js';
import {
  type CheckedCheckpoint,
  type CheckpointInput,
  type Outcome,
  type ProveConsistency,
  Report,
  type Trust,
  checkCheckpoint,
  type StatusOutcome,
  checkConsistency,
  checkConsistencyProof,
  checkConsistencyWithPin,
  checkCopyConsistency,
  checkEntry,
  checkInclusion,
  hashes,
} from './verify.js';

// ---- trust ----------------------------------------------------------------------------

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
      throw new ConfigError(
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

// ---- views of the log ----------------------------------------------------------------

export interface LogView {
  readonly kind: 'api' | 'tiles';
  /** URL or directory, for messages. */
  readonly name: string;
  checkpoint(): Promise<CheckpointInput>;
  prove: ProveConsistency;
}

export class ApiView implements LogView {
  readonly kind = 'api';
  constructor(readonly api: LedgerApi) {}
  get name(): string {
    return this.api.endpoint;
  }
  async checkpoint(): Promise<CheckpointInput> {
    return { json: await this.api.checkpoint() };
  }
  prove: ProveConsistency = async (first, second) => {
    const c = await this.api.consistency(first, second);
    return { proof: hashes(c.proof), firstRoot: hashFromHex(c.firstRoot), secondRoot: hashFromHex(c.secondRoot) };
  };
}

export class TilesView implements LogView {
  readonly kind = 'tiles';
  readonly reader: LogReader;
  /** Size of the checkpoint read: the tiles that exist are those of this tree. */
  published = 0;
  constructor(
    readonly source: ObjectReader,
    readonly name: string,
    /**
     * Consistency proofs from a tree that reaches the pin (the log's API, when configured):
     * what tells a copy older than the pin from a rolled-back log (rule 2).
     */
    readonly proveToPin: ProveConsistency | null = null,
  ) {
    // The client verifies every proof against the checkpoint it checked and pinned.
    this.reader = new LogReader(source, { cacheBytes: 16 * 1024 * 1024, unverified: true });
  }
  async checkpoint(): Promise<CheckpointInput> {
    const bytes = await this.source.get('checkpoint');
    if (!bytes) throw new VerificationError(`${this.name} has no checkpoint`);
    const note = Buffer.from(bytes).toString('utf8');
    try {
      this.published = parseCheckpointBody(parseNote(note).body).size;
    } catch {
      // malformed: checkCheckpoint reports it
    }
    return { note };
  }
  prove: ProveConsistency = async (first, second) => ({
    proof: await this.reader.consistencyProof(first, second, this.published),
  });
}

// ---- shared pieces -------------------------------------------------------------------

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

/** The entry hash of leaf seq − 1 (zeros for seq 0), read from the entry bundle of the tree of `size`. */
export async function priorEntryHash(source: ObjectReader, seq: number, size: number): Promise<Uint8Array> {
  if (seq === 0) return ZERO_HASH;
  const n = Math.floor((seq - 1) / TILE_WIDTH);
  const items = await readBundle(source, 'entries', n, Math.min(TILE_WIDTH, size - n * TILE_WIDTH));
  return items[(seq - 1) % TILE_WIDTH]!;
}

/**
 * Rule 3 for an API answer (src/core/verify/entry.ts): the entry's fields, with entry
 * seq − 1's hash read from the tiles (or known from a stored proof), must hash to the entry
 * hash; the leaf hash and id the log sent must agree, and the entry must record the file's digest.
 */
export async function leafRule(
  s: Session,
  entry: EntryView,
  seq: number,
  size: number,
  leafHashHex: string,
  fileDigest: string | undefined,
  knownPrior?: string,
): Promise<Outcome & { prior?: string }> {
  let prior: Uint8Array;
  try {
    if (knownPrior !== undefined) prior = hashFromHex(knownPrior);
    else if (seq === 0) prior = ZERO_HASH;
    else if (s.tiles) prior = await priorEntryHash(s.tiles, seq, size);
    else
      return {
        ok: false,
        detail: `no tiles to read entry ${seq - 1}'s hash from, so the entry's fields are unproven`,
      };
  } catch (e) {
    return {
      ok: false,
      detail: `entry ${seq - 1}'s hash could not be read to bind the entry's fields: ${(e as Error).message}`,
    };
  }
  const checked = checkEntry({
    seq,
    entry,
    prior,
    claimed: { entryHash: hashFromHex(entry.proof.entryHash), leafHash: hashFromHex(leafHashHex), id: entry.id },
    ...(fileDigest !== undefined ? { fileDigest } : {}),
  });
  return checked.ok ? { ok: true, detail: checked.detail, prior: toHex(prior) } : checked;
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

function bundleOf(
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

// ---- verify <file> -------------------------------------------------------------------

export interface VerifyResult {
  readonly file: string;
  readonly digest: string;
  readonly bytes: number;
  /** 'tlog-proof': from a C2SP tlog-proof file alone, offline (src/client/tlog-proof-file.ts). */
  readonly mode: 'api' | 'tiles' | 'tlog-proof';
  readonly source: string;
  readonly report: Report;
  readonly entry?: EntryView;
  readonly leafIndex?: number;
  readonly treeSize?: number;
  readonly checkpoint?: CheckpointSummary;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
}

export interface VerifyOptions {
  /** For --tiles: the leaf to check (else a stored proof bundle's, else found by the digest). */
  readonly leafIndex?: number;
  readonly digest?: FileDigest;
  readonly onHashProgress?: (bytes: number, total: number) => void;
  /** For --tiles without a stored proof: progress of the search through the record bundles. */
  readonly onScanProgress?: ScanProgress;
}

export async function verifyFile(
  s: Session,
  view: LogView,
  file: string,
  opts: VerifyOptions = {},
): Promise<VerifyResult> {
  const { digest, bytes } = opts.digest ?? (await sha256File(file, opts.onHashProgress));
  return view instanceof ApiView
    ? verifyFileApi(s, view, file, digest, bytes)
    : verifyFileTiles(s, view as TilesView, file, digest, bytes, opts);
}

async function verifyFileApi(
  s: Session,
  view: ApiView,
  file: string,
  digest: string,
  bytes: number,
): Promise<VerifyResult> {
  const report = new Report();
  const base = { file, digest, bytes, mode: 'api' as const, source: view.name, report };
  let found;
  try {
    found = await view.api.entry({ hash: digest });
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
    // Not anchored: still show whether the log itself checks out.
    const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove);
    report.add('leaf', { ok: false, detail: await notAnchored(view.api, file, digest) });
    report.add('inclusion', { ok: false, detail: 'not checked: no entry to prove' });
    report.finish();
    return { ...base, checkpoint: checkpointSummary(cc), pinMoved };
  }
  const { cc, pinMoved } = await checkpointRules(s, report, { json: found.checkpoint }, view.prove);
  const leaf = await leafRule(s, found.entry, found.leafIndex, found.treeSize, found.leafHash, digest);
  report.add('leaf', leaf);
  const recomputedLeaf = leafHash(hashFromHex(found.entry.proof.entryHash));
  let inclusion = checkInclusion(found.leafIndex, found.treeSize, recomputedLeaf, hashes(found.auditPath), cc);
  if (inclusion.ok && found.rootHash !== toHex(cc.root))
    inclusion = { ok: false, detail: `the response's rootHash is not the checkpoint root` };
  report.add('inclusion', inclusion);
  let savedProof: string | undefined;
  if (report.finish()) {
    savedProof = await s.proofs.save(
      bundleOf(found.entry, found.leafIndex, found.auditPath, found.checkpoint, s, file, leaf.prior),
    );
  }
  return {
    ...base,
    entry: found.entry,
    leafIndex: found.leafIndex,
    treeSize: found.treeSize,
    checkpoint: checkpointSummary(cc),
    pinMoved,
    ...(savedProof ? { savedProof } : {}),
  };
}

/**
 * Rule 3's words for a file whose digest no entry records. When the log holds an anchor under
 * the file's name, the file is most likely a changed copy of that release: say so, and name
 * the digest the log recorded (what the log says, as a pointer: a FAIL either way).
 */
async function notAnchored(api: LedgerApi, file: string, digest: string): Promise<string> {
  const none = `no entry in the log has the file's digest ${digest}: it is not anchored`;
  const label = file === '-' ? undefined : basename(file);
  if (label === undefined || !checkLabel('artifact', label).ok) return none;
  try {
    // The latest entry under that name in each scope (a few at most); the first that records another digest.
    for (const leaf of (await api.searchArtifact(label)).slice(0, 4)) {
      const { entry } = await api.entry({ leaf });
      if (entry.artifact === label && entry.digest !== digest)
        return `${label} is anchored with digest ${entry.digest} (entry ${entry.id}); this file's digest is ${digest}: it differs from the anchored file`;
    }
    return none;
  } catch (e) {
    if (e instanceof ApiError) return none; // no anchor under that name, or the log cannot say
    throw e;
  }
}

/**
 * Where `digest`'s entry is in a copy of the log: a stored proof bundle's leaf if there is
 * one, else the earliest entry recording it in the record bundles (a local mirror's index
 * is cached beside the configuration). Undefined when no entry of the tree records it.
 */
async function locateDigest(
  s: Session,
  view: TilesView,
  digest: string,
  tree: { size: number; root: Uint8Array },
  onScanProgress?: ScanProgress,
): Promise<number | undefined> {
  const stored = await s.proofs.findByDigest(digest, s.trust.origin);
  const inTree = stored.find((b) => b.leafIndex < tree.size);
  if (inTree) return inTree.leafIndex;
  const cacheFile = cacheFileFor(view.source, s.config.path);
  if (!cacheFile) return scanForDigest(view.reader, tree.size, digest, onScanProgress);
  const { index } = await entryIndex(view, tree, cacheFile, { progress: onScanProgress, notice: s.onNotice });
  return Object.hasOwn(index.digests, digest) ? index.digests[digest] : undefined;
}

/**
 * Rules 3 and 4 for leaf `seq` read from the tiles of the verified checkpoint `cc`: the
 * record (with the previous entry hash) is the entry hash in the entry bundle and records
 * `digest` when one is given (src/core/verify/entry.ts), and the audit path from the hash
 * tiles rebuilds the root (src/core/verify/inclusion.ts).
 */
export async function checkTilesEntry(
  view: TilesView,
  report: Report,
  seq: number,
  cc: CheckedCheckpoint,
  digest?: string,
): Promise<EntryView | undefined> {
  const size = cc.size;
  if (seq >= size) {
    report.add('leaf', { ok: false, detail: `leaf index ${seq} is not in the tree of size ${size}` });
    report.add('inclusion', { ok: false, detail: 'not checked: no leaf to prove' });
    return undefined;
  }
  const isTransport = (e: unknown) => {
    const kind = (e as { kind?: string }).kind;
    return kind === 'network' || kind === 'io';
  };
  let checked: ReturnType<typeof checkEntry> | undefined;
  try {
    const at = await view.reader.entry(seq, size);
    const n = Math.floor((seq - 1) / TILE_WIDTH);
    const prior =
      seq === 0
        ? ZERO_HASH
        : (await view.reader.bundle('entries', n, Math.min(TILE_WIDTH, size - n * TILE_WIDTH)))[
            (seq - 1) % TILE_WIDTH
          ]!;
    checked = checkEntry({
      seq,
      entry: at.canonical,
      prior,
      claimed: { entryHash: at.entryHash },
      ...(digest !== undefined ? { fileDigest: digest } : {}),
    });
    report.add('leaf', checked);
  } catch (e) {
    if (isTransport(e)) throw e;
    report.add('leaf', { ok: false, detail: `entry ${seq}: ${(e as Error).message}` });
  }
  if (checked?.leaf) {
    try {
      const path = await view.reader.inclusionProof(seq, size);
      report.add('inclusion', checkInclusion(seq, size, checked.leaf, path, cc));
    } catch (e) {
      if (isTransport(e)) throw e;
      report.add('inclusion', {
        ok: false,
        detail: `cannot compute the audit path from the tiles: ${(e as Error).message}`,
      });
    }
  } else {
    report.add('inclusion', { ok: false, detail: 'not checked: no entry hash read to prove' });
  }
  return checked?.entry && checked.entryHash
    ? (presentEntry(checked.entry, seq, checked.entryHash) as EntryView)
    : undefined;
}

async function verifyFileTiles(
  s: Session,
  view: TilesView,
  file: string,
  digest: string,
  bytes: number,
  opts: VerifyOptions,
): Promise<VerifyResult> {
  const report = new Report();
  const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove, view);
  const base = {
    file,
    digest,
    bytes,
    mode: 'tiles' as const,
    source: view.name,
    report,
    treeSize: cc.size,
    checkpoint: checkpointSummary(cc),
    pinMoved,
  };
  const seq = opts.leafIndex ?? (await locateDigest(s, view, digest, cc, opts.onScanProgress));
  if (seq === undefined) {
    report.add('leaf', {
      ok: false,
      detail: `no entry of ${view.name} (tree size ${cc.size}) records the file's digest ${digest}: it is not anchored in this copy of the log`,
    });
    report.add('inclusion', { ok: false, detail: 'not checked: no entry to prove' });
    report.finish();
    return base;
  }
  const entry = await checkTilesEntry(view, report, seq, cc, digest);
  report.finish();
  return { ...base, leafIndex: seq, ...(entry ? { entry } : {}) };
}

// ---- anchor --------------------------------------------------------------------------

export interface AnchorResult {
  readonly file: string;
  readonly digest: string;
  readonly bytes: number;
  readonly report: Report;
  readonly entry: EntryView;
  readonly leafIndex: number;
  readonly treeSize: number;
  readonly checkpoint: CheckpointSummary;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
  /** The log already held this anchor (same digest, artifact, scope, tenant) and answered with that entry. */
  readonly existing: boolean;
}

export interface AnchorOptions {
  readonly artifact?: string;
  readonly scope?: string;
  /** Sent with the anchor; the entry records it (in production the token's tenant decides). */
  readonly tenant?: string;
  readonly type?: AnchorBody['type'];
  /** Append a new entry even if the log holds an identical anchor (else it answers with that one). */
  readonly allowDuplicate?: boolean;
  readonly digest?: FileDigest;
  readonly onHashProgress?: (bytes: number, total: number) => void;
}

/** A label option checked by the log's rule (src/core/labels.ts), in its NFC form. */
export function labelOption(field: LabelField, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const checked = checkLabel(field, value);
  if (!checked.ok) throw new UsageError(checked.reason);
  return checked.value;
}

export async function anchorFile(
  s: Session,
  api: LedgerApi,
  file: string,
  opts: AnchorOptions = {},
): Promise<AnchorResult> {
  // Labels by the log's rule (NFC, no invisible or control characters), refused before any work.
  const artifact = labelOption('artifact', opts.artifact);
  const scope = labelOption('scope', opts.scope);
  const tenant = labelOption('tenant', opts.tenant);
  const { digest, bytes } = opts.digest ?? (await sha256File(file, opts.onHashProgress));
  const body: AnchorBody = { digest };
  if (artifact !== undefined) body.artifact = artifact;
  if (scope !== undefined) body.scope = scope;
  if (tenant !== undefined) body.tenant = tenant;
  if (opts.type !== undefined && opts.type !== 'ledger_anchor') body.type = opts.type;
  if (opts.allowDuplicate) body.allowDuplicate = true;
  const res = await api.anchor(body);
  const report = new Report();
  const view = new ApiView(api);
  const { cc, pinMoved } = await checkpointRules(s, report, { json: res.checkpoint }, view.prove);
  const expectedType = opts.type ?? 'ledger_anchor';
  const eh = hashFromHex(res.entry.proof.entryHash);
  let leaf: Outcome & { prior?: string } = await leafRule(
    s,
    res.entry,
    res.leafIndex,
    res.checkpoint.treeSize,
    toHex(leafHash(eh)),
    digest,
  );
  const echo: string[] = [];
  if (res.entry.type !== expectedType) echo.push(`entry type is ${res.entry.type}, not ${expectedType}`);
  if (artifact !== undefined && res.entry.artifact !== artifact) echo.push('entry does not carry the artifact sent');
  if (scope !== undefined && res.entry.scope !== scope) echo.push('entry does not carry the scope sent');
  if (tenant !== undefined && res.entry.tenant !== tenant) echo.push('entry does not carry the tenant sent');
  if (echo.length) leaf = { ok: false, detail: [leaf.ok ? '' : leaf.detail, ...echo].filter(Boolean).join('; ') };
  report.add('leaf', leaf);
  report.add('inclusion', checkInclusion(res.leafIndex, cc.size, leafHash(eh), hashes(res.inclusionProof), cc));
  let savedProof: string | undefined;
  if (report.finish())
    savedProof = await s.proofs.save(
      bundleOf(res.entry, res.leafIndex, res.inclusionProof, res.checkpoint, s, file, leaf.prior),
    );
  return {
    file,
    digest,
    bytes,
    report,
    entry: res.entry,
    leafIndex: res.leafIndex,
    treeSize: res.checkpoint.treeSize,
    checkpoint: checkpointSummary(cc),
    pinMoved,
    ...(savedProof ? { savedProof } : {}),
    existing: res.existing === true,
  };
}

// ---- proof <entry_id> ------------------------------------------------------------------

export interface ProofResult {
  readonly bundle: ProofBundle;
  readonly stored: boolean;
  readonly report: Report;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
}

export async function proveEntry(s: Session, id: string, api: LedgerApi | null): Promise<ProofResult> {
  let bundle = await s.proofs.load(id);
  const stored = bundle !== null;
  if (!bundle) {
    if (!api) throw new UsageError(`no stored proof for ${id}, and no endpoint to fetch it from`);
    let found;
    try {
      found = await api.entry({ id });
    } catch (e) {
      if (e instanceof ApiError && e.status === 404)
        throw new VerificationError(`entry ${id} is not in the log (${e.message})`);
      throw e;
    }
    bundle = bundleOf(found.entry, found.leafIndex, found.auditPath, found.checkpoint, s);
    bundle.leafHash = found.leafHash;
    bundle.rootHash = found.rootHash;
    bundle.treeSize = found.treeSize;
  }
  const report = new Report();
  const cc = checkCheckpoint({ json: bundle.checkpoint }, s.trust);
  report.add('signature', cc.signature);
  const prove = api ? new ApiView(api).prove : null;
  const pin = s.trust.pin;
  const consistency = await checkConsistencyWithPin(pin, { size: cc.size, root: cc.root }, prove, {
    reason: 'offline',
    detail: `offline: the proof's checkpoint (size ${cc.size}) and the pinned one (size ${pin.size}) differ; run online to prove consistency`,
  });
  report.add('consistency', consistency);
  report.add('witnesses', cc.witnesses);
  if (bundle.entry.id !== id)
    report.add('leaf', { ok: false, detail: `the log answered with entry ${bundle.entry.id}, not ${id}` });
  else {
    const leaf = await leafRule(
      api ? s : { ...s, tiles: undefined },
      bundle.entry,
      bundle.leafIndex,
      bundle.treeSize,
      bundle.leafHash,
      undefined,
      bundle.priorEntryHash,
    );
    if (leaf.ok && leaf.prior) bundle.priorEntryHash = leaf.prior;
    report.add('leaf', leaf);
  }
  let inclusion = checkInclusion(
    bundle.leafIndex,
    bundle.treeSize,
    leafHash(hashFromHex(bundle.entry.proof.entryHash)),
    hashes(bundle.auditPath),
    cc,
  );
  if (inclusion.ok && bundle.rootHash !== toHex(cc.root))
    inclusion = { ok: false, detail: 'the proof rootHash is not the checkpoint root' };
  report.add('inclusion', inclusion);
  const ok = report.finish();
  let savedProof: string | undefined;
  if (ok && !stored) savedProof = await s.proofs.save(bundle);
  let pinMoved: PinMove | null = null;
  if (ok && !s.keepPin && cc.size > pin.size && 'ok' in consistency && consistency.ok) {
    if (
      await advancePin(
        s.config.path,
        { treeSize: pin.size, rootHash: toHex(pin.root) },
        { treeSize: cc.size, rootHash: toHex(cc.root) },
      )
    ) {
      pinMoved = { from: pin.size, to: cc.size };
    }
  }
  return { bundle, stored, report, pinMoved, ...(savedProof ? { savedProof } : {}) };
}

// ---- checkpoint ----------------------------------------------------------------------

/** JSON checkpoint fields outside the signed note body: anyone between log and client can change them. */
export interface UnsignedFields {
  timestamp?: string;
  lifetimeEntries?: number;
  keyId?: string;
  witnesses?: CheckpointView['witnesses'];
}

export interface CheckpointResult {
  readonly report: Report;
  /** Verified facts, and (`unsigned`) the JSON fields no signature covers, shown as such. */
  readonly checkpoint: CheckpointSummary & { keyId: string };
  readonly witnesses: string[];
  /** The signed note (as served, or rebuilt from the JSON signature fields). */
  readonly note: string;
  readonly pinMoved: PinMove | null;
  readonly pinnedBefore: number;
}

function unsignedFields(j: CheckpointView): UnsignedFields {
  return {
    ...(j.timestamp ? { timestamp: j.timestamp } : {}),
    ...(j.lifetimeEntries !== undefined ? { lifetimeEntries: j.lifetimeEntries } : {}),
    keyId: j.keyId,
    witnesses: j.witnesses,
  };
}

export async function verifyCheckpoint(s: Session, view: LogView): Promise<CheckpointResult> {
  const report = new Report('checkpoint');
  const input = await view.checkpoint();
  const { cc, pinMoved } = await checkpointRules(s, report, input, view.prove, view);
  report.finish();
  const note = cc.note ?? '';
  return {
    report,
    checkpoint: {
      ...checkpointSummary(cc),
      keyId: s.trust.keyId,
      ...(input.json ? { unsigned: unsignedFields(input.json) } : {}),
    },
    witnesses: cc.witnesses.names,
    note,
    pinMoved,
    pinnedBefore: s.trust.pin.size,
  };
}

// ---- consistency --from --to -----------------------------------------------------------

export interface ConsistencyResult {
  readonly report: Report;
  readonly from: number;
  readonly to: number;
  readonly firstRoot?: string;
  readonly secondRoot?: string;
  readonly proof?: string[];
  readonly checkpoint: CheckpointSummary;
  readonly pinMoved: PinMove | null;
}

export async function proveConsistency(
  s: Session,
  view: LogView,
  from: number | undefined,
  to: number | undefined,
): Promise<ConsistencyResult> {
  const report = new Report('checkpoint');
  const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove, view);
  const a = from ?? s.trust.pin.size;
  const b = to ?? cc.size;
  const base = { report, from: a, to: b, checkpoint: checkpointSummary(cc), pinMoved };
  // Sizes the user gave are checked as usage; a log smaller than the pin is rule 2's FAIL
  // (a rollback, already in the report), not a usage error.
  if (from === undefined && to === undefined && a > b) {
    report.finish();
    return base;
  }
  if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || a < 1 || a > b)
    throw new UsageError(`need 1 ≤ --from ≤ --to (got ${a} → ${b})`);
  if (b > cc.size) throw new UsageError(`--to ${b} exceeds the current tree size ${cc.size}`);

  let firstRoot: Uint8Array;
  let secondRoot: Uint8Array;
  let proof: Uint8Array[];
  try {
    if (view instanceof ApiView) {
      const c = await view.api.consistency(a, b);
      [firstRoot, secondRoot, proof] = [hashFromHex(c.firstRoot), hashFromHex(c.secondRoot), hashes(c.proof)];
    } else {
      const r = (view as TilesView).reader;
      const p = cc.size;
      ({ firstRoot, secondRoot, proof } = await r.consistency(a, b, p));
    }
  } catch (e) {
    if (!(e instanceof ApiError) && (e as { kind?: string }).kind !== undefined) throw e;
    report.addCheck(7, `Consistency ${a} → ${b}`, { ok: false, detail: `no proof: ${(e as Error).message}` });
    report.finish();
    return base;
  }
  const requested = checkConsistencyProof({ size: a, root: firstRoot }, { size: b, root: secondRoot }, proof);
  report.addCheck(7, `Consistency ${a} → ${b}`, requested);
  const anchored = await checkConsistency(
    { size: b, root: secondRoot },
    { size: cc.size, root: cc.root },
    view.prove,
    'requested',
  );
  report.addCheck(
    8,
    'Anchored to the verified checkpoint',
    anchored.ok
      ? { ok: true, detail: b === cc.size ? `size ${b} is the checkpoint itself` : anchored.detail }
      : anchored,
  );
  if (a === s.trust.pin.size && !bytesEqual(firstRoot, s.trust.pin.root)) {
    report.addCheck(7, `Consistency ${a} → ${b}`, {
      ok: false,
      detail: `the claimed root of size ${a} differs from the pinned root`,
    });
  }
  report.finish();
  return { ...base, firstRoot: toHex(firstRoot), secondRoot: toHex(secondRoot), proof: proof.map(toHex) };
}
