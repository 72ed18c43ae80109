// The pool of accepted anchors, sequenced ahead of their batch: each request gets its place
// in the log (seq), its canonical entry, entry_hash (chained to the one before) and leaf hash
// from a worker thread (src/sequencer/sequencing-worker.ts), up to one batch ahead. A batch
// then only builds tiles, signs and writes, while the next one is being hashed on the other
// core.
//
// Places are provisional until a batch commits: after a failed batch the sequencer reloads
// its edge from storage, and every waiting request (the failed batch back at the front) is
// sequenced again from there, so a place is never taken from a stale edge. Runs sequenced
// before such a reset are told apart by their epoch and dropped.
import { Worker } from 'node:worker_threads';
import { type AnchorRequest, buildEntry } from '../anchor.js';
import type { CanonicalEntry } from '../entry.js';
import { HASH_SIZE } from '../hash.js';
import type { SequencedRun } from './sequencing.js';
import type { ToWorker } from './sequencing-worker.js';

/** An accepted request's place in the log: entry `k` of a sequenced run. */
export interface Sequenced {
  readonly seq: number;
  readonly run: SequencedRun;
  readonly k: number;
}

/** The entry at a place, with views of its bytes in the run's buffers. */
export interface Placed {
  readonly seq: number;
  readonly entry: CanonicalEntry;
  readonly canonical: Uint8Array;
  readonly entryHash: Uint8Array;
  readonly leafHash: Uint8Array;
}

/**
 * Unpacks a place. Done when its batch is built, not when it is sequenced, so the batch
 * waiting behind the one being written holds a few buffers rather than objects per entry.
 */
export function placed(request: AnchorRequest, { seq, run, k }: Sequenced): Placed {
  return {
    seq,
    entry: buildEntry(request, run.timestamp, run.artifactIds[k]),
    canonical: run.canonicals.subarray(k === 0 ? 0 : run.ends[k - 1]!, run.ends[k]!),
    entryHash: run.entryHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE),
    leafHash: run.leafHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE),
  };
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

/** The end of the committed log: the next seq, its prior entry_hash, the timestamp floor. */
export interface Tip {
  readonly size: number;
  readonly lastEntryHash: Uint8Array;
  /** Entry timestamps never go below this (ms): the last checkpoint's time after a restart. */
  readonly floorMs: number;
}

/** Requests per message to the worker. */
const RUN = 4096;

interface InFlight<R> {
  readonly items: PoolItem<R>[];
}

export class SequencingPool<R> {
  private items: PoolItem<R>[] = [];
  /** items[0 .. sent) are sequenced or on their way to the worker. */
  private sent = 0;
  private inFlight: InFlight<R>[] = [];
  private epoch = 0;
  private lastMs = 0;
  private pumpScheduled = false;
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
    return this.items.length;
  }

  /** When the oldest waiting request was accepted. */
  get oldestEnqueued(): number | undefined {
    return this.items[0]?.enqueued;
  }

  add(item: PoolItem<R>): void {
    this.items.push(item);
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
  async take(n: number): Promise<PoolItem<R>[]> {
    for (;;) {
      if (this.failure) throw this.failure;
      const m = Math.min(n, this.items.length);
      if (m === 0) return [];
      // Runs come back in order, so the m-th sequenced means all before it are too.
      if (this.items[m - 1]!.sequenced) {
        const batch = this.items.splice(0, m);
        this.sent -= m;
        this.pump(0);
        return batch;
      }
      this.pump(m);
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Puts a batch that did not commit back at the front; every request is sequenced again from `tip`. */
  putBack(batch: PoolItem<R>[], tip: Tip): void {
    this.items.unshift(...batch);
    this.reset(tip);
  }

  /** Forgets every place (the log's edge was reloaded) and sequences again from `tip`. */
  reset(tip: Tip): void {
    this.forgetRuns();
    for (const p of this.items) p.sequenced = undefined;
    this.lastMs = Math.max(this.lastMs, tip.floorMs);
    this.post({ kind: 'reset', state: { next: tip.size, prior: tip.lastEntryHash, lastMs: this.lastMs } });
    this.pump(0);
  }

  /** Removes every request (to reject them). */
  drain(): PoolItem<R>[] {
    this.forgetRuns();
    const all = this.items.splice(0);
    this.wake();
    return all;
  }

  /** Stops the worker; the pool accepts nothing more. */
  async close(): Promise<void> {
    this.failure ??= new Error('the sequencing pool is closed');
    this.wake();
    await this.worker.terminate();
  }

  /** Runs still in the worker are dropped when they come back (a new epoch). */
  private forgetRuns(): void {
    this.epoch++;
    this.inFlight = [];
    this.sent = 0;
  }

  /** Sends requests to the worker: one batch ahead, and at least the first `atLeast`. */
  private pump(atLeast: number): void {
    if (this.failure) return;
    const target = Math.min(this.items.length, Math.max(this.lookahead, atLeast));
    while (this.sent < target) {
      const items = this.items.slice(this.sent, Math.min(target, this.sent + RUN));
      this.sent += items.length;
      this.inFlight.push({ items });
      this.post({ kind: 'run', epoch: this.epoch, nowMs: this.now(), requests: items.map((p) => p.request) });
    }
  }

  private received(epoch: number, run: SequencedRun): void {
    if (epoch !== this.epoch) return; // sequenced before a reset: dropped
    const { items } = this.inFlight.shift()!;
    this.lastMs = Math.max(this.lastMs, run.state.lastMs);
    const first = run.state.next - run.ends.length;
    let k = 0;
    let refused = 0;
    items.forEach((p, i) => {
      const why = run.refused[i];
      if (why) {
        refused++;
        p.reject(new RangeError(why));
        return;
      }
      p.sequenced = { seq: first + k, run, k };
      k++;
    });
    if (refused > 0) {
      const gone = new Set(items.filter((_, i) => run.refused[i]));
      this.items = this.items.filter((p) => !gone.has(p));
      this.sent -= refused;
    }
    this.wake();
  }

  private post(m: ToWorker): void {
    this.worker.postMessage(m);
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private stop(e: Error): void {
    this.failure ??= e;
    this.wake();
  }
}

/** The worker runs the compiled module; from TypeScript sources (tests, benches) through tsx's loader. */
function startWorker(): Worker {
  let worker: Worker;
  if (import.meta.url.endsWith('.ts')) {
    const module = new URL('./sequencing-worker.ts', import.meta.url).href;
    const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(module)}); })`;
    worker = new Worker(boot, { eval: true });
  } else {
    worker = new Worker(new URL('./sequencing-worker.js', import.meta.url));
  }
  worker.unref();
  return worker;
}

