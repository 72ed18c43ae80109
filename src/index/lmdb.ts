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
import { anchorIdentity } from '../core/duplicates.js';
import type { IntegratedBatch } from '../sequencer/contract.js';
import { labelKey } from './keys.js';
import { type ArtifactMatch, type ArtifactPage, INDEX_SCHEMA, type LookupIndex } from './types.js';

// Rows: a digest → its earliest leaf; an artifact id → its latest leaf; an anchor identity →
// its earliest leaf (keyed as the index's layout says); n:<label key>:<artifact id> → the
// latest leaf of that artifact (text: a label's ids are one range); t:<type> → entries of the type.
const SIZE_KEY = 'meta:size';
const SCHEMA_KEY = 'meta:schema';

/**
 * How the point-lookup rows are keyed. Layout 2 (every index created or rebuilt now): rowKey's
 * bytes. Layout 1 (indexes written before it): the text `d:<digest>`, `a:<artifact id>`,
 * `k:<identity>`, still read and extended as they are, so an upgrade never waits for a
 * rebuild; `stele index rebuild` writes it again in layout 2.
 */
type Layout = 1 | 2;
/**
 * What `meta:schema` holds for each layout: the rows' schema, × 100 + 2 for layout 2. Versions
 * before layout 2 rebuild any index not marked with the bare schema: a downgrade rebuilds a
 * layout-2 index, and never misreads its rows.
 */
const SCHEMA_MARKS: Readonly<Record<Layout, number>> = { 1: INDEX_SCHEMA, 2: INDEX_SCHEMA * 100 + 2 };
const COMMIT_EVERY_MS = 250;

/**
 * The first byte of each point-lookup row's key: below any text key's first byte (ordered-binary
 * writes a string from 0x1b up), so the two never meet. A value not in its usual form (which
 * the log's own entries never hold) is keyed by its text under the tag + 0x10.
 */
const TEXT_FORM = 0x10;
/** The first byte of every text key as ordered-binary writes it. */
const TEXT_KEYS_FROM = 0x1b;

/** Each point-lookup row kind's key parts: its tag byte (layout 2) and its text prefix (layout 1). */
const ROW_KINDS = {
  digest: { tag: 0x01, prefix: 'd' },
  artifact: { tag: 0x02, prefix: 'a' },
  anchor: { tag: 0x03, prefix: 'k' },
} as const;
type RowKind = keyof typeof ROW_KINDS;
const HEX_32 = /^[0-9a-f]{64}$/;
const ARTIFACT_HEX = /^art_([0-9a-f]{24})$/;

/**
 * The key of a point-lookup row: its tag byte and the value's bytes (33 or 13 bytes, where the
 * text `d:<64 hex>` took 66: a million entries' tree is a third smaller and a level shallower).
 */
export function rowKey(kind: RowKind, value: string): Buffer {
  const hex = kind === 'artifact' ? ARTIFACT_HEX.exec(value)?.[1] : HEX_32.test(value) ? value : undefined;
  if (hex === undefined) return Buffer.concat([Buffer.of(ROW_KINDS[kind].tag + TEXT_FORM), Buffer.from(value)]);
  const key = Buffer.allocUnsafe(1 + hex.length / 2);
  key[0] = ROW_KINDS[kind].tag;
  key.write(hex, 1, 'hex');
  return key;
}

/**
 * A failed LMDB commit (a full disk) rejects, besides the transaction's promise that commit()
 * handles, internal promises of lmdb's own that nothing can reach, which would end the
 * process. Those failures are already reported and retried here; any other unhandled
 * rejection still ends the process, as Node's default does.
 */
function ignoreLmdbCommitRejections(): void {
  if (process.listeners('unhandledRejection').includes(onUnhandledRejection)) return;
  process.on('unhandledRejection', onUnhandledRejection);
}

function onUnhandledRejection(reason: unknown): void {
  const commitError = (reason as { commitError?: unknown } | null)?.commitError;
  if (commitError instanceof Promise) {
    commitError.catch(() => undefined);
    return;
  }
  throw reason;
}

export class IndexGapError extends Error {
  override name = 'IndexGapError';
}

