// Sequencing a run of requests: each gets the next seq, its canonical entry (one timestamp
// for the run, never below the last), its entry_hash chained to the one before, and its leaf
// hash. Pure and synchronous, so it runs the same on the sequencer's thread or in its worker
// (src/sequencer/sequencing-worker.ts). The results are packed in a few flat buffers that
// move between threads without copying.
import { type AnchorRequest, buildEntry } from '../anchor.js';
import { type CanonicalEntry, MAX_CANONICAL_ENTRY_BYTES, canonicalEntryBytes, entryHash } from '../entry.js';
import { HASH_SIZE, leafHash } from '../hash.js';

/** Where the chain stands: the next seq, the last entry_hash, the last timestamp (ms). */
export interface ChainState {
  readonly next: number;
  readonly prior: Uint8Array;
  readonly lastMs: number;
}

export interface SequencedRun {
  readonly timestamp: string;
  /** Per request, in order: why it was refused (it cannot be an entry), or null. */
  readonly refused: (string | null)[];
  /** The accepted requests' artifact ids (undefined without an artifact). */
  readonly artifactIds: (string | undefined)[];
  /** Their canonical entries, back to back; ends[i] is where the i-th ends. */
  readonly canonicals: Uint8Array;
  readonly ends: Uint32Array;
  /** Their entry and leaf hashes, 32 bytes each. */
  readonly entryHashes: Uint8Array;
  readonly leafHashes: Uint8Array;
  readonly state: ChainState;
}

export function sequenceRun(requests: readonly AnchorRequest[], from: ChainState, nowMs: number): SequencedRun {
  const lastMs = Math.max(nowMs, from.lastMs);
  const timestamp = new Date(lastMs).toISOString();
  const refused: (string | null)[] = [];
  const artifactIds: (string | undefined)[] = [];
  const bytes: Uint8Array[] = [];
  let total = 0;
  for (const r of requests) {
    // One request that cannot be an entry is refused alone; it never stops the run.
    let entry: CanonicalEntry;
    let canonical: Uint8Array;
    try {
      entry = buildEntry(r, timestamp);
      canonical = canonicalEntryBytes(entry);
    } catch (e) {
      refused.push(`the request cannot be made an entry: ${(e as Error).message}`);
      continue;
    }
    const tooBig = canonical.length > MAX_CANONICAL_ENTRY_BYTES;
    refused.push(tooBig ? 'canonical entry exceeds 65,535 bytes' : null);
    if (tooBig) continue;
    artifactIds.push(entry.artifactId);
    bytes.push(canonical);
    total += canonical.length;
  }
  const n = bytes.length;
  const canonicals = new Uint8Array(total);
  const ends = new Uint32Array(n);
  const entryHashes = new Uint8Array(n * HASH_SIZE);
  const leafHashes = new Uint8Array(n * HASH_SIZE);
  let prior = from.prior;
  let at = 0;
  for (let i = 0; i < n; i++) {
    const c = bytes[i]!;
    canonicals.set(c, at);
    at += c.length;
    ends[i] = at;
    prior = entryHash(from.next + i, c, prior);
    entryHashes.set(prior, i * HASH_SIZE);
    leafHashes.set(leafHash(prior), i * HASH_SIZE);
  }
  return { timestamp, refused, artifactIds, canonicals, ends, entryHashes, leafHashes, state: { next: from.next + n, prior: new Uint8Array(prior), lastMs } };
}
