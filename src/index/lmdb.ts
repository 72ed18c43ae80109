// The embedded lookup index on LMDB. Idempotent: a batch seen twice (recovery re-applying a
// staged batch) changes nothing, and a row written twice is one row.
//
// Writes are behind the batch, not in its way: onBatch records the batch in memory (so a
// lookup right after an anchor is acknowledged finds it) and returns; the batches of the
// last COMMIT_EVERY_MS commit together in the background, in batch order, their size and
// counts in the last of the transactions their rows take (rowsPerTransaction). (A
// commit is an fsync: with one per batch, small batches back to back had an fsync beside
// every checkpoint write, and its renames took 5 ms instead of 1.) The index is derived
// data: a batch whose transaction a crash loses is indexed again from the record bundles
// at the next start (src/index/catchup.ts), from the size the index itself records.
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type RootDatabase, open } from 'lmdb';
import type { Logger } from 'pino';
import { type Maybe, andThen } from '../read/maybe.js';
import type { IntegratedBatch } from '../sequencer/contract.js';
import { DIGEST_HINTS_DEFAULT_MIB, DigestHints } from './digest-hints.js';
import { anchorTag } from './keys.js';
import { ARTIFACT_HEX, type BatchRows, batchRows, shortOf } from './batch-rows.js';
import {
  ARTIFACT_ROW,
  DIGEST_ROW,
  LABEL_ROW,
  MAX_SEQ,
  RowSet,
  artifactRowSeq,
  digestRowSeq,
  digestRowTag,
  labelRow,
  labelRowArtifactId,
} from './lmdb-rows.js';
import {
  type ArtifactMatch,
  type ArtifactPage,
  type Confirm,
  INDEX_SCHEMA,
  type LookupIndex,
  firstConfirmed,
  IndexGapError,
} from './types.js';

// Layout 3: the root database holds only the meta rows (`meta:size`, `meta:schema`,
// `meta:salt`, and t:<type> → entries of that type); the lookup rows are in three row sets
// of fixed-width values (src/index/lmdb-rows.ts). A short key can be shared by two values,
// and a restored index can be stale: every row is a candidate that the caller's Confirm
// checks against the record it names (src/index/types.ts).
const SIZE_KEY = 'meta:size';
const SCHEMA_KEY = 'meta:schema';
const SALT_KEY = 'meta:salt';
/** Present while `stele index rebuild` fills the index: a rerun continues from `meta:size`. */
const REBUILDING_KEY = 'meta:rebuilding';
/**
 * What `meta:schema` holds: the rows' schema × 100 + the layout. Any other mark (the bare
 * schema 2 of layout 1, 202 of layout 2) is an older index: outdated, rebuilt from the
 * record bundles, and never read meanwhile. Earlier versions likewise rebuild this one.
 */
const SCHEMA_MARK = INDEX_SCHEMA * 100 + 3;
const COMMIT_EVERY_MS = 250;

/** The digest lookups that earn the digest hints (src/index/digest-hints.ts) their memory. */
const HINT_AFTER_LOOKUPS = 1000;
/** Digest rows read into the hints per turn of the event loop while they are built. */
const HINT_ROWS_PER_STEP = 8192;
const ALL_ROWS = Buffer.alloc(0);

/** The digest hints of an index: their budget in bytes (0: none), and after how many digest lookups they are built. */
export interface DigestHintOptions {
  /** Default DIGEST_HINTS_DEFAULT_MIB. */
  readonly bytes?: number;
  readonly afterLookups?: number;
}
/**
 * Rows of uncommitted batches beyond which onBatch waits for them to commit. A sequencer
 * filling faster than the index commits (its commits slow as it grows) would otherwise hold
 * ever more batches in memory: a 10 M-entry fill ran out of heap at 6 M. Waiting slows the
 * batches instead.
 */
const MAX_PENDING_ROWS = 1_000_000;

/**
 * Rows per transaction, for an index of `size` entries: about a thousandth of the entries'.
 * Rows land on pages at random, and every page a transaction changes is copied, its old copy
 * free only two transactions later: a transaction writing a large share of the index would
 * leave the file up to three times the rows' pages (a large batch, or the rebuild's 250 ms
 * groups, did: 160–180 bytes per entry at 200,000). A thousandth keeps the free pages near a
 * fifth of the file; bounded below so a young index is not one fsync per entry, and above
 * so one transaction's copies stay within LMDB's dirty-page list.
 */
