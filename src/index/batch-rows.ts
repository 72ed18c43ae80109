// What a batch of entries adds to the LMDB index: the exact values that lookups see before
// the rows are committed, and the rows themselves. One home for the rule, used by the index
// as batches arrive and by the rebuild's worker threads (src/index/rebuild-worker.ts).
import { anchorIdentity } from '../core/duplicates.js';
import type { CanonicalEntry } from '../core/entry.js';
import { SHORT_KEY_BYTES, anchorTag, shortKey } from './keys.js';
import { artifactRow, digestRow, labelRow } from './lmdb-rows.js';

/** An artifact id in the usual form, and its 24 hex digits: only such an id has a label row. */
export const ARTIFACT_HEX = /^art_([0-9a-f]{24})$/;

export interface BatchRows {
  /** The index size once this batch is in. */
  readonly end: number;
  /** Digest → its earliest leaf in the batch. */
  readonly digests: Map<string, number>;
  /** Artifact id → its latest leaf in the batch. */
  readonly artifacts: Map<string, number>;
  /** Anchor identity → its earliest leaf in the batch. */
  readonly anchors: Map<string, number>;
  /** Artifact id → its label. */
  readonly labels: Map<string, string>;
  readonly counts: Map<string, number>;
  readonly rows: { readonly digest: Buffer[]; readonly artifact: Buffer[]; readonly label: Buffer[] };
}

/** The short key of `value` under the index's salt. */
export function shortOf(salt: Uint8Array, value: string): Buffer {
  const out = Buffer.allocUnsafe(SHORT_KEY_BYTES);
  shortKey(salt, value, out);
  return out;
}

/** The rows of leaves [from, end), `entryAt(seq)` giving each entry. */
export function batchRows(
  salt: Uint8Array,
  from: number,
  end: number,
  entryAt: (seq: number) => CanonicalEntry,
): BatchRows {
  const p: BatchRows = {
    end,
    digests: new Map(),
    artifacts: new Map(),
    anchors: new Map(),
    labels: new Map(),
    counts: new Map(),
    rows: { digest: [], artifact: [], label: [] },
  };
  // Rows a batch repeats add nothing: the earliest row of a digest (per anchor tag) and the
  // latest of an artifact answer every lookup.
  const digestTags = new Set<string>();
  for (let seq = from; seq < end; seq++) {
    const e = entryAt(seq);
    const digest = e.digest.toLowerCase();
    const identity = anchorIdentity(e);
    const tag = identity === undefined ? 0 : anchorTag(identity);
    if (!p.digests.has(digest)) p.digests.set(digest, seq);
    if (identity !== undefined && !p.anchors.has(identity)) p.anchors.set(identity, seq);
    if (!digestTags.has(`${tag}:${digest}`)) {
      digestTags.add(`${tag}:${digest}`);
      p.rows.digest.push(digestRow(shortOf(salt, digest), seq, tag));
    }
    if (e.artifactId) {
      p.artifacts.set(e.artifactId, seq);
      if (e.artifact !== undefined) p.labels.set(e.artifactId, e.artifact);
    }
    p.counts.set(e.type, (p.counts.get(e.type) ?? 0) + 1);
  }
  for (const [artifactId, seq] of p.artifacts) p.rows.artifact.push(artifactRow(shortOf(salt, artifactId), seq));
  for (const [artifactId, label] of p.labels) {
    // An id not in the usual form cannot be a search's cursor or answer: no label row.
    const hex = ARTIFACT_HEX.exec(artifactId)?.[1];
    if (hex !== undefined) p.rows.label.push(labelRow(shortOf(salt, label), hex));
  }
  return p;
}
