// The sequencer: pools anchor requests, integrates them in batches, and publishes each
// batch so that a crash between any two writes is recoverable and the log never forks:
//   1. append the batch to the in-memory right edge (tiles, bundles, root) and sign;
//   2. stage the batch's records durably under a fresh key;
//   3. compare-and-swap the lock record to the new size (the commit point);
//   4. create the tiles and bundles, then swap the public checkpoint;
//   5. update listeners (the lookup index) and only then acknowledge the anchors.
// On start it re-applies a staged batch the lock names and resumes from the verified edge.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type AnchorRequest, buildEntry } from '../anchor.js';
import { type SignedCheckpoint, openCheckpoint, signCheckpoint } from '../checkpoint.js';
import { type CanonicalEntry, MAX_CANONICAL_ENTRY_BYTES, canonicalEntryBytes, parseCanonicalEntry } from '../entry.js';
import { bytesEqual, hashFromHex, toHex } from '../hash.js';
import { proveInclusionSync } from '../merkle.js';
import { type NoteSigner, SIG_ED25519, makeVerifier } from '../note.js';
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY } from '../store/layout.js';
import type { LockState, SequencerLock } from '../store/lock.js';
import { ImmutableConflictError, type ObjectStore, VersionConflictError } from '../store/store.js';
import { decodeBundle, encodeBundle } from '../tiles.js';
import { type BatchResult, RightEdge } from './edge.js';
import { loadEdge } from './recover.js';

/** A checkpoint as published: signed note plus its publish time. */
export interface PublishedCheckpoint extends SignedCheckpoint {
  /** ISO 8601 UTC with milliseconds; strictly increasing from one checkpoint to the next. */
  readonly timestamp: string;
}

export interface AnchorReceipt {
  readonly seq: number;
  readonly entry: CanonicalEntry;
  readonly entryHash: Uint8Array;
  /** The first checkpoint that includes the entry. */
  readonly checkpoint: PublishedCheckpoint;
  /** Audit path to `checkpoint`'s root, computed on demand from the batch's tiles in memory. */
  inclusionProof(): Uint8Array[];
}

/** What listeners (the lookup index, metrics) learn of each published batch. */
export interface IntegratedBatch {
  readonly fromSize: number;
  readonly entries: readonly CanonicalEntry[];
  readonly entryHashes: readonly Uint8Array[];
  readonly checkpoint: PublishedCheckpoint;
  /** Time from taking the batch to its publish, in ms (absent for recovered batches). */
  readonly integrationMs?: number;
}

export interface BatchListener {
  onBatch(batch: IntegratedBatch): Promise<void>;
}

export interface SequencerOptions {
  readonly origin: string;
  readonly signer: NoteSigner;
  /** Public objects: tiles, bundles, checkpoint. */
  readonly store: ObjectStore;
  /** Private scratch space for staged batches (never served). */
  readonly staging: ObjectStore;
  readonly lock: SequencerLock;
  /** Longest an anchor waits for its batch to start, in ms (default 1000). */
  readonly batchInterval?: number;
  /** Largest batch; a full pool starts a batch at once (default 65,536). */
  readonly maxBatch?: number;
  /** Pool bound; beyond it submit() rejects with PoolFullError (default 1,000,000). */
  readonly maxPending?: number;
  readonly listeners?: readonly BatchListener[];
  readonly logger?: Logger;
  readonly now?: () => number;
}

export class PoolFullError extends Error {
  override name = 'PoolFullError';
}

/** The sequencer stopped: closed, or it lost the lock to another sequencer. */
export class SequencerStoppedError extends Error {
  override name = 'SequencerStoppedError';
}

interface Prepared {
  readonly result: BatchResult;
  readonly checkpoint: PublishedCheckpoint;
  readonly entries: CanonicalEntry[];
  readonly canonicals: Uint8Array[];
}

interface Pending {
  readonly request: AnchorRequest;
  readonly enqueued: number;
  resolve(r: AnchorReceipt): void;
  reject(e: Error): void;
}

