// The sequencer: pools anchor requests (sequencing each as it arrives: seq, canonical entry,
// entry and leaf hashes; src/sequencer/pool.ts), integrates them in batches, and publishes
// each batch so that a crash between any two writes is recoverable and the log never forks:
//   1. append the batch to the in-memory right edge (tiles, bundles, root) and sign;
//   2. stage the batch's records durably: under a fresh key, or for a small batch inline in
//      the lock record of step 3, so that its one durable write carries them;
//   3. compare-and-swap the lock record to the new size (the commit point);
//   4. create the tiles and bundles;
//   5. collect witness cosignatures (if a policy is set) and swap the public checkpoint;
//   6. update listeners (the lookup index) and only then acknowledge the anchors.
// A committed batch whose checkpoint the witnesses have not yet cosigned waits (its tiles
// are written, its anchors not acknowledged) and the next round publishes it.
// On start it re-applies a staged batch the lock names and resumes from the verified edge.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { AnchorRequest } from '../core/anchor.js';
import { openCheckpoint, signCheckpoint } from '../core/checkpoint.js';
import { parseCanonicalEntry } from '../core/entry.js';
import { HASH_SIZE, bytesEqual, hashFromHex, toHex } from '../core/hash.js';
import { proveConsistency } from '../core/merkle.js';
import { SIG_ED25519, type NoteSigner, type NoteVerifier, makeVerifier } from '../core/note.js';
import { LogReader } from '../read/reader.js';
import {
  type AnchorReceipt,
  type BatchListener,
  type CheckpointWitnessing,
  type IntegratedBatch,
  type OnCommitted,
  type PublishedCheckpoint,
  LogStateError,
  PoolFullError,
  SequencerStoppedError,
  StorageUnavailableError,
  UnrecordableRequestError,
  decodePublishedCheckpoint,
} from './contract.js';
import type { LockState, SequencerLock, StagedBatch } from '../store/lock.js';
import { ImmutableConflictError, type ObjectStore, VersionConflictError } from '../store/store.js';
import { TileHashReader } from '../core/tiles.js';
import { decodeBundle } from '../core/bundle.js';
import { TileSet } from '../read/tile-set.js';
import { type BatchResult, RightEdge } from './right-edge.js';
import { type Segment, SequencingPool, batchEntries, rejection } from './pool.js';
import { PublishedBatch, type Unpublished } from './receipts.js';
import { assertLockCurrent, openFailure, publishedCheckpointOf } from './lock-check.js';
import { loadEdge } from './recover.js';
import { StagingBuffer } from './staging-buffer.js';
import { HeldLock } from './held-lock.js';
import { PublicCheckpointObjects } from './public-checkpoint.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SequencerOptions {
  readonly origin: string;
  readonly signer: NoteSigner;
  /** Public objects: tiles, bundles, checkpoint. */
  readonly store: ObjectStore;
  /** Private scratch space for staged batches (never served). */
  readonly staging: ObjectStore;
  readonly lock: SequencerLock;
  /** Longest an anchor waits for its batch to start while none is running, in ms (default 1000). */
  readonly batchInterval?: number;
  /**
   * Shortest time between two batch starts, in ms (default 0: a batch starts as soon as the
   * last one is acknowledged). Each batch costs a signature and a few writes, so on a store
   * billed per request (S3, KMS, DynamoDB) this bounds the cost when anchors trickle in.
   * Effective up to `batchInterval`, which still bounds how long an anchor waits.
   */
  readonly minBatchSpacing?: number;
  /** Largest batch; a full pool starts a batch at once (default 65,536). */
  readonly maxBatch?: number;
  /** Bound on accepted but unacknowledged anchors; beyond it submit() rejects with PoolFullError (default 1,000,000). */
  readonly maxPending?: number;
  readonly listeners?: readonly BatchListener[];
  readonly witnessing?: CheckpointWitnessing;
  readonly logger?: Logger;
  readonly now?: () => number;
}

interface Prepared {
  readonly result: BatchResult;
  readonly checkpoint: PublishedCheckpoint;
  /** The batch's record bundle, to stage (a view of the kept staging buffer). */
  readonly staged: Uint8Array;
}

/** A run of waiting requests (src/sequencer/pool.ts); a batch is a few of them. */
type Pending = Segment<AnchorReceipt>;

