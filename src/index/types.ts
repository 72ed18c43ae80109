// The lookup index: digest → earliest leaf, artifact id → latest leaf, anchor identity →
// earliest leaf, artifact label → its artifact ids (one per scope), entry counts by type.
// Derived data: written by the sequencer as it integrates (a BatchListener) and rebuildable
// from the record bundles alone. Embedded LMDB by default, DynamoDB on AWS.
//
// Its rows name candidates, not answers: the LMDB index keys them by a few bytes of a salted
// hash, so two values can share a key, and any index can be stale (restored from elsewhere).
// Every lookup therefore takes a `Confirm` that reads the candidate's record, and answers
// only a leaf that really carries what was looked up, trying the next candidate otherwise.
import type { BatchListener } from '../sequencer/contract.js';

/** Whether leaf `seq` (a candidate the index names) really carries what was looked up. */
export type Confirm = (seq: number) => Promise<boolean>;

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

export interface LookupIndex extends BatchListener {
  /** Leaf index of the earliest confirmed entry with this digest (64 lowercase hex). */
  findByDigest(digest: string, confirm: Confirm): Promise<number | undefined>;
  /** Leaf index of the most recent confirmed entry with this artifact id (art_…). */
  findByArtifact(artifactId: string, confirm: Confirm): Promise<number | undefined>;
  /** Leaf index of the earliest confirmed anchor with this identity (src/core/duplicates.ts), whose digest is `digest`. */
  findAnchor(identity: string, digest: string, confirm: Confirm): Promise<number | undefined>;
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

/** The first candidate (in the index's order) that `confirm` accepts. */
export async function firstConfirmed(candidates: Iterable<number>, confirm: Confirm): Promise<number | undefined> {
  for (const seq of candidates) if (await confirm(seq)) return seq;
  return undefined;
}

/** A batch that does not start where the index ends: indexing it would leave a gap. */
export class IndexGapError extends Error {
  override name = 'IndexGapError';
}
