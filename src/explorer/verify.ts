// What the page verifies, independent of the DOM: the checkpoint (log signature against the
// trusted key, witness cosignatures, the tiles against the signed root, consistency with the
// last checkpoint this browser saw), single entries and whole record bundles (record →
// entry_hash chain → leaf → audit path computed from the tiles → signed root), and the
// PASS/FAIL report of `stele ledger verify` for a file.
import { entryHash, entryId } from '../core/entry.js';
import { EMPTY_ROOT, leafHash } from '../core/hash.js';
import { proveConsistency, proveInclusion, treeHash, verifyConsistency } from '../core/merkle.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { bytesEqual, short, toHex } from './bytes.js';
import { type LogClient, bundleWidth } from './log.js';
import { type ParsedNote, type Verifier, checkSignature, linesBy, parseCheckpointBody, parseNote } from './note.js';
import { type FoldedProof, foldInclusion } from './proof.js';

export type Status = 'PASS' | 'FAIL' | 'SKIP';

export interface Check {
  readonly name: string;
  readonly status: Status;
  readonly detail: string;
}

const pass = (name: string, detail: string): Check => ({ name, status: 'PASS', detail });
const fail = (name: string, detail: string): Check => ({ name, status: 'FAIL', detail });
const skip = (name: string, detail: string): Check => ({ name, status: 'SKIP', detail });

/** The keys the page verifies against. */
export interface Trust {
  readonly log: Verifier;
  readonly witnesses: readonly Verifier[];
  readonly threshold: number;
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
  readonly signature: Check;
  readonly witnesses: Check;
  readonly witnessRows: WitnessRow[];
  readonly tiles: Check;
  readonly consistency: Check;
  /** True when every check passed or was skipped for a benign reason. */
  readonly ok: boolean;
  /** True when the checkpoint may be remembered as the new last-seen one. */
  readonly remember: boolean;
}

export const CHECK_NAMES = {
  signature: 'Checkpoint signature',
  witnesses: 'Witness cosignatures',
  tiles: 'Tiles match the signed root',
  consistency: 'Consistency with the last checkpoint seen',
  leaf: 'Leaf hash',
  inclusion: 'Inclusion',
  overall: 'Client-side verification',
} as const;

function signatureCheck(note: ParsedNote | null, body: { origin: string } | null, parseError: string | null, trust: Trust): Check {
  const name = CHECK_NAMES.signature;
  if (!note || !body) return fail(name, `malformed checkpoint: ${parseError}`);
  if (body.origin !== trust.log.name) return fail(name, `checkpoint is for origin ${body.origin}, not the trusted log ${trust.log.name}`);
  const mine = linesBy(note, trust.log);
  if (mine.length === 0) {
    const others = [...new Set(note.signatures.map((s) => s.name))];
    return fail(name, `no signature by the trusted key ${short(trust.log.keyId)} (signed by: ${others.join(', ') || 'nobody'} with other keys)`);
  }
  const results = mine.map((s) => checkSignature(note.body, s, trust.log));
  if (results.some((r) => r.status === 'valid')) {
    return pass(name, `Ed25519 signature by the trusted key ${trust.log.name} (key id ${short(trust.log.keyId)}) verified in your browser`);
  }
  const why = results.find((r) => r.status === 'invalid');
  return fail(name, `the signature does not verify under the trusted key ${short(trust.log.keyId)}: ${why && why.status === 'invalid' ? why.reason : ''} (forged or altered checkpoint)`);
}

