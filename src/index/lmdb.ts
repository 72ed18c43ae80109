// The embedded lookup index on LMDB. One write transaction per batch; idempotent, so a
// batch seen twice (recovery re-applying a staged batch) changes nothing.
//
// Writes are behind the batch, not in its way: onBatch records the batch in memory (so a
// lookup right after an anchor is acknowledged finds it) and returns; the batches of the
// last COMMIT_EVERY_MS commit together in one background transaction, in batch order. (A
// commit is an fsync: with one per batch, small batches back to back had an fsync beside
// every checkpoint write, and its renames took 5 ms instead of 1.) The index is derived
// data: a batch whose transaction a crash loses is indexed again from the record bundles
// at the next start (src/index/catchup.ts), from the size the index itself records.
import { mkdirSync } from 'node:fs';
import { type RootDatabase, open } from 'lmdb';
import type { Logger } from 'pino';
import type { IntegratedBatch } from '../sequencer/sequencer.js';
import type { LookupIndex } from './types.js';

const SIZE_KEY = 'meta:size';
const COMMIT_EVERY_MS = 250;

export class IndexGapError extends Error {
  override name = 'IndexGapError';
}

/** What batches not yet committed add: the same keys as the database, with their leaves. */
interface Pending {
  /** The index size once this batch is in. */
  readonly end: number;
  readonly digests: Map<string, number>;
  readonly artifacts: Map<string, number>;
  readonly counts: Map<string, number>;
}

export class LmdbIndex implements LookupIndex {
  private readonly db: RootDatabase<number, string>;
  /** Batches not committed yet, oldest first; the first `handed` of them are in a transaction. */
  private readonly pending: Pending[] = [];
  private handed = 0;
  private commitTimer: NodeJS.Timeout | undefined;
  /** Leaves covered, committed or not. */
  private size: number;
  private writes: Promise<void> = Promise.resolve();
  /**
   * Set by a failed transaction: later batches then stay in memory only. Committing them
   * would move the stored size past the lost batch, and the next start, which re-indexes
   * from the stored size, would never fill it in.
   */
  private writeFailed = false;

  constructor(
    path: string,
    private readonly logger?: Logger,
  ) {
    mkdirSync(path, { recursive: true });
    this.db = open<number, string>({ path, compression: false });
    this.size = this.db.get(SIZE_KEY) ?? 0;
  }

  async onBatch(batch: IntegratedBatch): Promise<void> {
    const end = batch.fromSize + batch.count;
    if (end <= this.size) return;
    if (batch.fromSize > this.size) throw new IndexGapError(`index holds ${this.size} leaves; batch starts at ${batch.fromSize}`);
    const p: Pending = { end, digests: new Map(), artifacts: new Map(), counts: new Map() };
    for (let seq = this.size; seq < end; seq++) {
      const e = batch.entryAt(seq);
      // The earliest entry of a digest wins: keep one already indexed or pending.
      if (!p.digests.has(e.digest) && this.findDigest(e.digest) === undefined) p.digests.set(e.digest, seq);
      if (e.artifactId) p.artifacts.set(e.artifactId, seq);
      p.counts.set(e.type, (p.counts.get(e.type) ?? 0) + 1);
    }
    this.pending.push(p);
    this.size = end;
    this.commitTimer ??= setTimeout(() => this.commitPending(), COMMIT_EVERY_MS).unref();
  }

  /** Hands every batch not yet handed to one transaction, queued behind those before. */
  private commitPending(): void {
    clearTimeout(this.commitTimer);
    this.commitTimer = undefined;
    const group = this.pending.slice(this.handed);
    if (group.length === 0) return;
    this.handed = this.pending.length;
    const written = this.writes.then(() => this.commit(group));
    this.writes = written.catch((e: unknown) => {
      // The batches stay in memory (lookups still see them); the next start re-indexes them.
      this.writeFailed = true;
      this.logger?.error({ err: (e as Error).message }, 'index write failed; these and later entries are re-indexed at the next start');
    });
  }

  private async commit(group: readonly Pending[]): Promise<void> {
    if (this.writeFailed) return;
    await this.db.transaction(() => {
      const counts = new Map<string, number>();
      for (const p of group) {
        // onBatch kept only digests new to the index (nothing else writes it meanwhile).
        for (const [digest, seq] of p.digests) this.db.put(`d:${digest}`, seq);
        for (const [artifactId, seq] of p.artifacts) this.db.put(`a:${artifactId}`, seq);
        for (const [type, n] of p.counts) counts.set(type, (counts.get(type) ?? 0) + n);
      }
      for (const [type, n] of counts) this.db.put(`t:${type}`, (this.db.get(`t:${type}`) ?? 0) + n);
      this.db.put(SIZE_KEY, group[group.length - 1]!.end);
    });
    // Commits run in batch order: the group is the oldest pending.
    this.pending.splice(0, group.length);
    this.handed -= group.length;
  }

  private findDigest(digest: string): number | undefined {
    for (const p of this.pending) {
      const seq = p.digests.get(digest);
      if (seq !== undefined) return seq;
    }
    return this.db.get(`d:${digest}`);
  }

  async findByDigest(digest: string): Promise<number | undefined> {
    return this.findDigest(digest);
  }

  async findByArtifact(artifactId: string): Promise<number | undefined> {
    // The most recent entry wins: the newest pending batch first.
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const seq = this.pending[i]!.artifacts.get(artifactId);
      if (seq !== undefined) return seq;
    }
    return this.db.get(`a:${artifactId}`);
  }

  async indexedSize(): Promise<number> {
    return this.size;
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    const committed = this.db.get(SIZE_KEY) ?? 0;
    for (const { key, value } of this.db.getRange({ start: 't:', end: 't;' })) out[key.slice(2)] = value;
    // A batch whose transaction has just committed is counted once, from the database.
    for (const p of this.pending) if (p.end > committed) for (const [type, n] of p.counts) out[type] = (out[type] ?? 0) + n;
    return out;
  }

  async clear(): Promise<void> {
    await this.flush();
    this.pending.length = 0;
    this.handed = 0;
    await this.db.clearAsync();
    this.size = 0;
    // The rebuild starts from nothing: a write lost before is now moot.
    this.writeFailed = false;
  }

  /** Commits every pending batch now and waits for it (a failed write is logged, as always). */
  async flush(): Promise<void> {
    this.commitPending();
    await this.writes;
  }

  /** Flushes, then closes the database. */
  async close(): Promise<void> {
    await this.flush();
    await this.db.close();
  }
}
