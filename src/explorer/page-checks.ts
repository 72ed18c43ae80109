// What the page verifies, independent of the DOM: the checkpoint (log signature against the
// trusted key, witness cosignatures, the tiles against the signed root, consistency with the
// last checkpoint this browser saw), single entries and whole record bundles (record →
// entry_hash chain → leaf → audit path computed from the tiles → signed root), and the
// PASS/FAIL report of `stele ledger verify` for a file.
import { entryId, parseCanonicalEntry } from '../core/entry.js';
import { EMPTY_ROOT, hashFromHex, leafHash } from '../core/hash.js';
import { proveConsistency, proveInclusion, treeHash } from '../core/merkle.js';
import {
  type Cosigner,
  type EntryEvidence,
  type KeyTrust,
  type Outcome,
  type ProveConsistency,
  Report as CoreReport,
  RULES,
  type Status,
  type StatusOutcome,
  checkCheckpoint,
  checkConsistency,
  checkEntry,
  checkInclusion,
} from '../core/verify/index.js';
import { VerifyError, verifyTlogProof } from '@stele/verify';
import { TILE_WIDTH } from '../core/tiles.js';
import type { Policy } from '../core/tlog-policy.js';
import { bytesEqual, short, toHex } from './bytes.js';
import { type LogClient, bundleWidth } from './log.js';
import { type Verifier, parseCheckpointBody, parseNote } from './note.js';
import { type FoldedProof, foldInclusion } from './proof.js';

export type { Status } from '../core/verify/index.js';

/** One line of a report as the page shows it (the rule number, when it is one of §4.3's). */
export interface PageCheck {
  readonly name: string;
  readonly status: Status;
  readonly detail: string;
  readonly rule?: number;
  /** Why a SKIP did not run, in a few words (what the verdict names). */
  readonly reason?: string;
}

const pass = (name: string, detail: string): PageCheck => ({ name, status: 'PASS', detail });
const fail = (name: string, detail: string): PageCheck => ({ name, status: 'FAIL', detail });
const skip = (name: string, detail: string, reason?: string): PageCheck => ({
  name,
  status: 'SKIP',
  detail,
  ...(reason ? { reason } : {}),
});

/** The keys the page verifies against: the log key and a C2SP tlog-policy over witness keys. */
export interface PageTrust extends KeyTrust {
  readonly log: Verifier;
  readonly witnesses: readonly Verifier[];
  readonly policy: Policy;
}

/** A checkpoint this browser has verified before (kept in local storage). */
export interface SeenCheckpoint {
  readonly size: number;
  readonly rootHex: string;
  readonly at: string;
}

export interface WitnessRow {
  readonly name: string;
  readonly status: 'PASS' | 'FAIL' | 'MISSING' | 'UNKNOWN';
  /** Cosignature time (unix seconds), when it verified. */
  readonly time?: number;
  readonly detail: string;
}

export interface CheckpointResult {
  readonly note: string;
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array | null;
  readonly signature: PageCheck;
  readonly witnesses: PageCheck;
  readonly witnessRows: WitnessRow[];
  readonly tiles: PageCheck;
  readonly consistency: PageCheck;
  /** True when every check passed or was skipped for a benign reason. */
  readonly ok: boolean;
  /** True when the checkpoint may be remembered as the new last-seen one. */
  readonly remember: boolean;
}

/**
 * The page's names for its checks: the §4.3 rules' own (src/core/verify/rules.ts), except rule 2,
 * whose pinned checkpoint is here the last one this browser saw; and the page's own check
 * that the tiles hash to the signed root.
 */
export const CHECK_NAMES = {
  signature: RULES.signature.name,
  witnesses: RULES.witnesses.name,
  tiles: 'Tiles match the signed root',
  consistency: 'Consistency with the last checkpoint seen',
  leaf: RULES.leaf.name,
  inclusion: RULES.inclusion.name,
  overall: RULES.overall.name,
} as const;

const RULE_NAMES: Record<number, string> = { [RULES.consistency.rule]: CHECK_NAMES.consistency };

/** A core check as the page shows it (its name through the page's map). */
export function present(c: {
  rule: number;
  name: string;
  status: Status;
  detail: string;
}): PageCheck & { rule: number } {
  return { rule: c.rule, name: RULE_NAMES[c.rule] ?? c.name, status: c.status, detail: c.detail };
}