function witnessCheck(note: ParsedNote | null, sigOk: boolean, trust: Trust): { check: Check; rows: WitnessRow[] } {
  const name = CHECK_NAMES.witnesses;
  const rows: WitnessRow[] = [];
  if (note) {
    for (const w of trust.witnesses) {
      const lines = linesBy(note, w);
      if (lines.length === 0) {
        rows.push({ name: w.name, status: 'MISSING', detail: 'no cosignature by this witness' });
        continue;
      }
      const results = lines.map((l) => checkSignature(note.body, l, w));
      const ok = results.find((r) => r.status === 'valid');
      if (ok && ok.status === 'valid') rows.push({ name: w.name, status: 'PASS', ...(ok.time !== undefined ? { time: ok.time } : {}), detail: 'cosignature verified' });
      else {
        const bad = results[0]!;
        rows.push({ name: w.name, status: 'FAIL', detail: bad.status === 'invalid' ? bad.reason : 'invalid' });
      }
    }
    const known = [trust.log, ...trust.witnesses];
    for (const s of note.signatures) {
      if (!known.some((k) => k.name === s.name && bytesEqual(k.keyHash, s.keyHash))) {
        rows.push({ name: s.name, status: 'UNKNOWN', detail: `signature by a key you do not trust (key hash ${toHex(s.keyHash)}); not counted` });
      }
    }
  }
  const valid = rows.filter((r) => r.status === 'PASS').length;
  const bad = rows.filter((r) => r.status === 'FAIL');
  const t = trust.threshold;
  if (!sigOk) return { rows, check: fail(name, 'not counted: the checkpoint itself did not verify') };
  if (bad.length > 0) return { rows, check: fail(name, `invalid cosignature by ${bad.map((r) => r.name).join(', ')}`) };
  if (trust.witnesses.length === 0 && t === 0) return { rows, check: skip(name, 'no witnesses are configured for this log') };
  const detail = `${valid} of ${trust.witnesses.length} trusted witness${trust.witnesses.length === 1 ? '' : 'es'} cosigned; ${t} required`;
  return { rows, check: valid >= t ? pass(name, detail) : fail(name, `${detail} — below the threshold`) };
}

async function tilesCheck(client: LogClient, size: number, root: Uint8Array): Promise<Check> {
  const name = CHECK_NAMES.tiles;
  try {
    const h = size === 0 ? EMPTY_ROOT : await treeHash(size, client.reader(size));
    return bytesEqual(h, root)
      ? pass(name, `the tree hash recomputed from the right-edge tiles equals the signed root (size ${size})`)
      : fail(name, `the tiles hash to ${short(toHex(h))}, not the signed root ${short(toHex(root))}: a tile (or the checkpoint) was altered`);
  } catch (e) {
    return fail(name, `cannot read the tiles: ${(e as Error).message}`);
  }
}

async function consistencyCheck(client: LogClient, size: number, root: Uint8Array, seen: SeenCheckpoint | null): Promise<Check> {
  const name = CHECK_NAMES.consistency;
  if (!seen) return skip(name, 'first visit: this browser has not seen a checkpoint of this log before; it remembers this one now');
  const old = { size: seen.size, root: hexBytes(seen.rootHex) };
  if (size < old.size) return fail(name, `tree size ${size} is smaller than the ${old.size} this browser saw on ${seen.at}: the log rolled back (or serves a stale view)`);
  if (size === old.size) {
    return bytesEqual(root, old.root)
      ? pass(name, `same tree as the checkpoint seen on ${seen.at} (size ${size})`)
      : fail(name, `size ${size} has root ${short(toHex(root))} but this browser saw root ${short(seen.rootHex)}: the log forked`);
  }
  if (old.size === 0) return pass(name, `the empty tree seen before is a prefix of every tree (0 → ${size})`);
  try {
    const proof = await proveConsistency(old.size, size, client.reader(size));
    return verifyConsistency(old.size, size, proof, old.root, root)
      ? pass(name, `size ${old.size} → ${size}: both roots recomputed from a ${proof.length}-hash consistency proof read from the tiles`)
      : fail(name, `the tiles do not prove that the tree of size ${old.size} seen on ${seen.at} (root ${short(seen.rootHex)}) is a prefix of this one: the log is not append-only (fork), or a tile is altered`);
  } catch (e) {
    return fail(name, `cannot compute a consistency proof from the tiles: ${(e as Error).message}`);
  }
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export async function verifyCheckpoint(noteText: string, trust: Trust, client: LogClient, seen: SeenCheckpoint | null): Promise<CheckpointResult> {
  let note: ParsedNote | null = null;
  let body: ReturnType<typeof parseCheckpointBody> | null = null;
  let parseError: string | null = null;
  try {
    note = parseNote(noteText);
    body = parseCheckpointBody(note.body);
  } catch (e) {
    parseError = (e as Error).message;
  }
  const signature = signatureCheck(note, body, parseError, trust);
  const sigOk = signature.status === 'PASS';
  const { check: witnesses, rows: witnessRows } = witnessCheck(note, sigOk, trust);
  const size = body?.size ?? 0;
  const root = body?.root ?? null;
  const [tiles, consistency] =
    body && root
      ? await Promise.all([
          tilesCheck(client, size, root),
          sigOk ? consistencyCheck(client, size, root, seen) : Promise.resolve(skip(CHECK_NAMES.consistency, 'not checked: the checkpoint signature did not verify')),
        ])
      : [skip(CHECK_NAMES.tiles, 'no checkpoint body'), skip(CHECK_NAMES.consistency, 'no checkpoint body')];
  const checks = [signature, witnesses, tiles, consistency];
  const ok = !checks.some((c) => c.status === 'FAIL');
  return { note: noteText, origin: body?.origin ?? '', size, root, signature, witnesses, witnessRows, tiles, consistency, ok, remember: ok && sigOk };
}

// ---------------------------------------------------------------- entries

export type EntryFields = Record<string, unknown>;

export function parseRecord(record: Uint8Array): EntryFields {
  const v: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(record));
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new TypeError('record is not a JSON object');
  const e = v as EntryFields;
  if (e.v !== 1) throw new TypeError('record has no "v": 1');
  for (const k of ['type', 'result', 'digest', 'timestamp']) if (typeof e[k] !== 'string') throw new TypeError(`record has no string "${k}"`);
  return e;
}

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
    tile === 0 ? Promise.resolve(new Uint8Array(32)) : client.bundle('entries', tile - 1, TILE_WIDTH).then((e) => e[TILE_WIDTH - 1]!),
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
  readonly leaf: Check;
  /** Rule 4: the audit path read from the tiles rebuilds the signed root. */
  readonly inclusion: Check;
  readonly ok: boolean;
}

