// The pool of accepted anchors, sequenced ahead of their batch: each request gets its place
// in the log (seq), its canonical entry, entry_hash (chained to the one before) and leaf hash
// from a worker thread (src/sequencer/sequencing-worker.ts), up to one batch ahead. A batch
// then only builds tiles, signs and writes, while the next one is being hashed on the other
// core.
//
// The pool holds up to maxPending requests, so it keeps them compact: runs (segments) of up
// to RUN requests, each a packed record buffer (src/sequencer/records.ts) plus one slot per
// request for its promise's resolve function and its arrival time — no object per request.
// A run is sent to the worker as one buffer and comes back as flat buffers of canonical
// entries and hashes. Runs go once they are MIN_RUN long or a batch needs them: under HTTP
// load requests arrive one or two per turn of the event loop, and a message each would cost
// more than their hashing.
//
// Places are provisional until a batch commits: after a failed batch the sequencer reloads
// its edge from storage, and every waiting request (the failed batch back at the front) is
// sequenced again from there, so a place is never taken from a stale edge. Runs sequenced
// before such a reset are told apart by their epoch and dropped.
import type { Worker } from 'node:worker_threads';
import { type AnchorRequest, buildEntry } from '../core/anchor.js';
import type { CanonicalEntry } from '../core/entry.js';
import { HASH_SIZE } from '../core/hash.js';
import type { OnCommitted } from './contract.js';
import type { BatchEntries, Packed } from './right-edge.js';
import { RecordBuffer, Repeats } from './records.js';
import type { SequencedRun } from './sequencing.js';
import type { ToWorker } from './sequencing-worker.js';
import { startModuleWorker, terminateWhenLoaded } from '../store/threads.js';

/** Settles a waiting request's promise: with its result, or with a rejected promise. */
export type Settle<R> = (value: R | PromiseLike<R>) => void;

/** Requests per run sent to the worker (and per segment). */
const RUN = 4096;
/** Fewer requests than this wait for more (or for a batch that needs them) before going to the worker. */
const MIN_RUN = 256;

/** A promise rejected with `e` that counts as handled: settling with it rejects the caller's promise only. */
export function rejection(e: Error): Promise<never> {
  const p = Promise.reject(e);
  p.catch(() => undefined);
  return p;
}

/** Where a sequenced run placed its entries: what an entry object is rebuilt from. */
interface Placement {
  /** Seq of the run's entry 0, and the item it belongs to. */
  readonly seq0: number;
  readonly from: number;
  readonly timestamp: string;
  /** The run's artifact ids, joined by newlines (split on first use). */
  readonly artifactIds: string;
}

/**
 * A run of accepted requests in arrival order: items [lo, hi) of arrays that a segment split
 * by a batch boundary shares with its other half.
 */
export class Segment<R> {
  /** The worker's results, until the batch is packed (packBatch drops them). */
  private run: SequencedRun | undefined;
  private placement: Placement | undefined;
  private ids: string[] | undefined;
  private repeats: Repeats | undefined;
  /** Sent to the worker at least once: nothing is appended any more. */
  private sealed = false;

  constructor(
    private records: RecordBuffer,
    private settles: (Settle<R> | undefined)[],
    private enqueued: number[],
    private callbacks: Map<number, OnCommitted> | undefined,
    public lo: number,
    public hi: number,
  ) {}

  static open<R>(): Segment<R> {
    return new Segment<R>(new RecordBuffer(), [], [], undefined, 0, 0);
  }

  get count(): number {
    return this.hi - this.lo;
  }

  get firstEnqueued(): number {
    return this.enqueued[this.lo]!;
  }

  get isSequenced(): boolean {
    return this.placement !== undefined;
  }

  /** The time its entries carry (sequenced segments only). */
  get timestamp(): string {
    return this.placement!.timestamp;
  }

  /** Appends a request (only to an open segment that ends its arrays); throws if it can never be an entry. */
  add(request: AnchorRequest, settle: Settle<R>, enqueued: number, onCommitted: OnCommitted | undefined): void {
    this.records.append(request);
    this.settles.push(settle);
    this.enqueued.push(enqueued);
    if (onCommitted) (this.callbacks ??= new Map()).set(this.hi, onCommitted);
    this.hi++;
  }

  get appendable(): boolean {
    return !this.sealed && this.hi === this.records.count && this.count < RUN;
  }

  /** Seals the segment and returns its records for the worker (a fresh buffer to transfer). */
  send(): { bytes: Uint8Array; ends: Uint32Array } {
    this.sealed = true;
    this.records.trim();
    return this.records.copy(this.lo, this.hi);
  }

  /** Takes the worker's results; refused requests are rejected and dropped. Returns how many. */
  sequenced(run: SequencedRun): number {
    for (const { at, why } of run.refused) this.settle(this.lo + at, rejection(new RangeError(why)));
    if (run.refused.length > 0) this.drop(new Set(run.refused.map((r) => this.lo + r.at)));
    this.run = run;
    this.placement = {
      seq0: run.state.next - run.ends.length,
      from: this.lo,
      timestamp: run.timestamp,
      artifactIds: run.artifactIds,
    };
    this.ids = undefined;
    return run.refused.length;
  }