const asCheck = (name: string, o: Outcome | StatusOutcome): PageCheck =>
  'status' in o
    ? { name, status: o.status, detail: o.detail }
    : { name, status: o.ok ? 'PASS' : 'FAIL', detail: o.detail };

const ROW_STATUS = { valid: 'PASS', invalid: 'FAIL', missing: 'MISSING', unknown: 'UNKNOWN' } as const;

function witnessRows(cosigners: readonly Cosigner[]): WitnessRow[] {
  return cosigners.map((c) => ({
    name: c.name,
    status: ROW_STATUS[c.status],
    ...(c.time !== undefined ? { time: c.time } : {}),
    detail:
      c.status === 'valid'
        ? 'cosignature verified'
        : c.status === 'invalid'
          ? 'a cosignature line under this witness key does not verify'
          : c.status === 'missing'
            ? 'no cosignature by this witness'
            : `signature by a key you do not trust (key hash ${c.keyHash}); not counted`,
  }));
}

async function tilesCheck(client: LogClient, size: number, root: Uint8Array): Promise<PageCheck> {
  const name = CHECK_NAMES.tiles;
  try {
    const h = size === 0 ? EMPTY_ROOT : await treeHash(size, client.reader(size));
    return bytesEqual(h, root)
      ? pass(name, `the tree hash recomputed from the right-edge tiles equals the signed root (size ${size})`)
      : fail(
          name,
          `the tiles hash to ${short(toHex(h))}, not the signed root ${short(toHex(root))}: a tile (or the checkpoint) was altered`,
        );
  } catch (e) {
    return fail(name, `cannot read the tiles: ${(e as Error).message}`);
  }
}

/** Consistency proofs computed in the browser from the tiles of the newer tree. */
export const tilesProver =
  (client: LogClient): ProveConsistency =>
  async (first, second) => ({ proof: await proveConsistency(first, second, client.reader(second)) });

async function consistencyCheck(
  client: LogClient,
  size: number,
  root: Uint8Array,
  seen: SeenCheckpoint | null,
): Promise<PageCheck> {
  const name = CHECK_NAMES.consistency;
  if (!seen)
    return skip(
      name,
      'first visit: this browser has not seen a checkpoint of this log before; it remembers this one now',
      'first visit',
    );
  const old = { size: seen.size, root: hashFromHex(seen.rootHex) };
  return asCheck(name, await checkConsistency(old, { size, root }, tilesProver(client), 'last-seen'));
}

export async function verifyPageCheckpoint(
  noteText: string,
  trust: PageTrust,
  client: LogClient,
  seen: SeenCheckpoint | null,
): Promise<CheckpointResult> {
  // Rules 1 and 5 are the core's (src/core/verify/checkpoint.ts), as in `stele ledger verify`.
  const cc = checkCheckpoint({ note: noteText }, trust);
  const signature = asCheck(CHECK_NAMES.signature, cc.signature);
  const witnesses = asCheck(CHECK_NAMES.witnesses, cc.witnesses);
  const sigOk = signature.status === 'PASS';
  let parsed = true;
  try {
    parseCheckpointBody(parseNote(noteText).body);
  } catch {
    parsed = false;
  }
  const { size, root } = cc;
  const [tiles, consistency] = parsed
    ? await Promise.all([
        tilesCheck(client, size, root),
        sigOk
          ? consistencyCheck(client, size, root, seen)
          : Promise.resolve(
              skip(
                CHECK_NAMES.consistency,
                'not checked: the checkpoint signature did not verify',
                'the checkpoint signature did not verify',
              ),
            ),
      ])
    : [skip(CHECK_NAMES.tiles, 'no checkpoint body'), skip(CHECK_NAMES.consistency, 'no checkpoint body')];
  const checks = [signature, witnesses, tiles, consistency];
  const ok = !checks.some((c) => c.status === 'FAIL');
  return {
    note: noteText,
    origin: parsed ? cc.origin : '',
    size: parsed ? size : 0,
    root: parsed ? root : null,
    signature,
    witnesses,
    witnessRows: witnessRows(cc.cosigners),
    tiles,
    consistency,
    ok,
    remember: ok && sigOk,
  };
}

// ---------------------------------------------------------------- entries

export type EntryFields = Record<string, unknown>;

/** A record's fields (the core's reading of a canonical entry); throws on anything else. */
export const parseRecord = (record: Uint8Array): EntryFields => parseCanonicalEntry(record);

