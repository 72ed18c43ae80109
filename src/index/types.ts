// The lookup index: digest → earliest leaf, artifact id → latest leaf, entry counts by
// type. Derived data: written by the sequencer as it integrates (a BatchListener) and
// rebuildable from the record bundles alone. Embedded LMDB by default, DynamoDB on AWS.
import type { BatchListener } from '../sequencer/contract.js';

export interface LookupIndex extends BatchListener {
  /** Leaf index of the earliest entry with this digest (64 lowercase hex). */
  findByDigest(digest: string): Promise<number | undefined>;
  /** Leaf index of the most recent entry with this artifact id (art_…). */
  findByArtifact(artifactId: string): Promise<number | undefined>;
  /** Leaves 0..size-1 are indexed. */
  indexedSize(): Promise<number>;
  /** Entries by type over the indexed leaves. */
  countsByType(): Promise<Record<string, number>>;
  /** Removes every row and count (the index then holds 0 leaves), to be rebuilt from the bundles. */
  clear(): Promise<void>;
  close(): Promise<void>;
}