/** Verifies entry `seq` of a bundle already loaded against the checkpoint (size, root). */
export async function verifyLoadedEntry(client: LogClient, b: BundleData, seq: number, cp: { size: number; root: Uint8Array }): Promise<EntryResult> {
  const i = seq - b.first;
  const record = b.records[i] ?? null;
  const eh = b.entryHashes[i] ?? null;
  const base = { seq, size: cp.size, record, entryHash: eh, id: eh ? entryId(seq, eh) : null };
  if (!record || !eh) {
    const c = fail(CHECK_NAMES.leaf, `entry ${seq} is not in bundle ${b.tile}`);
    return { ...base, fields: null, proof: null, leaf: c, inclusion: skip(CHECK_NAMES.inclusion, 'no entry'), ok: false };
  }
  let fields: EntryFields | null = null;
  const problems: string[] = [];
  try {
    fields = parseRecord(record);
  } catch (e) {
    problems.push(`the record is not a valid entry: ${(e as Error).message}`);
  }
  const prior = i === 0 ? b.prior : b.entryHashes[i - 1]!;
  const recomputed = entryHash(seq, record, prior);
  if (!bytesEqual(recomputed, eh)) problems.push(`the record hashes (with the previous entry hash) to ${short(toHex(recomputed))}, not the entry hash ${short(toHex(eh))} the leaf commits to: the record was altered`);
  const leaf = leafHash(eh);
  try {
    const tile = await client.hashTile(0, Math.floor(seq / TILE_WIDTH), bundleWidth(Math.floor(seq / TILE_WIDTH), cp.size));
    if (!bytesEqual(tile.hashAt(0, seq % TILE_WIDTH), leaf)) problems.push(`the hash tile holds ${short(toHex(tile.hashAt(0, seq % TILE_WIDTH)))} for leaf ${seq}, not SHA-256(0x00 ‖ entry hash) = ${short(toHex(leaf))}`);
  } catch (e) {
    problems.push(`cannot read the level-0 hash tile: ${(e as Error).message}`);
  }
  const leafCheck = problems.length
    ? fail(CHECK_NAMES.leaf, problems.join('; '))
    : pass(CHECK_NAMES.leaf, `record → entry hash ${short(toHex(eh))} (chained to entry ${seq - 1 < 0 ? 'none' : seq - 1}) → leaf ${short(toHex(leaf))}, as in the hash tile`);

  let proof: FoldedProof | null = null;
  let inclusion: Check;
  const where = `leaf index ${seq}, tree size ${cp.size}`;
  try {
    const path = await proveInclusion(seq, cp.size, client.reader(cp.size));
    proof = foldInclusion(seq, cp.size, eh, path);
    inclusion =
      proof.root && bytesEqual(proof.root, cp.root)
        ? pass(CHECK_NAMES.inclusion, `${where}: the ${path.length}-hash audit path, read from the tiles, rebuilds the signed root ${short(toHex(cp.root))}`)
        : fail(CHECK_NAMES.inclusion, `${where}: the ${path.length}-hash audit path rebuilds ${proof.root ? short(toHex(proof.root)) : 'nothing'}, not the signed root ${short(toHex(cp.root))}`);
  } catch (e) {
    inclusion = fail(CHECK_NAMES.inclusion, `${where}: cannot compute the audit path from the tiles: ${(e as Error).message}`);
  }
  return { ...base, fields, proof, leaf: leafCheck, inclusion, ok: leafCheck.status === 'PASS' && inclusion.status === 'PASS' };
}