/** The records and entry hashes of bundle `tile` (and the entry hash just before it). */
export interface BundleData {
  readonly tile: number;
  readonly first: number;
  readonly records: Uint8Array[];
  readonly entryHashes: Uint8Array[];
  readonly prior: Uint8Array;
}

export async function loadBundle(client: LogClient, tile: number, size: number): Promise<BundleData> {
  const width = bundleWidth(tile, size);
  if (width === 0) throw new RangeError(`tile ${tile} is beyond tree size ${size}`);
  const [records, entryHashes, prior] = await Promise.all([
    client.bundle('records', tile, width),
    client.bundle('entries', tile, width),
    tile === 0
      ? Promise.resolve(new Uint8Array(32))
      : client.bundle('entries', tile - 1, TILE_WIDTH).then((e) => e[TILE_WIDTH - 1]!),
  ]);
  return { tile, first: tile * TILE_WIDTH, records, entryHashes, prior };
}

export interface EntryResult {
  readonly seq: number;
  readonly size: number;
  readonly record: Uint8Array | null;
  readonly fields: EntryFields | null;
  readonly entryHash: Uint8Array | null;
  readonly id: string | null;
  readonly proof: FoldedProof | null;
  /** Rule 3: record → entry_hash (chained to the previous entry) → leaf, agreeing with the hash tile. */
  readonly leaf: PageCheck;
  /** Rule 4: the audit path read from the tiles rebuilds the signed root. */
  readonly inclusion: PageCheck;
  readonly ok: boolean;
  /** What rule 3 was given, to check it again for a file's digest. */
  readonly evidence?: EntryEvidence;
}

/**
 * Verifies entry `seq` of a bundle already loaded against the checkpoint (size, root): rule
 * 3 (src/core/verify/entry.ts: the record, chained to the previous entry hash, is the entry
 * hash of the entry bundle, and its leaf is the one in the level-0 hash tile) and rule 4
 * (src/core/verify/inclusion.ts: the audit path computed from the tiles rebuilds the root).
 */
export async function verifyLoadedEntry(
  client: LogClient,
  b: BundleData,
  seq: number,
  cp: { size: number; root: Uint8Array },
): Promise<EntryResult> {
  const i = seq - b.first;
  const record = b.records[i] ?? null;
  const eh = b.entryHashes[i] ?? null;
  const base = { seq, size: cp.size, record, entryHash: eh, id: eh ? entryId(seq, eh) : null };
  if (!record || !eh) {
    const c = fail(CHECK_NAMES.leaf, `entry ${seq} is not in bundle ${b.tile}`);
    return {
      ...base,
      fields: null,
      proof: null,
      leaf: c,
      inclusion: fail(CHECK_NAMES.inclusion, 'not checked: no entry'),
      ok: false,
    };
  }
  const tileNo = Math.floor(seq / TILE_WIDTH);
  let tileLeaf: Uint8Array | undefined;
  let tileProblem: string | undefined;
  try {
    tileLeaf = (await client.hashTile(0, tileNo, bundleWidth(tileNo, cp.size))).hashAt(0, seq % TILE_WIDTH);
  } catch (e) {
    tileProblem = `cannot read the level-0 hash tile: ${(e as Error).message}`;
  }
  const evidence: EntryEvidence = {
    seq,
    entry: record,
    prior: i === 0 ? b.prior : b.entryHashes[i - 1]!,
    claimed: { entryHash: eh, ...(tileLeaf ? { leafHash: tileLeaf } : {}) },
  };
  const checked = checkEntry(evidence);
  const leafCheck =
    tileProblem !== undefined
      ? fail(CHECK_NAMES.leaf, checked.ok ? tileProblem : `${checked.detail}; ${tileProblem}`)
      : asCheck(CHECK_NAMES.leaf, checked);
  const fields = (checked.entry as EntryFields | undefined) ?? null;

  let proof: FoldedProof | null = null;
  let inclusion: PageCheck;
  const leaf = leafHash(eh);
  try {
    const path = await proveInclusion(seq, cp.size, client.reader(cp.size));
    proof = foldInclusion(seq, cp.size, leaf, path);
    inclusion = asCheck(CHECK_NAMES.inclusion, checkInclusion(seq, cp.size, leaf, path, cp));
  } catch (e) {
    inclusion = fail(
      CHECK_NAMES.inclusion,
      `leaf index ${seq}, tree size ${cp.size}: cannot compute the audit path from the tiles: ${(e as Error).message}`,
    );
  }
  return {
    ...base,
    fields,
    proof,
    leaf: leafCheck,
    inclusion,
    ok: leafCheck.status === 'PASS' && inclusion.status === 'PASS',
    ...(tileProblem === undefined ? { evidence } : {}),
  };
}

