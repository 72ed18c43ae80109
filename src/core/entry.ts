// Ledger entries: the canonical entry object, its RFC 8785 form, the entry_hash chain,
// entry ids and artifact ids (docs/design.md §1.1, §1.4, §1.5).
import canonicalizeCjs from 'canonicalize';
import { HASH_SIZE, leafHash, sha256, sha256HexOfText, toHex } from './hash.js';

/** The canonical entry: everything entry_hash commits to (no seq, id or proof). */
export interface CanonicalEntry {
  v: 1;
  type: string;
  result: string;
  digest: string;
  timestamp: string;
  artifact?: string;
  artifactId?: string;
  scope?: string;
  tenant?: string;
  [field: string]: unknown;
}

/** The entry as the API shows it: canonical fields plus id and proof.entryHash. */
export interface Entry extends CanonicalEntry {
  id: string;
  proof: { entryHash: string };
}

/** 14 ASCII bytes `stele/entry/v1` and a newline. */
export const ENTRY_DOMAIN = new TextEncoder().encode('stele/entry/v1\n');
export const ZERO_HASH = new Uint8Array(HASH_SIZE);
/** Bundle framing holds at most 65,535 bytes per canonical entry. */
export const MAX_CANONICAL_ENTRY_BYTES = 0xffff;

// The package is CommonJS (module.exports = fn); its typings describe an ES default export.
const canonicalize = canonicalizeCjs as unknown as (value: unknown) => string | undefined;

/** RFC 8785 canonical JSON of the entry, without `id` and `proof`, as UTF-8. */
export function canonicalEntryBytes(entry: CanonicalEntry | Entry): Uint8Array {
  let fields: CanonicalEntry = entry;
  if ('id' in entry || 'proof' in entry) {
    const { id: _id, proof: _proof, ...rest } = entry as Entry;
    fields = rest;
  }
  const json = canonicalize(fields);
  if (json === undefined) throw new TypeError('entry cannot be canonicalised');
  return utf8Pooled(json);
}

// Small entries are cut from a shared slab rather than each getting its own ArrayBuffer (the
// sequencer makes tens of thousands a second); the slab is dropped once it is full and lives
// as long as any entry cut from it.
const SLAB_BYTES = 64 * 1024;
const encoder = new TextEncoder();
let slab = new Uint8Array(0);
let slabUsed = 0;

/** UTF-8 of `text`, a view into the shared slab when it is small. */
function utf8Pooled(text: string): Uint8Array {
  const most = text.length * 3; // UTF-16 code unit -> at most 3 UTF-8 bytes
  if (most > SLAB_BYTES / 8) return encoder.encode(text);
  if (slab.length - slabUsed < most) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const { written } = encoder.encodeInto(text, slab.subarray(slabUsed));
  const out = slab.subarray(slabUsed, slabUsed + written);
  slabUsed += (written + 7) & ~7;
  return out;
}

const SEQ_AT = ENTRY_DOMAIN.length;
const CANONICAL_AT = SEQ_AT + 8;

/** entry_hash = SHA-256(domain ‖ seq as u64 BE (exact up to 2^53) ‖ canonical_entry ‖ prior_entry_hash). */
export function entryHash(seq: number, canonical: Uint8Array, prior: Uint8Array): Uint8Array {
  if (prior.length !== HASH_SIZE) throw new RangeError('prior entry hash must be 32 bytes');
  // The input is assembled in one scratch buffer (hashing is synchronous): no allocation per entry.
  const length = CANONICAL_AT + canonical.length + HASH_SIZE;
  if (entryInput.length < length) {
    entryInput = new Uint8Array(Math.max(length, 2 * entryInput.length));
    entryInput.set(ENTRY_DOMAIN, 0);
    entrySeq = new DataView(entryInput.buffer);
  }
  entrySeq.setUint32(SEQ_AT, Math.floor(seq / 2 ** 32));
  entrySeq.setUint32(SEQ_AT + 4, seq >>> 0);
  entryInput.set(canonical, CANONICAL_AT);
  entryInput.set(prior, CANONICAL_AT + canonical.length);
  return sha256(entryInput.subarray(0, length));
}
let entryInput = new Uint8Array(0);
let entrySeq = new DataView(entryInput.buffer);

/**
 * The chain over canonical entries at seq, seq+1, … from `prior`: their entry hashes and
 * leaf hashes, each flat (32 bytes per entry), and the last entry hash.
 */
export function chainEntryHashes(
  canonicals: readonly Uint8Array[],
  seq: number,
  prior: Uint8Array,
): { entryHashes: Uint8Array; leafHashes: Uint8Array; last: Uint8Array } {
  const entryHashes = new Uint8Array(canonicals.length * HASH_SIZE);
  const leafHashes = new Uint8Array(canonicals.length * HASH_SIZE);
  let last = prior;
  canonicals.forEach((c, i) => {
    last = entryHash(seq + i, c, last);
    entryHashes.set(last, i * HASH_SIZE);
    leafHashes.set(leafHash(last), i * HASH_SIZE);
  });
  return { entryHashes, leafHashes, last };
}

/** led_<seq>_<first 12 hex of entry_hash>. */
export function entryId(seq: number, hash: Uint8Array): string {
  return entryIdOfHex(seq, toHex(hash));
}

/** entryId from the entry hash in hex. */
export function entryIdOfHex(seq: number, hashHex: string): string {
  return `led_${seq}_${hashHex.slice(0, 12)}`;
}

const ENTRY_ID = /^led_(0|[1-9][0-9]{0,15})_([0-9a-f]{12})$/;

/** Splits an entry id into its leaf index and hash prefix; null if malformed. */
export function parseEntryId(id: string): { seq: number; hashPrefix: string } | null {
  const m = ENTRY_ID.exec(id);
  if (!m) return null;
  const seq = Number(m[1]);
  return Number.isSafeInteger(seq) ? { seq, hashPrefix: m[2]! } : null;
}

/** art_ + first 24 hex of SHA-256(scope ‖ 0x0A ‖ artifact label); scope is "" when absent. */
export function artifactId(artifact: string, scope = ''): string {
  return `art_${sha256HexOfText(`${scope}\n${artifact}`).slice(0, 24)}`;
}

export const ARTIFACT_ID = /^art_[0-9a-f]{24}$/;

/** Strict UTF-8 (a record that is not is refused): one decoder, reused, since a read path parses a record per answer. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a record (canonical entry JSON) back into an entry object. */
export function parseCanonicalEntry(bytes: Uint8Array): CanonicalEntry {
  const value: unknown = JSON.parse(strictUtf8.decode(bytes));
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new TypeError('record is not a JSON object');
  const e = value as Record<string, unknown>;
  for (const k of ['type', 'result', 'digest', 'timestamp'] as const) {
    if (typeof e[k] !== 'string') throw new TypeError(`record has no string "${k}"`);
  }
  if (e.v !== 1) throw new TypeError('record has no "v": 1');
  return e as CanonicalEntry;
}

/** The API view of an entry at `seq`. */
export function presentEntry(entry: CanonicalEntry, seq: number, hash: Uint8Array): Entry {
  return { id: entryId(seq, hash), ...entry, proof: { entryHash: toHex(hash) } };
}