  /** Forgets the place (the edge was reloaded). */
  unsequence(): void {
    this.run = undefined;
    this.placement = undefined;
    this.ids = undefined;
  }

  /** Splits off items [at, hi) as a segment of their own, sharing the arrays (and the run). */
  splitAt(at: number): Segment<R> {
    const tail = new Segment<R>(this.records, this.settles, this.enqueued, this.callbacks, at, this.hi);
    tail.sealed = true;
    tail.run = this.run;
    tail.placement = this.placement;
    this.sealed = true;
    this.hi = at;
    return tail;
  }

  /** Seq of item i (sequenced segments only). */
  seq(i: number): number {
    return this.placement!.seq0 + (i - this.placement!.from);
  }

  /** Item i's canonical entry as an object (built from its record, the run's time and artifact id). */
  entry(i: number): CanonicalEntry {
    const p = this.placement!;
    this.ids ??= p.artifactIds.split('\n');
    return buildEntry(
      this.records.request(i, (this.repeats ??= new Repeats())),
      p.timestamp,
      this.ids[i - p.from] || undefined,
    );
  }

  /** Its canonical entries: a piece of the run's buffer. */
  canonicals(): Packed {
    const from = this.placement!.from;
    return { bytes: this.run!.canonicals, ends: this.run!.ends, from: this.lo - from, to: this.hi - from };
  }

  /** Copies its entry and leaf hashes into flat buffers at entry `k`. */
  copyHashes(entryHashes: Uint8Array, leafHashes: Uint8Array, k: number): void {
    const run = this.run!;
    const k0 = (this.lo - this.placement!.from) * HASH_SIZE;
    const k1 = (this.hi - this.placement!.from) * HASH_SIZE;
    entryHashes.set(run.entryHashes.subarray(k0, k1), k * HASH_SIZE);
    leafHashes.set(run.leafHashes.subarray(k0, k1), k * HASH_SIZE);
  }

  /** Lets go of the run's buffers once its batch is built (the batch's bundles hold copies). */
  releaseRun(): void {
    this.run = undefined;
  }

  onCommitted(i: number): OnCommitted | undefined {
    return this.callbacks?.get(i);
  }

  /** Settles item i once; the slot is cleared so the pool never holds a settled promise. */
  settle(i: number, value: R | PromiseLike<R>): void {
    const s = this.settles[i];
    this.settles[i] = undefined;
    s?.(value);
  }

  /** Rebuilds the segment without `gone` (fresh arrays: a split sibling may share the old ones). */
  private drop(gone: Set<number>): void {
    const records = new RecordBuffer(this.count);
    const settles: (Settle<R> | undefined)[] = [];
    const enqueued: number[] = [];
    const callbacks = new Map<number, OnCommitted>();
    for (let i = this.lo; i < this.hi; i++) {
      if (gone.has(i)) continue;
      const cb = this.callbacks?.get(i);
      if (cb) callbacks.set(settles.length, cb);
      records.append(this.records.request(i));
      settles.push(this.settles[i]);
      enqueued.push(this.enqueued[i]!);
    }
    this.records = records;
    this.settles = settles;
    this.enqueued = enqueued;
    this.callbacks = callbacks.size > 0 ? callbacks : undefined;
    this.lo = 0;
    this.hi = settles.length;
  }
}

/** The end of the committed log: the next seq, its prior entry_hash, the timestamp floor. */
export interface Tip {
  readonly size: number;
  readonly lastEntryHash: Uint8Array;
  /** Entry timestamps never go below this (ms): the last checkpoint's time after a restart. */
  readonly floorMs: number;
}

export class SequencingPool<R> {
  private segments: Segment<R>[] = [];
  private size = 0;
  /** segments[0 .. sent) are sequenced or on their way to the worker, `sentItems` requests. */
  private sent = 0;
  private sentItems = 0;
  private inFlight: Segment<R>[] = [];
  private epoch = 0;
  private lastMs = 0;
  private pumpScheduled = false;
  private runs = 0;
  private waiters: (() => void)[] = [];
  private failure: Error | undefined;
  private readonly worker: Worker;

  /** `lookahead`: requests sequenced ahead of their batch (one batch's worth). */
  constructor(
    private readonly now: () => number,
    private readonly lookahead: number,
  ) {
    this.worker = startWorker();
    this.worker.on('message', (m: { epoch: number; run: SequencedRun }) => this.received(m.epoch, m.run));
    this.worker.on('error', (e) => this.stop(new Error(`the sequencing worker failed: ${e.message}`)));
    this.worker.on('exit', () => this.stop(new Error('the sequencing worker exited')));
  }

  get length(): number {
    return this.size;
  }

  /** Runs sent to the worker so far. */
  get runsSent(): number {
    return this.runs;
  }

  /** When the oldest waiting request was accepted. */
  get oldestEnqueued(): number | undefined {
    return this.segments[0]?.firstEnqueued;
  }