const RETRY_DELAY_MS = 500;

export class Sequencer {
  private pool: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped: Error | undefined;
  private closing = false;
  private readonly listeners: BatchListener[];
  private readonly publishedListeners: ((c: PublishedCheckpoint, batch: IntegratedBatch | null) => void)[] = [];
  private readonly interval: number;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private readonly now: () => number;

  private constructor(
    private readonly opts: SequencerOptions,
    private edge: RightEdge,
    private current: PublishedCheckpoint,
    private lockVersion: string,
    private checkpointVersions: { note: string | null; json: string | null },
  ) {
    this.interval = opts.batchInterval ?? 1000;
    this.maxBatch = opts.maxBatch ?? 65_536;
    this.maxPending = opts.maxPending ?? 1_000_000;
    this.now = opts.now ?? Date.now;
    this.listeners = [...(opts.listeners ?? [])];
  }

  /** Opens the log in storage (creating it if empty), re-applying a staged batch if needed. */
  static async open(opts: SequencerOptions): Promise<Sequencer> {
    if (opts.signer.name !== opts.origin) throw new Error(`signing key is for ${opts.signer.name}, not origin ${opts.origin}`);
    const s = new Sequencer(opts, RightEdge.empty(), undefined as never, '', { note: null, json: null });
    await s.recover(true);
    return s;
  }

  get checkpoint(): PublishedCheckpoint {
    return this.current;
  }

  /** Entries accepted so far, including those still waiting in the pool. */
  get lifetimeEntries(): number {
    return this.current.size + this.pool.length;
  }

  get pending(): number {
    return this.pool.length;
  }

  /** Why the sequencer stopped, if it did. */
  get failure(): Error | undefined {
    return this.stopped;
  }

  addListener(l: BatchListener): void {
    this.listeners.push(l);
  }

  /** Called after every publish (and once per recovered batch). */
  onPublished(fn: (c: PublishedCheckpoint, batch: IntegratedBatch | null) => void): void {
    this.publishedListeners.push(fn);
  }

  /** Queues a request; resolves once its entry is in a published checkpoint. */
  submit(request: AnchorRequest): Promise<AnchorReceipt> {
    if (this.stopped) return Promise.reject(this.stopped);
    if (this.closing) return Promise.reject(new SequencerStoppedError('the sequencer is shutting down'));
    if (this.pool.length >= this.maxPending) return Promise.reject(new PoolFullError('the anchor pool is full; retry later'));
    return new Promise<AnchorReceipt>((resolve, reject) => {
      this.pool.push({ request, enqueued: this.now(), resolve, reject });
      this.schedule();
    });
  }