function rowsPerTransaction(size: number): number {
  return 3 * Math.min(20_000, Math.max(256, Math.floor(size / 1000)));
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

/** What batches not yet committed add: exact values (lookups), and the rows to write. */
type Pending = BatchRows;

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

/** The open database and its row sets. */
interface Opened {
  readonly root: RootDatabase<number | Buffer, string>;
  readonly digests: RowSet;
  readonly artifacts: RowSet;
  readonly labels: RowSet;
}

function openAt(path: string): Opened {
  mkdirSync(path, { recursive: true });
  const root = open<number | Buffer, string>({ path, compression: false, maxDbs: 4 });
  return {
    root,
    digests: new RowSet(root, 'digest', DIGEST_ROW),
    artifacts: new RowSet(root, 'artifact', ARTIFACT_ROW),
    labels: new RowSet(root, 'label', LABEL_ROW),
  };
}

const rowCount = (p: Pending): number => p.rows.digest.length + p.rows.artifact.length + p.rows.label.length;

/** The fixed-width rows of `packed` buffers. */
function* rowsOf(packed: readonly Uint8Array[], width: number): Generator<Buffer> {
  for (const p of packed) {
    const b = Buffer.from(p.buffer, p.byteOffset, p.byteLength);
    for (let at = 0; at < b.length; at += width) yield b.subarray(at, at + width);
  }
}

export class LmdbIndex implements LookupIndex {
  private db: Opened;
  private salt: Buffer;
  /** Marked by an older schema or layout at open: nothing is read or written until clear(). */
  private old: boolean;
  /** Batches not committed yet, oldest first; the first `handed` of them are in a transaction. */
  private readonly pending: Pending[] = [];
  private handed = 0;
  private commitTimer: NodeJS.Timeout | undefined;
  /** Leaves covered, committed or not. */
  private size: number;
  private writes: Promise<void> = Promise.resolve();
  /** Rows of the batches not yet committed. */
  private pendingRows = 0;
  /** The digest rows' short keys in memory once built whole (see hintFor). */
  private hints: DigestHints | undefined;
  /** The hints while they are read from the rows; commits meanwhile add theirs too. */
  private hintsBuilding: DigestHints | undefined;
  /** Bumped whenever the hints are dropped: a build under way of an older generation stops. */
  private hintGeneration = 0;
  /** Digest lookups made before the hints were built. */
  private digestLookups = 0;
  /** Set once the rows outgrew the hints' budget (until a rebuild or clear). */
  private hintsGivenUp = false;

  constructor(
    private readonly path: string,
    private readonly logger?: Logger,
    private readonly maxPendingRows = MAX_PENDING_ROWS,
    private readonly hintOptions: DigestHintOptions = {},
  ) {
    ignoreLmdbCommitRejections();
    try {
      this.db = openAt(path);
      const { root } = this.db;
      this.size = (root.get(SIZE_KEY) as number | undefined) ?? 0;
      this.old = this.size > 0 && root.get(SCHEMA_KEY) !== SCHEMA_MARK;
      this.salt = this.size === 0 ? this.markEmpty() : ((root.get(SALT_KEY) as Buffer | undefined) ?? Buffer.alloc(0));
    } catch (e) {
      throw indexOpenError(path, e);
    }
  }

  /** Marks an empty database with this layout and a new salt. */
  private markEmpty(): Buffer {
    const salt = randomBytes(16);
    this.db.root.putSync(SCHEMA_KEY, SCHEMA_MARK);
    this.db.root.putSync(SALT_KEY, salt);
    this.old = false;
    return salt;
  }

  private short(value: string): Buffer {
    return shortOf(this.salt, value);
  }

  async onBatch(batch: IntegratedBatch): Promise<void> {
    if (this.old) throw new Error('the lookup index is of an older version: clear it before indexing');
    const end = batch.fromSize + batch.count;
    if (end <= this.size) return;
    if (batch.fromSize > this.size)
      throw new IndexGapError(`index holds ${this.size} leaves; batch starts at ${batch.fromSize}`);
    if (end - 1 > MAX_SEQ) throw new Error(`the lookup index holds at most ${MAX_SEQ + 1} entries`);
    const p = batchRows(this.salt, this.size, end, (seq) => batch.entryAt(seq));
    this.pending.push(p);
    this.pendingRows += rowCount(p);
    this.size = end;
    this.commitTimer ??= setTimeout(() => this.commitPending(), COMMIT_EVERY_MS).unref();
    if (this.pendingRows > this.maxPendingRows) await this.flush();
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
    const { root, digests, artifacts, labels } = this.db;
    const limit = rowsPerTransaction((root.get(SIZE_KEY) as number | undefined) ?? 0);
    let rows: [RowSet, Buffer][] = [];
    // putSync inside the transaction writes into it without a promise per put: a failed
    // commit (a full disk) then rejects only the transaction's promise, which is handled.
    const write = (more: () => void = () => undefined) => {
      const these = rows;
      rows = [];
      return root.transaction(() => {
        for (const [set, r] of these) set.put(r);
        more();
      });
    };
    for (const p of group) {
      for (const [set, list] of [
        [digests, p.rows.digest],
        [artifacts, p.rows.artifact],
        [labels, p.rows.label],
      ] as const) {
        for (const r of list) {
          rows.push([set, r]);
          // Rows without the size that covers them are harmless (each is only a candidate,
          // and indexing the batch again adds them again, as one row each).
          if (rows.length >= limit) await write();
        }
      }
    }
    // The last rows, the counts and the size together: the batches are in.
    await write(() => {
      const counts = new Map<string, number>();
      for (const p of group) for (const [type, n] of p.counts) counts.set(type, (counts.get(type) ?? 0) + n);
      for (const [type, n] of counts)
        root.putSync(`t:${type}`, ((root.get(`t:${type}`) as number | undefined) ?? 0) + n);
      root.putSync(SIZE_KEY, group[group.length - 1]!.end);
    });
    for (const p of group) for (const r of p.rows.digest) this.hint(r);
    // Commits run in batch order: the group is the oldest pending.
    for (const p of group) this.pendingRows -= rowCount(p);
    this.pending.splice(0, group.length);
    this.handed -= group.length;
  }

  /**
   * The rebuild's write (src/index/rebuild.ts): rows of leaves up to `end`, packed side by
   * side per set, written in one transaction with the counts and the size, so the size is a
   * durable high-water mark a rerun continues from. (Not sorted first: rows inserted in key
   * order fill each page only half before it splits; in hash order about 70 %.)
   */
  async writeRows(chunk: {
    readonly end: number;
    readonly digest: readonly Uint8Array[];
    readonly artifact: readonly Uint8Array[];
    readonly label: readonly Uint8Array[];
    readonly counts: ReadonlyMap<string, number>;
  }): Promise<void> {
    await this.flush();
    // The rebuild's rows come by the million: the hints are read again after it, if they still fit.
    this.dropHints();
    const { root, digests, artifacts, labels } = this.db;
    const sets = [
      [digests, rowsOf(chunk.digest, digests.width)],
      [artifacts, rowsOf(chunk.artifact, artifacts.width)],
      [labels, rowsOf(chunk.label, labels.width)],
    ] as const;
    await root.transaction(() => {
      for (const [set, rows] of sets) for (const r of rows) set.put(r);
      for (const [type, n] of chunk.counts)
        root.putSync(`t:${type}`, ((root.get(`t:${type}`) as number | undefined) ?? 0) + n);
      root.putSync(SIZE_KEY, chunk.end);
    });
    this.size = chunk.end;
  }

  /**
   * Starts `stele index rebuild`, or continues one a kill interrupted: true when it continues
   * (the rows and size so far are kept), false when the index was emptied to start again.
   */
  async beginRebuild(): Promise<boolean> {
    if (!this.old && this.db.root.get(REBUILDING_KEY) !== undefined) return true;
    await this.clear();
    await this.db.root.put(REBUILDING_KEY, 1);
    return false;
  }

  /** Ends a rebuild: the index is whole. */
  async endRebuild(): Promise<void> {
    await this.flush();
    await this.db.root.remove(REBUILDING_KEY);
  }

  /** The index's salt: the rebuild's threads make the rows' short keys with it. */
  saltBytes(): Uint8Array {
    return Uint8Array.from(this.salt);
  }

  /**
   * Leaves that may hold a digest (or, given `identity`, that anchor), earliest first: the
   * committed rows (an anchor's among its digest's, with its identity's tag), then the
   * pending batches' exact values; never `refused` (a leaf already found not to hold it).
   */
  private *digestCandidates(digest: string, identity?: string, refused?: number): Generator<number> {
    if (this.old) return;
    const lower = digest.toLowerCase();
    const tag = identity === undefined ? undefined : anchorTag(identity);
    for (const r of this.db.digests.startingWith(this.short(lower))) {
      const seq = digestRowSeq(r);
      if ((tag === undefined || digestRowTag(r) === tag) && seq !== refused) yield seq;
    }
    yield* this.pendingDigestCandidates(lower, identity, refused);
  }

  /** The pending batches' leaves of a (lowercase) digest or, given `identity`, of that anchor. */
  private *pendingDigestCandidates(lower: string, identity?: string, refused?: number): Generator<number> {
    for (const p of [...this.pending]) {
      const seq = identity === undefined ? p.digests.get(lower) : p.anchors.get(identity);
      if (seq !== undefined && seq !== refused) yield seq;
    }
  }

  /** Leaves of an artifact id's rows, latest first: the pending batches', then the committed ones. */
  private *artifactCandidates(artifactId: string): Generator<number> {
    if (this.old) return;
    for (const p of [...this.pending].reverse()) {
      const seq = p.artifacts.get(artifactId);
      if (seq !== undefined) yield seq;
    }
    for (const r of this.db.artifacts.startingWith(this.short(artifactId))) yield artifactRowSeq(r);
  }

  /** The artifact ids a label's rows name after `after`, in order, the pending batches' merged in. */
  private *labelCandidates(label: string, after: string): Generator<string> {
    if (this.old) return;
    const fresh = new Set<string>();
    for (const p of this.pending) for (const [id, l] of p.labels) if (l === label && id > after) fresh.add(id);
    const queued = [...fresh].sort();
    const short = this.short(label);
    const afterHex = ARTIFACT_HEX.exec(after)?.[1];
    const from = afterHex === undefined ? short : labelRow(short, afterHex);
    let last = '';
    for (const r of this.db.labels.startingWith(short, from)) {
      const id = labelRowArtifactId(r);
      if (id <= after) continue;
      while (queued.length > 0 && queued[0]! <= id) {
        const q = queued.shift()!;
        if (q !== id) yield q;
      }
      if (id !== last) yield id;
      last = id;
    }
    yield* queued;
  }

  findByDigest(digest: string, confirm: Confirm): Maybe<number | undefined> {
    if (this.old) return undefined;
    // Usually the first row under the digest's short key names the answer: that row is the
    // candidates' first, so taking it when confirmed answers as the walk below would. With no
    // such row no committed row has the key, and only the pending batches are left to ask.
    // The hints, once built, name that row's leaf without the seek.
    const lower = digest.toLowerCase();
    const short = this.short(lower);
    const first = this.hintFor(short) ?? this.firstRowSeq(short);
    if (first === undefined) return firstConfirmed(this.pendingDigestCandidates(lower), confirm);
    const confirmed = confirm(first);
    if (confirmed === true) return first;
    return andThen(confirmed, (yes) =>
      yes ? first : firstConfirmed(this.digestCandidates(lower, undefined, first), confirm),
    );
  }

  /** The leaf of the first committed digest row under `short`, if any. */
  private firstRowSeq(short: Buffer): number | undefined {
    const row = this.db.digests.firstStartingWith(short);
    return row === undefined ? undefined : digestRowSeq(row);
  }

  findAnchor(identity: string, digest: string, confirm: Confirm): Maybe<number | undefined> {
    return firstConfirmed(this.digestCandidates(digest, identity), confirm);
  }

  findByArtifact(artifactId: string, confirm: Confirm): Maybe<number | undefined> {
    return firstConfirmed(this.artifactCandidates(artifactId), confirm);
  }

  async searchArtifact(
    label: string,
    limit: number,
    after: string | undefined,
    confirm: (artifactId: string, seq: number) => Promise<boolean>,
  ): Promise<ArtifactPage> {
    const matches: ArtifactMatch[] = [];
    // One more than asked tells whether more follow.
    for (const artifactId of this.labelCandidates(label, after ?? '')) {
      const seq = await this.findByArtifact(artifactId, (s) => confirm(artifactId, s));
      if (seq !== undefined) matches.push({ artifactId, seq });
      if (matches.length > limit) break;
    }
    return { matches: matches.slice(0, limit), more: matches.length > limit };
  }

  async outdated(): Promise<boolean> {
    return this.old;
  }

  /** Leaves indexed: none while the index is of an older version (its rows are not read). */
  async indexedSize(): Promise<number> {
    return this.old ? 0 : this.size;
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    if (this.old) return out;
    const { root } = this.db;
    const committed = (root.get(SIZE_KEY) as number | undefined) ?? 0;
    for (const { key, value } of root.getRange({ start: 't:', end: 't;' })) out[String(key).slice(2)] = value as number;
    // A batch whose transaction has just committed is counted once, from the database.
    for (const p of this.pending)
      if (p.end > committed) for (const [type, n] of p.counts) out[type] = (out[type] ?? 0) + n;
    return out;
  }

  /**
   * What the index holds, for the byte figures (bench/scale.ts, the tests): rows per set,
   * their bytes (a fixed-width row has no per-row overhead in LMDB), and the file's bytes.
   */
  footprint(): { rows: { digest: number; artifact: number; label: number }; liveBytes: number; fileBytes: number } {
    const { digests, artifacts, labels } = this.db;
    const rows = { digest: digests.count(), artifact: artifacts.count(), label: labels.count() };
    return {
      rows,
      liveBytes: rows.digest * digests.width + rows.artifact * artifacts.width + rows.label * labels.width,
      fileBytes: statSync(join(this.path, 'data.mdb')).size,
    };
  }

  /**
   * Starts again from an empty file, not an emptied one: LMDB never shrinks its file, and an
   * older layout's rows (or a larger log's) would keep their pages.
   */
  async clear(): Promise<void> {
    await this.flush();
    this.dropHints();
    this.pending.length = 0;
    this.pendingRows = 0;
    this.handed = 0;
    await this.db.root.close();
    for (const f of ['data.mdb', 'lock.mdb']) rmSync(join(this.path, f), { force: true });
    this.db = openAt(this.path);
    this.salt = this.markEmpty();
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
    this.dropHints();
    await this.db.root.close();
  }

  /**
   * The earliest leaf a digest's short key names, from the hints once they are whole: the
   * leaf of the key's first row, which the hints give without a seek. The hints are built
   * after `afterLookups` digest lookups (a server answering few never pays their memory).
   */
  private hintFor(short: Buffer): number | undefined {
    if (this.hints) return this.hints.leafOf(short);
    if (this.hintsBuilding || this.hintsGivenUp || this.hintBytes === 0) return undefined;
    if (++this.digestLookups >= (this.hintOptions.afterLookups ?? HINT_AFTER_LOOKUPS)) this.buildHints();
    return undefined;
  }

  /** Reads every digest row into new hints, a step per turn of the event loop, unless they would not fit. */
  private buildHints(): void {
    const rows = this.db.digests.count();
    if (!DigestHints.fit(this.hintBytes, rows)) {
      this.giveUpHints();
      return;
    }
    const hints = new DigestHints(this.hintBytes, rows);
    const generation = this.hintGeneration;
    const started = performance.now();
    this.hintsBuilding = hints;
    let from: Buffer = ALL_ROWS;
    const step = () => {
      if (generation !== this.hintGeneration) return;
      let read = 0;
      for (const row of this.db.digests.startingWith(ALL_ROWS, from)) {
        if (!hints.add(row, 0, digestRowSeq(row))) {
          this.giveUpHints();
          return;
        }
        from = row;
        if (++read === HINT_ROWS_PER_STEP) break;
      }
      if (read === HINT_ROWS_PER_STEP) return void setTimeout(step, 0).unref();
      this.hints = hints;
      this.hintsBuilding = undefined;
      this.logger?.info(
        { rows: hints.rows, bytes: hints.bytes, ms: Math.round(performance.now() - started) },
        'digest lookups start from the hints in memory',
      );
    };
    setTimeout(step, 0).unref();
  }

  private get hintBytes(): number {
    return this.hintOptions.bytes ?? DIGEST_HINTS_DEFAULT_MIB * 2 ** 20;
  }

  /** Adds a committed digest row to the hints (built or being built). */
  private hint(row: Buffer): void {
    const hints = this.hints ?? this.hintsBuilding;
    if (hints && !hints.add(row, 0, digestRowSeq(row))) this.giveUpHints();
  }

  /** Drops the hints and stops a build; they are built again after as many lookups as at first. */
  private dropHints(): void {
    this.hints = undefined;
    this.hintsBuilding = undefined;
    this.hintGeneration++;
    this.digestLookups = 0;
    this.hintsGivenUp = false;
  }

  /** The digest rows outgrew the hints' budget: lookups seek LMDB from now on (until a rebuild or clear). */
  private giveUpHints(): void {
    this.dropHints();
    this.hintsGivenUp = true;
    this.logger?.info("the digest rows outgrew the hints' budget: digest lookups seek the index");
  }
}
