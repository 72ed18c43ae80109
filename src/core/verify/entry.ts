// Rule 3: the entry shown is the leaf. Its canonical bytes (RFC 8785), with the previous
// entry's hash, hash to the entry hash (docs/design.md §1.1); the leaf is SHA-256(0x00 ‖ entry
// hash); whatever else a source claims about it (an entry hash, a leaf hash, an id) must
// agree; and, for a file, the entry records the file's digest. The previous hash needs no
// authentication of its own: the entry hash is fixed by the leaf that rule 4 binds to the
// signed root, so no other (entry, prior) pair can produce it. One home for the API answer,
// a copy's record bundles, the explorer and a tlog-proof's extra data.
import { type CanonicalEntry, canonicalEntryBytes, entryHash, entryId, parseCanonicalEntry } from '../entry.js';
import { bytesEqual, leafHash, toHex } from '../hash.js';
import { type Outcome, short } from './rules.js';

export interface EntryEvidence {
  /** The leaf index. */
  readonly seq: number;
  /** The entry as stored (canonical bytes: a record bundle, a tlog-proof) or as an API presents it (fields). */
  readonly entry: Uint8Array | Readonly<Record<string, unknown>>;
  /** The entry hash of leaf seq − 1 (zeros for leaf 0). */
  readonly prior: Uint8Array;
  /** What the source says besides: each must match what is recomputed. */
  readonly claimed?: {
    readonly entryHash?: Uint8Array;
    readonly leafHash?: Uint8Array;
    readonly id?: string;
  };
  /** The file's SHA-256, lowercase hex: the entry must record it. */
  readonly fileDigest?: string;
}

export interface CheckedEntry extends Outcome {
  /** The entry's fields, when they could be read. */
  readonly entry?: CanonicalEntry;
  /** The recomputed entry hash and leaf hash (rule 4 proves this leaf), also when a claim disagreed. */
  readonly entryHash?: Uint8Array;
  readonly leaf?: Uint8Array;
}

const chained = (seq: number) => (seq === 0 ? 'no prior entry' : `entry ${seq - 1}'s hash`);

/** Rule 3 for one entry: the recomputed leaf, and every claim about it checked. */
export function checkEntry(e: EntryEvidence): CheckedEntry {
  let entry: CanonicalEntry;
  let canonical: Uint8Array;
  try {
    if (e.entry instanceof Uint8Array) {
      entry = parseCanonicalEntry(e.entry);
      canonical = e.entry;
      // Re-serialising must give the same bytes: otherwise the entry shown is not the one hashed.
      if (!bytesEqual(canonicalEntryBytes(entry), canonical))
        return { ok: false, entry, detail: `entry ${e.seq} is not RFC 8785 canonical JSON` };
    } else {
      // An API's fields (its `id` and `proof` aside), read back to check they form an entry.
      canonical = canonicalEntryBytes(e.entry as CanonicalEntry);
      entry = parseCanonicalEntry(canonical);
    }
  } catch (err) {
    return { ok: false, detail: `entry ${e.seq} is not an entry: ${(err as Error).message}` };
  }
  const eh = entryHash(e.seq, canonical, e.prior);
  const leaf = leafHash(eh);
  const problems: string[] = [];
  const c = e.claimed ?? {};
  if (c.entryHash && !bytesEqual(c.entryHash, eh))
    problems.push(
      `the entry's fields hash (with ${chained(e.seq)}) to ${short(toHex(eh))}, not the entry hash ${short(toHex(c.entryHash))}: the entry shown is not the one in the log`,
    );
  if (c.leafHash && !bytesEqual(c.leafHash, leaf))
    problems.push(`leaf hash ${short(toHex(c.leafHash))} is not SHA-256(0x00 ‖ entry hash) = ${short(toHex(leaf))}`);
  if (c.id !== undefined && c.id !== entryId(e.seq, eh))
    problems.push(`entry id ${c.id} does not match leaf index ${e.seq} and its entry hash`);
  if (e.fileDigest !== undefined && entry.digest !== e.fileDigest)
    problems.push(`entry ${e.seq} records digest ${short(entry.digest)}, not the file's ${short(e.fileDigest)}`);
  if (problems.length > 0) return { ok: false, entry, entryHash: eh, leaf, detail: problems.join('; ') };
  return {
    ok: true,
    entry,
    entryHash: eh,
    leaf,
    detail: `entry ${entryId(e.seq, eh)}${e.fileDigest !== undefined ? ` records the file's digest ${short(e.fileDigest)};` : ':'} its fields hash (RFC 8785, with ${chained(e.seq)}) to the entry hash ${short(toHex(eh))}, and leaf ${e.seq} = SHA-256(0x00 ‖ entry hash)`,
  };
}