  /** Accepts a request; throws UnrecordableRequestError (and keeps nothing) if it can never be an entry. */
  add(request: AnchorRequest, settle: Settle<R>, enqueued: number, onCommitted?: OnCommitted): void {
    let last = this.segments[this.segments.length - 1];
    if (!last?.appendable) {
      last = Segment.open<R>();
      last.add(request, settle, enqueued, onCommitted);
      this.segments.push(last);
    } else last.add(request, settle, enqueued, onCommitted);
    this.size++;
    // Requests arriving in the same turn of the event loop travel together.
    if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump(0);
      });
    }
  }

  /** Removes and returns up to `n` requests from the front once every one is sequenced. */
  async take(n: number): Promise<Segment<R>[]> {
    for (;;) {
      if (this.failure) throw this.failure;
      const m = Math.min(n, this.size);
      if (m === 0) return [];
      let k = 0;
      let items = 0;
      while (items < m) items += this.segments[k++]!.count;
      // Runs come back in order, so the last one sequenced means all before it are too.
      const last = this.segments[k - 1]!;
      if (last.isSequenced) {
        if (items > m) {
          this.segments.splice(k, 0, last.splitAt(last.hi - (items - m)));
          this.sent++;
        }
        const batch = this.segments.splice(0, k);
        this.sent -= k;
        this.sentItems -= m;
        this.size -= m;
        this.pump(0);
        return batch;
      }
      this.pump(m);
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Puts a batch that did not commit back at the front; every request is sequenced again from `tip`. */
  putBack(batch: Segment<R>[], tip: Tip): void {
    this.segments.unshift(...batch);
    for (const s of batch) this.size += s.count;
    this.reset(tip);
  }

  /** Forgets every place (the log's edge was reloaded) and sequences again from `tip`. */
  reset(tip: Tip): void {
    this.forgetRuns();
    for (const s of this.segments) s.unsequence();
    this.lastMs = Math.max(this.lastMs, tip.floorMs);
    this.post({ kind: 'reset', state: { next: tip.size, prior: tip.lastEntryHash, lastMs: this.lastMs } });
    this.pump(0);
  }

  /** Removes every request (to reject them). */
  drain(): Segment<R>[] {
    this.forgetRuns();
    const all = this.segments.splice(0);
    this.size = 0;
    this.wake();
    return all;
  }

  /** Stops the worker; the pool accepts nothing more. */
  async close(): Promise<void> {
    this.failure ??= new Error('the sequencing pool is closed');
    this.wake();
    await terminateWhenLoaded(this.worker);
  }

  /** Runs still in the worker are dropped when they come back (a new epoch). */
  private forgetRuns(): void {
    this.epoch++;
    this.inFlight = [];
    this.sent = 0;
    this.sentItems = 0;
  }

  /** Sends runs to the worker: one batch ahead, and at least the first `atLeast` requests. */
  private pump(atLeast: number): void {
    if (this.failure) return;
    const target = Math.min(this.size, Math.max(this.lookahead, atLeast));
    while (this.sentItems < target && this.sent < this.segments.length) {
      const segment = this.segments[this.sent]!;
      // Requests still arriving (one or two per turn of the event loop under HTTP load)
      // gather in the open segment until it is a worthwhile run, or until the run before it
      // is back: a message per run, not per turn. A batch waiting for them sends them now.
      if (segment.appendable && this.sentItems >= atLeast && (segment.count < MIN_RUN || this.inFlight.length > 0))
        break;
      this.sent++;
      this.sentItems += segment.count;
      this.inFlight.push(segment);
      this.runs++;
      const records = segment.send();
      this.post({ kind: 'run', epoch: this.epoch, nowMs: this.now(), records }, [
        records.bytes.buffer,
        records.ends.buffer,
      ] as ArrayBuffer[]);
    }
  }

  private received(epoch: number, run: SequencedRun): void {
    if (epoch !== this.epoch) return; // sequenced before a reset: dropped
    const segment = this.inFlight.shift()!;
    const refused = segment.sequenced(run);
    this.size -= refused;
    this.sentItems -= refused;
    if (segment.count === 0) {
      this.segments.splice(this.segments.indexOf(segment), 1);
      this.sent--;
    }
    this.pump(0);
    this.wake();
  }

  private post(m: ToWorker, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private stop(e: Error): void {
    this.failure ??= e;
    this.wake();
  }
}

function startWorker(): Worker {
  const worker = startModuleWorker(import.meta.url, 'sequencing-worker');
  worker.unref();
  return worker;
}

/** A taken batch as the edge appends it: its runs' canonical entries in place, its hashes copied flat. */
export function batchEntries<R>(batch: readonly Segment<R>[]): BatchEntries {
  let n = 0;
  for (const s of batch) n += s.count;
  const entryHashes = new Uint8Array(n * HASH_SIZE);
  const leafHashes = new Uint8Array(n * HASH_SIZE);
  let k = 0;
  for (const s of batch) {
    s.copyHashes(entryHashes, leafHashes, k);
    k += s.count;
  }
  return { canonicals: batch.map((s) => s.canonicals()), entryHashes, leafHashes };
}