  /** Stops accepting anchors, integrates everything already accepted, and stops. */
  async close(): Promise<void> {
    this.closing = true;
    while (this.pool.length > 0 && !this.stopped) {
      this.startBatch();
      await this.running;
    }
    await this.running;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.running || this.stopped || this.pool.length === 0) return;
    const waited = this.now() - this.pool[0]!.enqueued;
    if (this.pool.length >= this.maxBatch || waited >= this.interval) {
      this.startBatch();
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.schedule();
      }, this.interval - waited);
    }
  }

  private startBatch(): void {
    if (this.running || this.pool.length === 0) return;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batch = this.pool.splice(0, this.maxBatch);
    this.running = this.integrate(batch).finally(() => {
      this.running = undefined;
      this.schedule();
    });
  }

  private async integrate(batch: Pending[]): Promise<void> {
    const fromSize = this.current.size;
    const started = performance.now();
    let prepared: Prepared | undefined;
    try {
      prepared = await this.prepare(batch);
      await this.commit(prepared);
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      if (err instanceof VersionConflictError || err instanceof ImmutableConflictError) {
        this.fail(new SequencerStoppedError(`another writer changed the log (${err.message}); this sequencer stopped so the log cannot fork`), batch);
        return;
      }
      this.opts.logger?.error({ err: err.message, size: fromSize }, 'batch failed; resynchronising from storage');
      if (!(await this.resync(batch))) return;
      if (!prepared || !bytesEqual(this.current.root, prepared.checkpoint.root)) {
        if (this.current.size !== fromSize) {
          this.fail(new SequencerStoppedError('the log advanced past a failed batch; another writer is active'), batch);
          return;
        }
        // Nothing was committed: the requests go back to the front of the pool.
        this.pool.unshift(...batch);
        await new Promise((r) => setTimeout(r, RETRY_DELAY_MS));
        return;
      }
      // The lock held our batch and recover() re-applied it from staging: acknowledge it.
    }
    await this.notify({
      fromSize,
      entries: prepared.entries,
      entryHashes: prepared.result.entryHashes,
      checkpoint: prepared.checkpoint,
      integrationMs: performance.now() - started,
    });
    this.acknowledge(batch, prepared);
  }

  private acknowledge(batch: Pending[], { result, checkpoint, entries }: Prepared): void {
    const fromSize = checkpoint.size - batch.length;
    const size = checkpoint.size;
    batch.forEach((p, i) =>
      p.resolve({
        seq: fromSize + i,
        entry: entries[i]!,
        entryHash: result.entryHashes[i]!,
        checkpoint,
        inclusionProof: () => proveInclusionSync(fromSize + i, size, result.tiles.lookup(size)),
      }),
    );
  }

  /** After an ambiguous failure, reloads state from storage (retrying); false if stopped. */
  private async resync(batch: Pending[]): Promise<boolean> {
    for (;;) {
      try {
        await this.recover(false);
        return true;
      } catch (e) {
        if (e instanceof VersionConflictError || e instanceof ImmutableConflictError) {
          this.fail(new SequencerStoppedError(`another writer changed the log: ${(e as Error).message}`), batch);
          return false;
        }
        this.opts.logger?.error({ err: (e as Error).message }, 'recovery failed; retrying');
        await new Promise((r) => setTimeout(r, RETRY_DELAY_MS));
      }
    }
  }

  /** Builds the batch's entries, tiles and signed checkpoint in memory. */
  private async prepare(batch: Pending[]): Promise<Prepared> {
    const timestamp = this.nextTimestamp();
    const entries = batch.map((p) => buildEntry(p.request, timestamp));
    const canonicals = entries.map((e) => {
      const c = canonicalEntryBytes(e);
      if (c.length > MAX_CANONICAL_ENTRY_BYTES) throw new RangeError('canonical entry exceeds 65,535 bytes');
      return c;
    });
    const result = this.edge.append(canonicals);
    const signed = await signCheckpoint({ origin: this.opts.origin, size: result.edge.size, root: result.root }, this.opts.signer);
    return { result, checkpoint: { ...signed, timestamp }, entries, canonicals };
  }

  /** Stages, commits in the lock, and applies a prepared batch. */
  private async commit({ result, checkpoint, canonicals }: Prepared): Promise<void> {
    const stagedKey = `staging/${this.current.size}-${randomBytes(8).toString('hex')}`;
    await this.opts.staging.createAll([{ key: stagedKey, data: encodeBundle(canonicals) }]);
    const state: LockState = {
      size: checkpoint.size,
      root: toHex(checkpoint.root),
      timestamp: checkpoint.timestamp,
      note: checkpoint.note,
      staged: { key: stagedKey, fromSize: this.current.size, fromRoot: toHex(this.current.root) },
    };
    this.lockVersion = await this.opts.lock.swap(this.lockVersion, state);
    await this.apply(result, checkpoint, stagedKey);
  }

  /** Writes a committed batch's objects and checkpoint, then drops its staging object. */
  private async apply(result: BatchResult, checkpoint: PublishedCheckpoint, stagedKey: string): Promise<void> {
    await this.opts.store.createAll(result.objects);
    await this.writePublicCheckpoint(checkpoint);
    this.edge = result.edge;
    this.current = checkpoint;
    await this.opts.staging.delete(stagedKey);
  }

  private async writePublicCheckpoint(c: PublishedCheckpoint): Promise<void> {
    const json = Buffer.from(JSON.stringify({ note: c.note, timestamp: c.timestamp }));
    this.checkpointVersions.json = await this.opts.store.swap(CHECKPOINT_JSON_KEY, json, this.checkpointVersions.json);
    this.checkpointVersions.note = await this.opts.store.swap(CHECKPOINT_KEY, Buffer.from(c.note), this.checkpointVersions.note);
  }

  private async notify(batch: IntegratedBatch): Promise<void> {
    for (const l of this.listeners) {
      try {
        await l.onBatch(batch);
      } catch (e) {
        // Listeners hold derived data (rebuildable from the records); the entries are durable.
        this.opts.logger?.error({ err: (e as Error).message }, 'batch listener failed');
      }
    }
    for (const fn of this.publishedListeners) fn(batch.checkpoint, batch);
  }

  private nextTimestamp(): string {
    const last = this.current ? Date.parse(this.current.timestamp) : 0;
    return new Date(Math.max(this.now(), last + 1)).toISOString();
  }

  private fail(err: Error, batch: Pending[]): void {
    this.stopped = err;
    this.opts.logger?.fatal({ err: err.message }, 'sequencer stopped');
    for (const p of [...batch, ...this.pool.splice(0)]) p.reject(err);
    if (this.timer) clearTimeout(this.timer);
  }

  /** Reads the lock, re-applies a staged batch, loads and verifies the right edge. */
  private async recover(notifyStaged = true): Promise<void> {
    const { store, staging, lock, signer, origin } = this.opts;
    const verifier = makeVerifier(origin, SIG_ED25519, signer.publicKey);
    this.checkpointVersions = {
      note: (await store.getVersioned(CHECKPOINT_KEY))?.version ?? null,
      json: (await store.getVersioned(CHECKPOINT_JSON_KEY))?.version ?? null,
    };
    let held = await lock.read();
    if (!held) {
      const timestamp = new Date(this.now()).toISOString();
      const signed = await signCheckpoint({ origin, size: 0, root: RightEdge.empty().root() }, signer);
      const state: LockState = { size: 0, root: toHex(signed.root), timestamp, note: signed.note };
      await lock.swap(null, state);
      held = await lock.read();
      if (!held) throw new Error('lock record vanished after creation');
    }
    const { state, version } = held;
    const opened = openCheckpoint(state.note, verifier);
    if (opened.size !== state.size || toHex(opened.root) !== state.root) throw new Error('lock record note does not match its size and root');
    const checkpoint: PublishedCheckpoint = { ...opened, timestamp: state.timestamp };
    this.lockVersion = version;

    const stagedData = state.staged ? await staging.get(state.staged.key) : null;
    if (state.staged && stagedData) {
      const records = decodeBundle(stagedData, state.staged.key, Number.MAX_SAFE_INTEGER);
      const base = await loadEdge(store, state.staged.fromSize, hashFromHex(state.staged.fromRoot));
      const result = base.append(records);
      if (!bytesEqual(result.root, checkpoint.root) || result.edge.size !== checkpoint.size) {
        throw new Error(`staged batch ${state.staged.key} does not reproduce the committed root`);
      }
      this.current = checkpoint;
      await this.apply(result, checkpoint, state.staged.key);
      this.opts.logger?.info({ size: checkpoint.size }, 're-applied a staged batch');
      if (notifyStaged) await this.notify({
        fromSize: state.staged.fromSize,
        entries: records.map((r) => parseCanonicalEntry(r)),
        entryHashes: result.entryHashes,
        checkpoint,
      });
      return;
    }
    this.edge = await loadEdge(store, checkpoint.size, checkpoint.root);
    this.current = checkpoint;
    const published = await store.get(CHECKPOINT_KEY);
    if (!published || Buffer.from(published).toString('utf8') !== checkpoint.note) await this.writePublicCheckpoint(checkpoint);
  }
}