export async function verifyEntry(client: LogClient, seq: number, cp: { size: number; root: Uint8Array }): Promise<EntryResult> {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= cp.size) throw new RangeError(`entry ${seq} is not below the tree size ${cp.size}`);
  const b = await loadBundle(client, Math.floor(seq / TILE_WIDTH), cp.size);
  return verifyLoadedEntry(client, b, seq, cp);
}

/** Verifies every entry of a bundle (a page of the browse view). */
export async function verifyBundle(client: LogClient, tile: number, cp: { size: number; root: Uint8Array }): Promise<EntryResult[]> {
  const b = await loadBundle(client, tile, cp.size);
  return Promise.all(b.records.map((_, i) => verifyLoadedEntry(client, b, b.first + i, cp)));
}

// ---------------------------------------------------------------- report

export interface Report {
  readonly checks: Array<Check & { rule: number }>;
  readonly result: 'PASS' | 'FAIL';
}

/**
 * The six rules of `stele ledger verify` (spec §4.3): checkpoint signature, consistency,
 * leaf hash, inclusion, witnesses, and the overall client-side verdict. With `fileDigest`,
 * rule 3 also requires the entry to record that digest.
 */
export function buildReport(cp: CheckpointResult, e: EntryResult, fileDigest?: string): Report {
  let leaf = e.leaf;
  if (fileDigest !== undefined) {
    const d = typeof e.fields?.digest === 'string' ? e.fields.digest : '';
    leaf =
      d !== fileDigest
        ? fail(CHECK_NAMES.leaf, `the entry's digest ${short(d)} is not the file's ${short(fileDigest)}`)
        : e.leaf.status === 'PASS'
          ? pass(CHECK_NAMES.leaf, `entry ${e.id} records the file's digest ${short(fileDigest)}; ${e.leaf.detail}`)
          : e.leaf;
  }
  const rules: Array<Check & { rule: number }> = [
    { rule: 1, ...cp.signature },
    { rule: 2, ...cp.consistency },
    { rule: 3, ...leaf },
    { rule: 4, ...e.inclusion },
    { rule: 5, ...cp.witnesses },
  ];
  const failed = rules.filter((c) => c.status === 'FAIL');
  const skipped = rules.filter((c) => c.status === 'SKIP');
  const overall: Check & { rule: number } = failed.length
    ? { rule: 6, ...fail(CHECK_NAMES.overall, `${failed.map((c) => `rule ${c.rule}`).join(', ')} failed: do not trust this ${failed.some((c) => c.rule === 3 || c.rule === 4) ? 'entry' : 'log view'}`) }
    : {
        rule: 6,
        ...pass(
          CHECK_NAMES.overall,
          `every check was recomputed in your browser from the trusted key and the tiles${skipped.length ? ` (${skipped.map((c) => `rule ${c.rule}`).join(', ')} not applicable)` : ''}`,
        ),
      };
  return { checks: [...rules, overall], result: failed.length ? 'FAIL' : 'PASS' };
}