/** What batches not yet committed add: the same keys as the database, with their leaves. */
interface Pending {
  /** The index size once this batch is in. */
  readonly end: number;
  readonly digests: Map<string, number>;
  readonly artifacts: Map<string, number>;
  readonly anchors: Map<string, number>;
  /** `<label key>:<artifact id>` → latest leaf. */
  readonly labels: Map<string, number>;
  readonly counts: Map<string, number>;
}

/**
 * LMDB's own messages name no file ("Permission denied: Attempting to setup locks"): the
 * error says which directory, and keeps the errno code (so the CLI exits 3, an I/O error).
 */
function indexOpenError(path: string, e: unknown): Error {
  const err = e as NodeJS.ErrnoException;
  const why = (err?.message ?? String(e)).split('\n')[0];
  const wrapped: NodeJS.ErrnoException = new Error(`cannot open the lookup index ${path}: ${why}`, { cause: e });
  const code = err?.code ?? (/permission denied/i.test(why ?? '') ? 'EACCES' : undefined);
  if (code !== undefined) wrapped.code = code;
  wrapped.path = path;
  return wrapped;
}

export class LmdbIndex implements LookupIndex {
  private readonly db: RootDatabase<number, string | Buffer>;
  private layout: Layout = 2;
  /** Batches not committed yet, oldest first; the first `handed` of them are in a transaction. */
  private readonly pending: Pending[] = [];
  private handed = 0;
  private commitTimer: NodeJS.Timeout | undefined;
  /** Leaves covered, committed or not. */
  private size: number;
  private writes: Promise<void> = Promise.resolve();

  constructor(
    path: string,
    private readonly logger?: Logger,
  ) {
    ignoreLmdbCommitRejections();
    try {
      mkdirSync(path, { recursive: true });
      this.db = open<number, string | Buffer>({ path, compression: false });
      this.size = this.db.get(SIZE_KEY) ?? 0;
      if (this.size === 0) this.markEmpty();
      // A mark that says text keys over rows keyed by bytes (a development build wrote such
      // an index) stays in layout 2, where the mark is wrong: outdated, so it is rebuilt.
      else if (this.db.get(SCHEMA_KEY) === SCHEMA_MARKS[1] && !this.hasByteRows()) this.layout = 1;
    } catch (e) {
      throw indexOpenError(path, e);
    }
  }

