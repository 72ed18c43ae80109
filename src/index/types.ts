// The lookup index: digest → earliest leaf, artifact id → latest leaf, anchor identity →
// earliest leaf, artifact label → its artifact ids (one per scope), entry counts by type.
// Derived data: written by the sequencer as it integrates (a BatchListener) and rebuildable
// from the record bundles alone. Embedded LMDB by default, DynamoDB on AWS.
//
// Its rows name candidates, not answers: the LMDB index keys them by a few bytes of a salted
// hash, so two values can share a key, and any index can be stale (restored from elsewhere).
// Every lookup therefore takes a `Confirm` that reads the candidate's record, and answers
// only a leaf that really carries what was looked up, trying the next candidate otherwise.
import type { Maybe } from '../read/maybe.js';
import type { BatchListener } from '../sequencer/contract.js';

/**
 * Whether leaf `seq` (a candidate the index names) really carries what was looked up: a
 * plain boolean when the record is in memory, which keeps a lookup synchronous.
 */
export type Confirm = (seq: number) => Maybe<boolean>;

/** One artifact id carrying a searched label, and its latest leaf. */
export interface ArtifactMatch {
  readonly artifactId: string;
  readonly seq: number;
}

export interface ArtifactPage {
  /** Ordered by artifact id. */
  readonly matches: readonly ArtifactMatch[];
  /** Whether more artifact ids follow the last one. */
  readonly more: boolean;
}

/**
 * What the index's rows are: 3 finds an anchor identity through its digest's rows (no row
 * of its own). An index of an older schema is rebuilt from the record bundles at start
 * (src/index/catchup.ts, reconcileIndex), never read.
 */
export const INDEX_SCHEMA = 3;

// The finds answer synchronously when they can (the embedded index, every confirm synchronous):
// the API's entry?hash then answers in the same turn as entry?id does.
export interface LookupIndex extends BatchListener {
  /** Leaf index of the earliest confirmed entry with this digest (64 lowercase hex). */
  findByDigest(digest: string, confirm: Confirm): Maybe<number | undefined>;
  /** Leaf index of the most recent confirmed entry with this artifact id (art_…). */
  findByArtifact(artifactId: string, confirm: Confirm): Maybe<number | undefined>;
  /** Leaf index of the earliest confirmed anchor with this identity (src/core/duplicates.ts), whose digest is `digest`. */
  findAnchor(identity: string, digest: string, confirm: Confirm): Maybe<number | undefined>;
  /**
   * The artifact ids recorded with this artifact label (any scope), after `after`, at most
   * `limit`, each with its latest leaf that `confirm(artifactId, seq)` accepts.
   */
  searchArtifact(
    label: string,
    limit: number,
    after: string | undefined,
    confirm: (artifactId: string, seq: number) => Promise<boolean>,
  ): Promise<ArtifactPage>;
  /** Leaves 0..size-1 are indexed. */
  indexedSize(): Promise<number>;
  /** Whether the rows were written by an older schema than INDEX_SCHEMA (then: clear and rebuild). */
  outdated(): Promise<boolean>;
  /** Entries by type over the indexed leaves. */
  countsByType(): Promise<Record<string, number>>;
  /** Removes every row and count (the index then holds 0 leaves), to be rebuilt from the bundles. */
  clear(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The first candidate (in the index's order) that `confirm` accepts: synchronously while
 * every confirm answers synchronously. The candidates' iterator is always closed (an LMDB
 * one holds a cursor), at once or when the asynchronous rest ends.
 */
export function firstConfirmed(candidates: Iterable<number>, confirm: Confirm): Maybe<number | undefined> {
  const it = candidates[Symbol.iterator]();
  let handedOn = false;
  try {
    for (let next = it.next(); !next.done; next = it.next()) {
      const ok = confirm(next.value);
      if (ok instanceof Promise) {
        handedOn = true;
        return confirmedLater(ok, next.value, it, confirm);
      }
      if (ok) return next.value;
    }
    return undefined;
  } finally {
    if (!handedOn) it.return?.();
  }
}

/** The rest of firstConfirmed once a confirm answered with a promise (for `seq`). */
async function confirmedLater(
  pending: Promise<boolean>,
  seq: number,
  it: Iterator<number>,
  confirm: Confirm,
): Promise<number | undefined> {
  try {
    if (await pending) return seq;
    for (let next = it.next(); !next.done; next = it.next()) if (await confirm(next.value)) return next.value;
    return undefined;
  } finally {
    it.return?.();
  }
}

/** A batch that does not start where the index ends: indexing it would leave a gap. */
export class IndexGapError extends Error {
  override name = 'IndexGapError';
}