/** Rejects every request of `segments` with `err`. */
function rejectAll(segments: readonly Pending[], err: Error): void {
  const rejected = rejection(err);
  for (const s of segments) for (let i = s.lo; i < s.hi; i++) s.settle(i, rejected);
}

const RETRY_DELAY_MS = 500;
const FIRST_PUBLISH_TIMEOUT_MS = 30_000;
/** Characters of the base64 text of `n` bytes. */
const base64Length = (n: number) => 4 * Math.ceil(n / 3);
/** Another writer, or an operator, changed the log under this sequencer: it must stop, never retry. */
const isConflict = (e: unknown) =>
  e instanceof VersionConflictError || e instanceof ImmutableConflictError || e instanceof LogStateError;
/** Why a conflict stops the sequencer, in one line: an operator-state error says it itself. */
const stopReason = (e: unknown, otherwise: string) =>
  e instanceof LogStateError ? e.message : `${otherwise}: ${(e as Error).message}`;

export class Sequencer {
  private readonly pool: SequencingPool<AnchorReceipt>;
  private timer: NodeJS.Timeout | undefined;
  /** When `timer` fires (now() time). */
  private timerAt = 0;
  private running: Promise<void> | undefined;
  private stopped: Error | undefined;
  private closing = false;
  private readonly listeners: BatchListener[];
  private readonly publishedListeners: ((c: PublishedCheckpoint, batch: IntegratedBatch | null) => void)[] = [];
  private readonly interval: number;
  private readonly minSpacing: number;
  /** When the last batch started (now() time; -Infinity before the first). */
  private lastBatchStart = Number.NEGATIVE_INFINITY;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private readonly now: () => number;
  private readonly reader: LogReader;

  private edge = RightEdge.empty();
  private readonly stagingBuffer = new StagingBuffer();
  /** The lock's checkpoint (log signature only). */
  private committed!: PublishedCheckpoint;
  /** The public checkpoint; set by open() before anyone can read it. */
  private published!: PublishedCheckpoint;
  private unpublished: Unpublished[] = [];
  /** Tiles of the unpublished batches: enough for their inclusion proofs at any later size. */
  private unpublishedTiles = new TileSet();
  private readonly lock: HeldLock;
  private readonly publicCheckpoint: PublicCheckpointObjects;
  /** The last committed batch, written but not yet durable: its object keys and staging key. */
  private unpersisted: { keys: string[]; staged: StagedBatch } | undefined;
  /** Its fsyncs once started (commit() waits for them before the next lock swap). */
  private persisting: Promise<void> = Promise.resolve();
  /** Why the log cannot commit, while storage keeps failing (a recovery attempt failed); submit() refuses meanwhile. */
  private degraded: string | undefined;
  /** Why the last publish did not happen (a failed write, or too few cosignatures), until one does. */
  private publishTrouble: string | undefined;
  private readonly stoppedListeners: ((err: Error) => void)[] = [];
  /** Batches or publishes that failed, since start. */
  commitFailures = 0;

  private constructor(private readonly opts: SequencerOptions) {
    this.interval = opts.batchInterval ?? 1000;
    this.minSpacing = opts.minBatchSpacing ?? 0;
    this.maxBatch = opts.maxBatch ?? 65_536;
    this.maxPending = opts.maxPending ?? 1_000_000;
    this.now = opts.now ?? Date.now;
    this.pool = new SequencingPool(this.now, this.maxBatch);
    this.listeners = [...(opts.listeners ?? [])];
    this.reader = new LogReader(opts.store, { cacheBytes: 16 * 1024 * 1024 });
    this.lock = new HeldLock(opts.lock);
    this.publicCheckpoint = new PublicCheckpointObjects(opts.store);
  }

  /** Opens the log in storage (creating it if empty), re-applying a staged batch if needed. */
  static async open(opts: SequencerOptions): Promise<Sequencer> {
    if (opts.signer.name !== opts.origin)
      throw new Error(`signing key is for ${opts.signer.name}, not origin ${opts.origin}`);
    const s = new Sequencer(opts);
    try {
      await s.recover(true).catch((e: unknown) => {
        throw openFailure(e);
      });
      await opts.witnessing?.checkWitnessedSizes?.(s.committed);
      opts.witnessing?.stopWith?.((e) => s.fail(new SequencerStoppedError(e.message), []));
      s.pool.reset(s.tip());
      // A brand-new log has no public checkpoint until its first one is cosigned.
      const deadline = Date.now() + FIRST_PUBLISH_TIMEOUT_MS;
      for (;;) {
        await s.publishCommitted();
        if (s.published) return s;
        if (Date.now() > deadline)
          throw new SequencerStoppedError('no checkpoint could be published: the witness policy was not met');
        await sleep(RETRY_DELAY_MS);
      }
    } catch (e) {
      await s.pool.close();
      throw e;
    }
  }

