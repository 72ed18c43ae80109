// The lookup index: digest → earliest leaf, artifact id → latest leaf, anchor identity →
// earliest leaf, artifact label → its artifact ids (one per scope), entry counts by type.
// Derived data: written by the sequencer as it integrates (a BatchListener) and rebuildable
// from the record bundles alone. Embedded LMDB by default, DynamoDB on AWS.
import type { BatchListener } from '../sequencer/contract.js';

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
 * What the index's rows are: a version-1 index (no anchor identities, no labels) is rebuilt
 * from the record bundles at start (src/index/catchup.ts, reconcileIndex).
 */
export const INDEX_SCHEMA = 2;

export interface LookupIndex extends BatchListener {
  /** Leaf index of the earliest entry with this digest (64 lowercase hex). */
  findByDigest(digest: string): Promise<number | undefined>;
  /** Leaf index of the most recent entry with this artifact id (art_…). */
  findByArtifact(artifactId: string): Promise<number | undefined>;
  /** Leaf index of the earliest anchor with this identity (src/core/duplicates.ts). */
  findAnchor(identity: string): Promise<number | undefined>;
  /** The artifact ids recorded with this artifact label (any scope), after `after`, at most `limit`. */
  searchArtifact(label: string, limit: number, after?: string): Promise<ArtifactPage>;
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