  async onBatch(batch: IntegratedBatch): Promise<void> {
    const end = batch.fromSize + batch.count;
    if (end <= this.size) return;
    if (batch.fromSize > this.size)
      throw new IndexGapError(`index holds ${this.size} leaves; batch starts at ${batch.fromSize}`);
    const p: Pending = {
      end,
      digests: new Map(),
      artifacts: new Map(),
      anchors: new Map(),
      labels: new Map(),
      counts: new Map(),
    };
    for (let seq = this.size; seq < end; seq++) {
      const e = batch.entryAt(seq);
      // The earliest entry of a digest wins: keep one already indexed or pending.
      if (!p.digests.has(e.digest) && this.findDigest(e.digest) === undefined) p.digests.set(e.digest, seq);
      const identity = anchorIdentity(e);
      if (identity !== undefined && !p.anchors.has(identity) && this.findAnchorNow(identity) === undefined)
        p.anchors.set(identity, seq);
      if (e.artifactId) {
        p.artifacts.set(e.artifactId, seq);
        if (e.artifact !== undefined) p.labels.set(`${labelKey(e.artifact)}:${e.artifactId}`, seq);
      }
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
    // Batches before the group still pending are ones whose commit failed (a full disk):
    // they go first, in the same transaction, so the index never skips a batch.
    const written = this.writes.then(() =>
      this.commit(this.pending.slice(0, this.pending.indexOf(group[group.length - 1]!) + 1)),
    );
    this.writes = written.catch((e: unknown) => {
      // lmdb also rejects a `commitError` promise of its own; unhandled, it would end the process.
      (e as { commitError?: Promise<unknown> }).commitError?.catch(() => undefined);
      // The batches stay in memory (lookups still see them) and are written with the next group.
      this.logger?.error(
        { err: (e as Error).message },
        'index write failed (a full disk?); retried with the next batch, or re-indexed at the next start',
      );
    });
  }

  private async commit(group: readonly Pending[]): Promise<void> {
    // putSync inside the transaction writes into it without a promise per put: a failed
    // commit (a full disk) then rejects only the transaction's promise, which is handled.
    await this.db.transaction(() => {
      const counts = new Map<string, number>();
      for (const p of group) {
        // onBatch kept only digests new to the index (nothing else writes it meanwhile).
        for (const [digest, seq] of p.digests) this.putRow('digest', digest, seq);
        for (const [artifactId, seq] of p.artifacts) this.putRow('artifact', artifactId, seq);
        for (const [identity, seq] of p.anchors) this.putRow('anchor', identity, seq);
        for (const [labelled, seq] of p.labels) this.db.putSync(`n:${labelled}`, seq);
        for (const [type, n] of p.counts) counts.set(type, (counts.get(type) ?? 0) + n);
      }
      for (const [type, n] of counts) this.db.putSync(`t:${type}`, (this.db.get(`t:${type}`) ?? 0) + n);
      this.db.putSync(SIZE_KEY, group[group.length - 1]!.end);
    });
    // Commits run in batch order: the group is the oldest pending.
    this.pending.splice(0, group.length);
    this.handed -= group.length;
  }

  /** A point-lookup row's key in this index's layout. */
  private key(kind: RowKind, value: string): Buffer | string {
    return this.layout === 2 ? rowKey(kind, value) : `${ROW_KINDS[kind].prefix}:${value}`;
  }

  private putRow(kind: RowKind, value: string, seq: number): void {
    this.db.putSync(this.key(kind, value), seq);
  }

  private getRow(kind: RowKind, value: string): number | undefined {
    return this.db.get(this.key(kind, value));
  }

  /** Whether any point-lookup row is keyed by bytes (all sort below every text key). */
  private hasByteRows(): boolean {
    for (const _ of this.db.getKeys({ start: Buffer.of(0x01), end: Buffer.of(TEXT_KEYS_FROM), limit: 1 })) return true;
    return false;
  }

  /** Marks an empty database as holding this schema in layout 2. */
  private markEmpty(): void {
    this.layout = 2;
    this.db.putSync(SCHEMA_KEY, SCHEMA_MARKS[2]);
  }

  private findDigest(digest: string): number | undefined {
    for (const p of this.pending) {
      const seq = p.digests.get(digest);
      if (seq !== undefined) return seq;
    }
    return this.getRow('digest', digest);
  }

  private findAnchorNow(identity: string): number | undefined {
    for (const p of this.pending) {
      const seq = p.anchors.get(identity);
      if (seq !== undefined) return seq;
    }
    return this.getRow('anchor', identity);
  }

  async findAnchor(identity: string): Promise<number | undefined> {
    return this.findAnchorNow(identity);
  }

  async searchArtifact(label: string, limit: number, after = ''): Promise<ArtifactPage> {
    const key = labelKey(label);
    const found = new Map<string, number>();
    // One more than asked (and the cursor itself, skipped) tells whether more follow.
    for (const { key: row, value } of this.db.getRange({
      start: `n:${key}:${after}`,
      end: `n:${key};`,
      limit: limit + 2,
    })) {
      const id = String(row).slice(key.length + 3);
      if (id > after) found.set(id, value);
    }
    // Pending batches are newer than the database: their leaves win, oldest batch first.
    const prefix = `${key}:`;
    for (const p of this.pending)
      for (const [labelled, seq] of p.labels)
        if (labelled.startsWith(prefix) && labelled.slice(prefix.length) > after)
          found.set(labelled.slice(prefix.length), seq);
    const matches: ArtifactMatch[] = [...found]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([artifactId, seq]) => ({ artifactId, seq }));
    return { matches: matches.slice(0, limit), more: matches.length > limit };
  }

  async outdated(): Promise<boolean> {
    return this.db.get(SCHEMA_KEY) !== SCHEMA_MARKS[this.layout];
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
    return this.getRow('artifact', artifactId);
  }

  async indexedSize(): Promise<number> {
    return this.size;
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    const committed = this.db.get(SIZE_KEY) ?? 0;
    for (const { key, value } of this.db.getRange({ start: 't:', end: 't;' })) out[String(key).slice(2)] = value;
    // A batch whose transaction has just committed is counted once, from the database.
    for (const p of this.pending)
      if (p.end > committed) for (const [type, n] of p.counts) out[type] = (out[type] ?? 0) + n;
    return out;
  }

  async clear(): Promise<void> {
    await this.flush();
    this.pending.length = 0;
    this.handed = 0;
    await this.db.clearAsync();
    this.markEmpty();
    this.size = 0;
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
