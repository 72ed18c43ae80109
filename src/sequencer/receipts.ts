// What a published batch hands out: the listeners' view of it and one receipt per anchor.
// A receipt is two fields (its batch and seq); the entry, its hash and its proof are read
// from the batch's packed buffers when asked for, so a batch of 65,536 receipts is not
// 65,536 closures and hash views. An entry object is built once, when the index or the
// answer first asks, and lives as long as the batch's receipts.
import type { CanonicalEntry } from '../core/entry.js';
import { HASH_SIZE } from '../core/hash.js';
import { proveInclusionSync } from '../core/merkle.js';
import type { TileSet } from '../read/tile-set.js';
import type { Segment } from './pool.js';
import type { AnchorReceipt, IntegratedBatch, PublishedCheckpoint } from './contract.js';

/** A batch in the lock and in the tiles, not yet in a published checkpoint. */
export interface Unpublished {
  readonly fromSize: number;
  /** The requests waiting for it (none for a batch re-applied from staging). */
  readonly batch: readonly Segment<AnchorReceipt>[];
  /** Its entry hashes, 32 bytes each (so its size is their length / 32). */
  readonly entryHashes: Uint8Array;
  /** Its entries, when already parsed (a re-applied batch has no segments to build them from). */
  readonly entries?: readonly CanonicalEntry[];
  readonly started?: number;
}

export class PublishedBatch implements IntegratedBatch {
  /** Entries built from the batch's records so far, by position. */
  private built: (CanonicalEntry | undefined)[] | undefined;

  constructor(
    private readonly u: Unpublished,
    readonly checkpoint: PublishedCheckpoint,
    /** Tiles of every batch this checkpoint published: enough for their inclusion proofs. */
    private readonly tiles: TileSet,
    readonly integrationMs: number | undefined,
  ) {}

  get fromSize(): number {
    return this.u.fromSize;
  }

  get count(): number {
    return this.u.entryHashes.length / HASH_SIZE;
  }

  entryAt(seq: number): CanonicalEntry {
    if (this.u.entries) return this.u.entries[seq - this.u.fromSize]!;
    const k = seq - this.u.fromSize;
    // Built once: the index and the anchor's answer both ask for it.
    const built = (this.built ??= new Array(this.count))[k];
    if (built) return built;
    let i = k;
    for (const s of this.u.batch) {
      if (i < s.count) return (this.built[k] = s.entry(s.lo + i));
      i -= s.count;
    }
    throw new RangeError(`entry ${seq} is not in this batch`);
  }

  entryHash(seq: number): Uint8Array {
    const k = seq - this.u.fromSize;
    return this.u.entryHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE);
  }

  inclusionProof(seq: number): Uint8Array[] {
    const size = this.checkpoint.size;
    return proveInclusionSync(seq, size, this.tiles.lookup(size));
  }

  /** Resolves every waiting request with its receipt (clearing its slot), once every listener has seen the batch. */
  acknowledge(): void {
    let seq = this.u.fromSize;
    for (const s of this.u.batch) for (let i = s.lo; i < s.hi; i++) s.settle(i, new Receipt(this, seq++));
  }
}

class Receipt implements AnchorReceipt {
  constructor(
    private readonly batch: PublishedBatch,
    readonly seq: number,
  ) {}

  get entry(): CanonicalEntry {
    return this.batch.entryAt(this.seq);
  }

  get entryHash(): Uint8Array {
    return this.batch.entryHash(this.seq);
  }

  get checkpoint(): PublishedCheckpoint {
    return this.batch.checkpoint;
  }

  inclusionProof(): Uint8Array[] {
    return this.batch.inclusionProof(this.seq);
  }
}
