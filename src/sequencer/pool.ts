// The pool of accepted anchors, sequenced as they arrive: each request gets its place in the
// log (seq), its canonical entry, entry_hash (chained to the one before) and leaf hash on the
// first turn of the event loop after it is submitted. A batch then only builds tiles, signs
// and writes, so the hashing of the next batch overlaps the writes of the current one instead
// of adding to every anchor's wait.
//
// Places are provisional until a batch commits: after a failed batch the sequencer reloads
// its edge from storage, and every waiting request (the failed batch back at the front) is
// sequenced again from there, so a place is never taken from a stale edge.
import { type AnchorRequest, buildEntry } from '../anchor.js';
import { type CanonicalEntry, MAX_CANONICAL_ENTRY_BYTES, canonicalEntryBytes, entryHash } from '../entry.js';
import { leafHash } from '../hash.js';

/** An accepted request's place in the log. */
export interface Sequenced {
  readonly seq: number;
  readonly entry: CanonicalEntry;
  readonly canonical: Uint8Array;
  readonly entryHash: Uint8Array;
  readonly leafHash: Uint8Array;
}

export interface PoolItem<R> {
  readonly request: AnchorRequest;
  /** When it was accepted (ms, the sequencer's clock). */
  readonly enqueued: number;
  /** Told the entry's final place once its batch is committed (before it is published). */
  readonly onCommitted: ((seq: number, entryHash: Uint8Array) => void) | undefined;
  sequenced: Sequenced | undefined;
  resolve(r: R): void;
  reject(e: Error): void;
}

/** The end of the sequenced log: the next seq, its prior entry_hash, the timestamp floor. */
export interface Tip {
  readonly size: number;
  readonly lastEntryHash: Uint8Array;
  /** Entry timestamps never go below this (ms): the last checkpoint's time after a restart. */
  readonly floorMs: number;
}

/** Entries sequenced per event-loop turn, so sequencing a burst never stalls I/O for long. */
const CHUNK = 2048;

export class SequencingPool<R> {
  private items: PoolItem<R>[] = [];
  /** items[0 .. sequenced) have their place. */
  private sequenced = 0;
  private next = 0;
  private prior: Uint8Array = new Uint8Array(32);
  private lastMs = 0;
  private scheduled = false;

  /**
   * `lookahead`: requests sequenced ahead of a batch (the next batch's worth): their entries
   * are built early, so a deeper pool would only keep more of them alive for longer.
   */
  constructor(
    private readonly now: () => number,
    private readonly lookahead: number,
  ) {}

  get length(): number {
    return this.items.length;
  }

  /** When the oldest waiting request was accepted. */
  get oldestEnqueued(): number | undefined {
    return this.items[0]?.enqueued;
  }

  add(item: PoolItem<R>): void {
    this.items.push(item);
    this.schedule();
  }

  /** Removes and returns up to `n` requests from the front, every one sequenced. */
  take(n: number): PoolItem<R>[] {
    const batch = this.items.splice(0, n);
    const rejected = this.sequenceItems(batch, 0, batch.length);
    this.sequenced = Math.max(0, this.sequenced - batch.length);
    this.schedule();
    return rejected > 0 ? batch.filter((p) => p.sequenced !== undefined) : batch;
  }

  /** Puts a batch that did not commit back at the front; every request is sequenced again from `tip`. */
  putBack(batch: PoolItem<R>[], tip: Tip): void {
    this.items.unshift(...batch);
    this.reset(tip);
  }

  /** Forgets every place (the log's edge was reloaded) and sequences again from `tip`. */
  reset(tip: Tip): void {
    for (const p of this.items) p.sequenced = undefined;
    this.sequenced = 0;
    this.next = tip.size;
    this.prior = tip.lastEntryHash;
    this.lastMs = Math.max(this.lastMs, tip.floorMs);
    this.schedule();
  }

  /** Removes every request (to reject them). */
  drain(): PoolItem<R>[] {
    this.sequenced = 0;
    return this.items.splice(0);
  }

  /** Sequences the next chunk on a later turn, until every request has its place. */
  private schedule(): void {
    if (this.scheduled || this.sequenced >= this.items.length || this.items.length >= this.lookahead) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const from = this.sequenced;
      const to = Math.min(from + CHUNK, this.items.length, this.lookahead);
      if (this.sequenceItems(this.items, from, to) > 0) {
        const before = this.items.length;
        this.items = this.items.filter((p, i) => i < from || i >= to || p.sequenced !== undefined);
        this.sequenced = to - (before - this.items.length);
      } else this.sequenced = to;
      this.schedule();
    });
  }

  /** Sequences items[from, to) that are not yet; a request that cannot be an entry is rejected alone. */
  private sequenceItems(items: PoolItem<R>[], from: number, to: number): number {
    // One timestamp per turn: never decreasing along the log (DESIGN.md §1.5).
    this.lastMs = Math.max(this.now(), this.lastMs);
    const timestamp = new Date(this.lastMs).toISOString();
    let rejected = 0;
    for (let i = from; i < to; i++) {
      const p = items[i]!;
      if (p.sequenced) continue;
      const entry = buildEntry(p.request, timestamp);
      const canonical = canonicalEntryBytes(entry);
      if (canonical.length > MAX_CANONICAL_ENTRY_BYTES) {
        p.reject(new RangeError('canonical entry exceeds 65,535 bytes'));
        rejected++;
        continue;
      }
      const hash = entryHash(this.next, canonical, this.prior);
      p.sequenced = { seq: this.next, entry, canonical, entryHash: hash, leafHash: leafHash(hash) };
      this.next++;
      this.prior = hash;
    }
    return rejected;
  }
}