export async function verifyEntry(
  client: LogClient,
  seq: number,
  cp: { size: number; root: Uint8Array },
): Promise<EntryResult> {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= cp.size)
    throw new RangeError(`entry ${seq} is not below the tree size ${cp.size}`);
  const b = await loadBundle(client, Math.floor(seq / TILE_WIDTH), cp.size);
  return verifyLoadedEntry(client, b, seq, cp);
}

/** Verifies every entry of a bundle (a page of the browse view). */
export async function verifyBundle(
  client: LogClient,
  tile: number,
  cp: { size: number; root: Uint8Array },
): Promise<EntryResult[]> {
  const b = await loadBundle(client, tile, cp.size);
  return Promise.all(b.records.map((_, i) => verifyLoadedEntry(client, b, b.first + i, cp)));
}

// ---------------------------------------------------------------- report

/** The report as the page shows it: the checks (names through the page's map), result and verdict. */
export interface PageReport {
  readonly checks: Array<PageCheck & { rule: number }>;
  readonly result: 'PASS' | 'FAIL';
  /** The core's verdict, e.g. "PASS (rule 2 not checked: first visit)". */
  readonly verdict: string;
}

export function reportView(r: CoreReport): PageReport {
  return { checks: r.checks.map(present), result: r.result, verdict: r.verdict };
}

const statusOutcome = (c: PageCheck): Outcome | StatusOutcome =>
  c.status === 'SKIP'
    ? { status: 'SKIP', detail: c.detail, ...(c.reason ? { reason: c.reason } : {}) }
    : { status: c.status, detail: c.detail };

/**
 * The six rules of `stele ledger verify` (docs/interface.md §4.3) in the core's report: checkpoint
 * signature, consistency, leaf hash, inclusion, witnesses, and the overall client-side
 * verdict. With `fileDigest`, rule 3 also requires the entry to record that digest.
 */
export function buildReport(cp: CheckpointResult, e: EntryResult, fileDigest?: string): PageReport {
  // With a file, rule 3 is asked again of the same evidence, now with the file's digest.
  const leaf =
    fileDigest !== undefined && e.evidence
      ? asCheck(CHECK_NAMES.leaf, checkEntry({ ...e.evidence, fileDigest }))
      : e.leaf;
  const r = new CoreReport('entry');
  r.add('signature', statusOutcome(cp.signature));
  r.add('consistency', statusOutcome(cp.consistency));
  r.add('leaf', statusOutcome(leaf));
  r.add('inclusion', statusOutcome(e.inclusion));
  r.add('witnesses', statusOutcome(cp.witnesses));
  r.finish();
  return reportView(r);
}

// ---------------------------------------------------------------- tlog-proof files

export interface TlogProofView {
  readonly report: PageReport;
  readonly index: number;
  readonly size: number;
  readonly entry: EntryFields | null;
  readonly entryHash: Uint8Array | null;
}

/**
 * A dropped C2SP tlog-proof, checked by the verifier package (`@stele/verify`, the core's
 * rules) exactly as `stele ledger verify --proof` does: against the trusted key and witness
 * policy, with rule 2 proved from the tiles against the checkpoint this page verified (when
 * it has one).
 */
export async function verifyTlogProofFile(
  text: string,
  trust: PageTrust,
  client: LogClient,
  current: { size: number; root: Uint8Array } | null,
  fileDigest?: string,
): Promise<TlogProofView> {
  try {
    const r = await verifyTlogProof(
      text,
      { ...trust, pin: current ?? { size: 0, root: EMPTY_ROOT } },
      {
        ...(fileDigest !== undefined ? { digest: fileDigest } : {}),
        ...(current ? { prove: tilesProver(client) } : {}),
      },
    );
    return {
      report: reportView(r.report),
      index: r.index,
      size: r.treeSize,
      entry: (r.entry as EntryFields | undefined) ?? null,
      entryHash: r.entryHash ?? null,
    };
  } catch (e) {
    if (!(e instanceof VerifyError)) throw e;
    const r = new CoreReport('entry');
    r.add('signature', { ok: false, detail: e.message });
    r.finish();
    return { report: reportView(r), index: -1, size: 0, entry: null, entryHash: null };
  }
}