  /** The latest published checkpoint. */
  get checkpoint(): PublishedCheckpoint {
    return this.published;
  }

  /**
   * The latest tree the log has signed, its objects durable, but not yet published (it waits
   * for witness or mirror cosignatures): at least the published one. A tlog-mirror reads its
   * objects before it can cosign it.
   */
  get committedCheckpoint(): PublishedCheckpoint {
    return this.committed;
  }

  /** Entries accepted so far, including those not yet in a published checkpoint. */
  get lifetimeEntries(): number {
    return this.committed.size + this.pool.length;
  }

  /** Accepted anchors not yet acknowledged. */
  get pending(): number {
    return this.lifetimeEntries - this.published.size;
  }

  /** Why the sequencer stopped, if it did. */
  get failure(): Error | undefined {
    return this.stopped;
  }

  /** Readiness: null while anchors can be committed and published, else why not. */
  get notReady(): string | null {
    if (this.stopped) return `sequencer stopped: ${this.stopped.message}`;
    if (this.degraded) return this.degraded;
    return this.publishTrouble ?? null;
  }

  /** Called once if the sequencer stops on its own (not by close()): its process should exit. */
  onStopped(fn: (err: Error) => void): void {
    this.stoppedListeners.push(fn);
  }

  addListener(l: BatchListener): void {
    this.listeners.push(l);
  }

  /** Called after every publish. */
  onPublished(fn: (c: PublishedCheckpoint, batch: IntegratedBatch | null) => void): void {
    this.publishedListeners.push(fn);
  }

  /**
   * Queues a request; resolves once its entry is in a published checkpoint. `onCommitted`
   * hears of the entry's place as soon as its batch is committed (from then on it is
   * published even across a crash), so callers can record it while the checkpoint is written.
   */
  submit(request: AnchorRequest, onCommitted?: OnCommitted): Promise<AnchorReceipt> {
    if (this.stopped) return Promise.reject(this.stopped);
    if (this.degraded)
      return Promise.reject(new StorageUnavailableError(`${this.degraded}; this anchor was not recorded, retry later`));
    if (this.closing) return Promise.reject(new SequencerStoppedError('the sequencer is shutting down'));
    if (this.pending >= this.maxPending)
      return Promise.reject(new PoolFullError('the anchor pool is full; retry later'));
    // The pool keeps only the resolve function: a failure settles with a rejected promise.
    let settle!: (r: AnchorReceipt | PromiseLike<AnchorReceipt>) => void;
    const receipt = new Promise<AnchorReceipt>((resolve) => (settle = resolve));
    try {
      this.pool.add(request, settle, this.now(), onCommitted);
    } catch (e) {
      if (e instanceof UnrecordableRequestError) return Promise.reject(e);
      throw e;
    }
    this.schedule(true);
    return receipt;
  }

