// Sequencing a run of requests: each gets the next seq, its canonical entry (one timestamp
// for the run, never below the last), its entry_hash chained to the one before, and its leaf
// hash. Pure and synchronous, so it runs the same on the sequencer's thread or in its worker
// (src/sequencer/sequencing-worker.ts). Requests come in as packed records
// (src/sequencer/records.ts) and the results go back in a few flat buffers that move between
// threads without copying — never an object per request on either side.
import { buildEntry } from '../core/anchor.js';
import { MAX_CANONICAL_ENTRY_BYTES, canonicalEntryBytes, chainEntryHashes } from '../core/entry.js';
import { packCanonicals } from '../core/bundle.js';
import { Repeats, decodeRecord } from './records.js';

/** Where the chain stands: the next seq, the last entry_hash, the last timestamp (ms). */
export interface ChainState {
  readonly next: number;
  readonly prior: Uint8Array;
  readonly lastMs: number;
}

/** Packed requests: records back to back, ends[i] where the i-th ends. */
export interface RecordRun {
  readonly bytes: Uint8Array;
  readonly ends: Uint32Array;
}

export interface SequencedRun {
  readonly timestamp: string;
  /** The requests refused (they cannot be entries), by index in the run, with the reason. */
  readonly refused: readonly { readonly at: number; readonly why: string }[];
  /** The accepted requests' artifact ids ("" without an artifact), joined by newlines. */
  readonly artifactIds: string;
  /** Their canonical entries, back to back; ends[i] is where the i-th ends. */
  readonly canonicals: Uint8Array;
  readonly ends: Uint32Array;
  /** Their entry and leaf hashes, 32 bytes each. */
  readonly entryHashes: Uint8Array;
  readonly leafHashes: Uint8Array;
  readonly state: ChainState;
}

/** The buffers a run's message can transfer rather than copy. */
export const runBuffers = (run: SequencedRun): ArrayBuffer[] =>
  [run.canonicals.buffer, run.ends.buffer, run.entryHashes.buffer, run.leafHashes.buffer] as ArrayBuffer[];

export function sequenceRun(records: RecordRun, from: ChainState, nowMs: number): SequencedRun {
  const lastMs = Math.max(nowMs, from.lastMs);
  const timestamp = new Date(lastMs).toISOString();
  const refused: { at: number; why: string }[] = [];
  const artifactIds: string[] = [];
  const bytes: Uint8Array[] = [];
  const repeats = new Repeats();
  for (let i = 0; i < records.ends.length; i++) {
    // One request that cannot be an entry is refused alone; it never stops the run.
    let canonical: Uint8Array;
    let artifactId: string | undefined;
    try {
      const entry = buildEntry(
        decodeRecord(records.bytes, i === 0 ? 0 : records.ends[i - 1]!, records.ends[i]!, repeats),
        timestamp,
      );
      artifactId = entry.artifactId;
      canonical = canonicalEntryBytes(entry);
    } catch (e) {
      refused.push({ at: i, why: `the request cannot be made an entry: ${(e as Error).message}` });
      continue;
    }
    if (canonical.length > MAX_CANONICAL_ENTRY_BYTES) {
      refused.push({ at: i, why: 'canonical entry exceeds 65,535 bytes' });
      continue;
    }
    artifactIds.push(artifactId ?? '');
    bytes.push(canonical);
  }
  const { bytes: canonicals, ends } = packCanonicals(bytes);
  const { entryHashes, leafHashes, last } = chainEntryHashes(bytes, from.next, from.prior);
  const state = { next: from.next + bytes.length, prior: new Uint8Array(last), lastMs };
  return { timestamp, refused, artifactIds: artifactIds.join('\n'), canonicals, ends, entryHashes, leafHashes, state };
}