  /** Stops accepting anchors, integrates and publishes everything already accepted, and stops. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    while (!this.stopped) {
      await this.running;
      if (this.pool.length > 0) {
        this.startBatch();
        continue;
      }
      if (this.unpublished.length > 0) {
        this.running = this.publishCommitted()
          .catch((e) => this.logError('publish failed', e))
          .finally(() => (this.running = undefined));
        await this.running;
      }
      break;
    }
    const left = this.unpublished.flatMap((u) => u.batch);
    this.unpublished = [];
    rejectAll(
      left,
      new SequencerStoppedError(
        'shut down before the checkpoint was cosigned; the entries are in the log and are published on restart',
      ),
    );
    // Left unfinished, the staged batch is re-applied on the next start.
    this.startPersisting();
    try {
      await this.persisting;
      await this.forgetStaged();
    } catch (e) {
      this.logError('making the last batch durable failed; it is re-applied on restart', e);
    }
    await this.pool.close();
  }

  /**
   * Group commit: when no batch is running and anchors wait, the next batch starts as soon as
   * the last one started `minBatchSpacing` ago, and at the latest when the oldest anchor has
   * waited the batch interval (or the pool is full). Under a trickle an anchor waits for one
   * batch; under load the anchors that arrive while a batch commits make up the next one, so
   * batches grow instead of queuing. `soon` (a new anchor) defers the start to the next turn
   * of the event loop, so that requests arriving together travel together.
   */
  private schedule(soon = false): void {
    if (this.running || this.stopped || this.closing) return;
    const retryPublish = this.unpublished.length > 0 || this.committed.size > this.published.size;
    if (this.pool.length === 0 && !retryPublish) return;
    if (this.pool.length >= this.maxBatch) {
      this.startBatch();
      return;
    }
    const now = this.now();
    const startAt =
      this.pool.length > 0
        ? Math.min(this.lastBatchStart + this.minSpacing, this.pool.oldestEnqueued! + this.interval)
        : now + this.interval;
    if (startAt <= now && !soon) {
      this.startBatch();
      return;
    }
    // A timer already set for no later than this one will do (a publish retry may be set for later).
    if (this.timer && this.timerAt <= startAt) return;
    clearTimeout(this.timer);
    this.timerAt = startAt;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        if (this.pool.length === 0 && !this.running && !this.stopped) {
          this.running = this.publishCommitted()
            .catch((e) => this.logError('publish failed', e))
            .finally(() => {
              this.running = undefined;
              this.schedule();
            });
        } else this.schedule();
      },
      Math.max(0, startAt - now),
    );
  }

  private startBatch(): void {
    if (this.running || this.pool.length === 0) return;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.lastBatchStart = this.now();
    this.running = this.pool
      .take(this.maxBatch)
      .then(
        (batch) => (batch.length > 0 ? this.integrate(batch) : undefined),
        (e: unknown) => this.fail(new SequencerStoppedError(`sequencing failed: ${(e as Error).message}`), []),
      )
      .finally(() => {
        this.running = undefined;
        this.schedule();
      });
  }

  private async integrate(batch: Pending[]): Promise<void> {
    const fromSize = this.committed.size;
    const started = performance.now();
    let prepared: Prepared | undefined;
    let announced = false;
    // Tells each request its place once the lock holds the batch (the commit point).
    const announce = () => {
      if (announced || !prepared) return;
      announced = true;
      const hashes = prepared.result.entryHashes;
      let k = 0;
      for (const s of batch) {
        for (let i = s.lo; i < s.hi; i++, k++) {
          try {
            s.onCommitted(i)?.(fromSize + k, hashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE));
          } catch (e) {
            this.logError('an onCommitted callback failed', e);
          }
        }
      }
    };
    try {
      prepared = await this.prepare(batch);
      await this.commit(prepared, announce);
    } catch (e) {
      if (isConflict(e))
        return this.fail(
          new SequencerStoppedError(
            `another writer changed the log (${(e as Error).message}); this sequencer stopped so the log cannot fork`,
          ),
          batch,
        );
      this.commitFailures++;
      this.logError('batch failed; resynchronising from storage', e);
      if (!(await this.resync(batch))) return;
      const ours =
        prepared !== undefined &&
        bytesEqual(this.committed.root, prepared.checkpoint.root) &&
        this.committed.size === prepared.checkpoint.size;
      if (!ours || !prepared) {
        if (this.committed.size !== fromSize) {
          return this.fail(
            new SequencerStoppedError('the log advanced past a failed batch; another writer is active'),
            batch,
          );
        }
        // Nothing was committed: the requests go back to the front of the pool, which
        // sequences them again from the reloaded edge.
        this.pool.putBack(batch, this.tip());
        await sleep(RETRY_DELAY_MS);
        return;
      }
      // The lock held our batch and recover() re-applied it from staging: the requests
      // waiting behind it are sequenced again from the reloaded edge.
      this.pool.reset(this.tip());
    }
    announce();
    this.unpublished.push({ fromSize, batch, entryHashes: prepared.result.entryHashes, started });
    for (const t of prepared.result.tiles.all()) this.unpublishedTiles.add(t);
    // Its bundles and tiles are written: let them go while the checkpoint is published.
    prepared = undefined;
    try {
      await this.publishCommitted();
    } catch (e) {
      if (isConflict(e))
        return this.fail(new SequencerStoppedError(stopReason(e, 'another writer changed the public checkpoint')), []);
      this.logError('publishing the checkpoint failed; retrying next round', e);
    }
  }

  /** Builds the batch's tiles, bundles and signed checkpoint in memory (its entries are sequenced). */
  private async prepare(batch: Pending[]): Promise<Prepared> {
    const entries = batchEntries(batch);
    const result = this.edge.appendHashed(entries);
    const staged = this.stagingBuffer.fill(entries.canonicals);
    // The bundles hold copies of the canonical entries: the runs' buffers can go.
    for (const s of batch) s.releaseRun();
    // A checkpoint is never older than the entries it covers (runs' times never go back).
    const timestamp = this.nextTimestamp(Date.parse(batch[batch.length - 1]!.timestamp));
    const signed = await signCheckpoint(
      { origin: this.opts.origin, size: result.edge.size, root: result.root },
      this.opts.signer,
    );
    return { result, checkpoint: { ...signed, timestamp }, staged };
  }

  /**
   * Stages, commits in the lock, and writes the tiles of a prepared batch. The tiles are
   * written without waiting for fsync: the staged copy is durable, and stays until they are
   * (see persistBatch), so a power loss at any point is repaired by recover().
   */
  private async commit({ result, checkpoint, staged: bundle }: Prepared, committed: () => void): Promise<void> {
    const staged = await this.stage(bundle);
    // The lock names one staged batch: the one before must be durable before it is forgotten.
    this.startPersisting();
    await this.persisting;
    const state: LockState = {
      size: checkpoint.size,
      root: toHex(checkpoint.root),
      timestamp: checkpoint.timestamp,
      note: checkpoint.note,
      staged,
    };
    await this.lock.swap(state);
    committed();
    await this.opts.store.createAll(result.objects, { durable: false });
    this.edge = result.edge;
    this.committed = checkpoint;
    this.unpersisted = { keys: result.objects.map((o) => o.key), staged };
    this.startPersisting();
  }

  /**
   * Makes the batch's record bundle durable ahead of the commit: inline in the lock record when
   * it is within the lock's limit (the commit's one durable write carries it), else as a
   * staging object under a fresh key.
   */
  private async stage(bundle: Uint8Array): Promise<StagedBatch> {
    const from = { fromSize: this.committed.size, fromRoot: toHex(this.committed.root) };
    if (base64Length(bundle.length) <= (this.opts.lock.inlineLimit ?? 0)) {
      const records = Buffer.from(bundle.buffer, bundle.byteOffset, bundle.byteLength).toString('base64');
      this.stagingBuffer.release();
      return { ...from, records };
    }
    const key = `staging/${from.fromSize}-${randomBytes(8).toString('hex')}`;
    await this.opts.staging.createAll([{ key, data: bundle }]);
    this.stagingBuffer.release();
    return { ...from, key };
  }

  /**
   * Starts the fsyncs of the last committed batch as soon as its objects are written. They run
   * beside the publish, whose renames they slow a little (1.6 to 2.0 ms a checkpoint), and are
   * then mostly done when the next batch's lock swap has to wait for them: under 64 control
   * connections the write-behind took 2.3 ms a batch instead of 6.6-8.1 ms when it started at
   * the acknowledgement, and batches integrated in 12.5 ms instead of 13-16 ms.
   */
  private startPersisting(): void {
    const u = this.unpersisted;
    if (!u) return;
    this.unpersisted = undefined;
    const persisting = this.persistBatch(u.keys, u.staged);
    persisting.catch(() => undefined); // its failure surfaces at the next commit, or in close()
    this.persisting = persisting;
  }

  /** Makes a committed batch's objects durable, then drops its staged copy. */
  private async persistBatch(keys: readonly string[], staged: StagedBatch): Promise<void> {
    await this.opts.store.persist(keys);
    await this.dropStaged(staged);
  }

  /** Writes the objects of the batch staged in the lock durably (repairing torn copies), then drops its staged copy. */
  private async reapply(result: BatchResult, checkpoint: PublishedCheckpoint, staged: StagedBatch): Promise<void> {
    await this.opts.store.createAll(result.objects, { repairTorn: true });
    this.edge = result.edge;
    this.committed = checkpoint;
    await this.dropStaged(staged);
  }

  /** Deletes a durable batch's staging object; one staged inline goes with the next lock record. */
  private async dropStaged(staged: StagedBatch): Promise<void> {
    if (staged.key !== undefined) await this.opts.staging.delete(staged.key);
  }

  /**
   * Rewrites the lock record without its staged batch once that is durable (closing): the next
   * start then re-applies nothing and verifies the edge as stored.
   */
  private async forgetStaged(): Promise<void> {
    if (this.stopped || this.unpersisted) return;
    await this.lock.forgetStaged();
  }

  /**
   * Publishes the committed checkpoint once the witness policy (if any) is met, then
   * tells listeners and acknowledges every batch it covers.
   */
  private async publishCommitted(): Promise<void> {
    try {
      await this.publishCommittedOnce();
    } catch (e) {
      this.commitFailures++;
      this.publishTrouble = `publishing the checkpoint failed: ${(e as Error).message}`;
      // A witness that saw a larger tree: publishing anything below it would fork the log.
      if (e instanceof LogStateError) this.fail(new SequencerStoppedError(e.message), []);
      throw e;
    }
  }

  private async publishCommittedOnce(): Promise<void> {
    const cp = this.committed;
    if (this.published && cp.size === this.published.size && this.unpublished.length === 0) return;
    let note = cp.note;
    if (this.opts.witnessing) {
      const cosigned = await this.opts.witnessing.cosign(cp, (old) => this.consistencyProof(old, cp.size));
      if (cosigned === null) {
        this.publishTrouble = `witness policy not met for size ${cp.size}; its anchors wait for the next round`;
        this.opts.logger?.warn({ size: cp.size }, 'witness policy not met; the checkpoint waits for the next round');
        return;
      }
      note = cosigned;
    }
    const published: PublishedCheckpoint = { ...cp, note };
    const done = this.unpublished;
    const tiles = this.unpublishedTiles;
    const batches = done.map(
      (u) =>
        new PublishedBatch(u, published, tiles, u.started !== undefined ? performance.now() - u.started : undefined),
    );
    // The index may learn the entries while the checkpoint is being written (both after
    // the tiles): lookups of entries beyond the public size are answered 404 meanwhile.
    await Promise.all([this.publicCheckpoint.write(published), this.notifyListeners(batches)]);
    this.published = published;
    this.publishTrouble = undefined;
    this.unpublished = [];
    this.unpublishedTiles = new TileSet();
    for (const b of batches) {
      for (const fn of this.publishedListeners) fn(published, b);
      b.acknowledge();
    }
    if (done.length === 0) for (const fn of this.publishedListeners) fn(published, null);
  }

  /** Consistency proof to the committed size: unpublished tiles first, then storage. */
  private consistencyProof(oldSize: number, size: number): Promise<Uint8Array[]> {
    const reader = new TileHashReader(size, async (level, index, width) => {
      const t = this.unpublishedTiles.get(level, index);
      return t && t.width >= width ? t : this.reader.tile(level, index, width);
    });
    return proveConsistency(oldSize, size, reader);
  }

  /** After an ambiguous failure, reloads state from storage (retrying); false if stopped. */
  private async resync(batch: Pending[]): Promise<boolean> {
    for (;;) {
      try {
        await this.recover(false);
        this.degraded = undefined;
        return true;
      } catch (e) {
        if (isConflict(e)) {
          this.fail(new SequencerStoppedError(stopReason(e, 'another writer changed the log')), batch);
          return false;
        }
        this.logError('recovery failed; retrying', e);
        if (!this.degraded) {
          // Storage keeps failing: what waits in the pool is not recorded; say so now rather
          // than let it wait, and refuse new anchors until a recovery succeeds.
          this.degraded = `the log cannot commit anchors: ${(e as Error).message}`;
          rejectAll(
            this.pool.drain(),
            new StorageUnavailableError(`${this.degraded}; the anchors waiting were not recorded, retry later`),
          );
        }
        await sleep(RETRY_DELAY_MS);
      }
    }
  }

  /** Each listener sees the batches in order; listeners run side by side. */
  private async notifyListeners(batches: readonly IntegratedBatch[]): Promise<void> {
    await Promise.all(
      this.listeners.map(async (l) => {
        for (const batch of batches) {
          try {
            await l.onBatch(batch);
          } catch (e) {
            // Listeners hold derived data (rebuildable from the records); the entries are durable.
            this.logError('batch listener failed', e);
          }
        }
      }),
    );
  }

  /** The committed checkpoint's time in ms (0 before there is one). */
  private committedMs(): number {
    return this.committed ? Date.parse(this.committed.timestamp) : 0;
  }

  private nextTimestamp(atLeast = 0): string {
    return new Date(Math.max(this.now(), this.committedMs() + 1, atLeast)).toISOString();
  }

  /** Where the next request is sequenced: the committed edge. */
  private tip() {
    return { size: this.edge.size, lastEntryHash: this.edge.lastEntryHash, floorMs: this.committedMs() };
  }

  private logError(msg: string, e: unknown): void {
    this.opts.logger?.error({ err: e instanceof Error ? e.message : String(e) }, msg);
  }

  private fail(err: Error, batch: Pending[]): void {
    if (this.stopped) {
      rejectAll(batch, this.stopped);
      return;
    }
    this.stopped = err;
    this.opts.logger?.fatal({ err: err.message }, 'sequencer stopped');
    const waiting = this.unpublished.flatMap((u) => u.batch);
    this.unpublished = [];
    rejectAll([...batch, ...waiting, ...this.pool.drain()], err);
    if (this.timer) clearTimeout(this.timer);
    void this.pool.close();
    for (const fn of this.stoppedListeners) fn(err);
  }

  /** Reads the lock, re-applies a staged batch, loads and verifies the right edge. */
  private async recover(opening: boolean): Promise<void> {
    const { store, signer, origin } = this.opts;
    // A write-behind still running would race the re-apply below; its failure is repaired there.
    await this.persisting.catch(() => undefined);
    this.persisting = Promise.resolve();
    this.unpersisted = undefined;
    const verifier = makeVerifier(origin, SIG_ED25519, signer.publicKey);
    const stored = await this.publicCheckpoint.read();
    const published = publishedCheckpointOf(stored.json, stored.note, verifier);
    const { state, created } = await this.lock.take({ store, signer, origin, now: this.now() }, published, opening);
    const opened = openCheckpoint(state.note, verifier);
    if (opened.size !== state.size || toHex(opened.root) !== state.root)
      throw new Error('lock record note does not match its size and root');
    // (A lock just created was checked against everything published as it was made.)
    if (!created) await assertLockCurrent(store, state, published);
    const committed: PublishedCheckpoint = { ...opened, timestamp: state.timestamp };
    this.published = this.readPublished(stored.json, verifier) ?? this.published;
    if (state.staged && (await this.reapplyStaged(state.staged, committed, opening))) return;
    this.edge = await loadEdge(store, committed.size, committed.root);
    this.committed = committed;
  }

  /**
   * Re-applies the batch the lock names as staged, if its staged copy is still there (it is
   * deleted only once the batch's objects are durable: then there is nothing to re-apply).
   */
  private async reapplyStaged(staged: StagedBatch, committed: PublishedCheckpoint, opening: boolean): Promise<boolean> {
    const { store, staging } = this.opts;
    const stagedData = staged.key !== undefined ? await staging.get(staged.key) : Buffer.from(staged.records, 'base64');
    if (!stagedData) return false;
    const label = staged.key ?? `the batch staged in the lock from ${staged.fromSize}`;
    const records = decodeBundle(stagedData, label, Number.MAX_SAFE_INTEGER);
    const base = await loadEdge(store, staged.fromSize, hashFromHex(staged.fromRoot));
    const result = base.append(records);
    if (!bytesEqual(result.root, committed.root) || result.edge.size !== committed.size) {
      throw new Error(`staged batch ${label} does not reproduce the committed root`);
    }
    await this.reapply(result, committed, staged);
    this.opts.logger?.info({ size: committed.size }, 're-applied a staged batch');
    if (opening) {
      const entries = records.map((r) => parseCanonicalEntry(r));
      this.unpublished.push({ fromSize: staged.fromSize, batch: [], entries, entryHashes: result.entryHashes });
      for (const t of result.tiles.all()) this.unpublishedTiles.add(t);
    }
    return true;
  }

  /** The public checkpoint as stored, if it verifies under the log key. */
  private readPublished(json: Uint8Array | undefined, verifier: NoteVerifier): PublishedCheckpoint | null {
    if (!json) return null;
    try {
      return decodePublishedCheckpoint(json, verifier);
    } catch (e) {
      this.logError('the public checkpoint does not verify; it will be replaced', e);
      return null;
    }
  }
}
