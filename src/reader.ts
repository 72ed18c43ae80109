// LogReader: proofs and entries computed from a published log's tiles, through a cache.
// Full tiles and bundles are immutable, so they are cached without expiry (LRU by bytes);
// partial ones only for a moment, since a newer width replaces them. A request plans every
// hash it needs first and reads each tile or bundle once: synchronously when all are
// cached (the common case on a warm replica), else after loading the missing ones.
import { LRUCache } from 'lru-cache';
import { type CanonicalEntry, parseCanonicalEntry } from './entry.js';
import { bytesEqual, leafHash } from './hash.js';
import { type HashPlan, planAll, planConsistency, planConsistencyWithRoots, planInclusion, planLeafHash, planTreeHash } from './merkle.js';
import type { ObjectReader } from './store/store.js';
import { type Bundle, HashTile, TILE_WIDTH, TileHashReader } from './tiles.js';
import { readCompactBundle, readHashTile } from './tilestore.js';
import { LogIntegrityError } from './sequencer/recover.js';

export interface LogReaderOptions {
  /** Bytes of tiles and bundles kept in memory (default 512 MiB: every level-0 tile and bundle of a ~1.5M-entry log). */
  readonly cacheBytes?: number;
  /** How long a partial tile may be reused, in ms (default 1,000). */
  readonly partialTtlMs?: number;
}

export interface ReaderStats {
  /** Objects fetched from the underlying reader. */
  fetches: number;
  /** Lookups answered from the cache. */
  hits: number;
  /** Hash tiles read (fetched or from the cache; bundles not counted): about one per tree level per proof. */
  hashTileReads: number;
}

export interface EntryAt {
  readonly seq: number;
  /** The record parsed (on first use: the API writes `canonical` instead). */
  readonly entry: CanonicalEntry;
  /** The record: the entry's canonical JSON. */
  readonly canonical: Uint8Array;
  readonly entryHash: Uint8Array;
  /** The leaf hash as the level-0 tile records it (checked against entryHash). */
  readonly leafHash: Uint8Array;
}

export interface EntryWithProof extends EntryAt {
  /** The entry's audit path in the tree it was read from. */
  readonly auditPath: Uint8Array[];
}

export interface ConsistencyAt {
  readonly firstRoot: Uint8Array;
  readonly secondRoot: Uint8Array;
  readonly proof: Uint8Array[];
}

type Cached = HashTile | Bundle;
type Maybe<T> = T | Promise<T>;

/** Per cached object: the LRU's node, key and bookkeeping, beyond the bytes it retains. */
const ENTRY_OVERHEAD_BYTES = 512;

/** The values of `parts`, synchronously unless one of them is still a promise. */
function all<T extends readonly unknown[]>(...parts: { readonly [K in keyof T]: Maybe<T[K]> }): Maybe<T> {
  return parts.some((p) => p instanceof Promise) ? (Promise.all(parts) as Promise<unknown> as Promise<T>) : (parts as unknown as T);
}

/** `f` of the value, synchronously if it is already there. */
function then<T, U>(value: Maybe<T>, f: (v: T) => U): Maybe<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}

const NO_PROOF: HashPlan<Uint8Array[]> = { refs: [], finish: () => [] };

/** A view that owns its whole buffer, so the cache's byte count is what it keeps alive. */
function owned(data: Uint8Array): Uint8Array {
  return data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
}

export class LogReader {
  readonly stats: ReaderStats = { fetches: 0, hits: 0, hashTileReads: 0 };
  /** Full tiles and bundles. No TTL here: tracking one makes every lookup about twice as slow. */
  private readonly full: LRUCache<string, Cached>;
  /** Partial tiles and bundles of the right edge, each reused for a moment only. */
  private readonly partial: LRUCache<string, Cached>;
  private readonly inflight = new Map<string, Promise<Cached>>();
  private readonly readers = new LRUCache<number, TileHashReader>({ max: 16 });

  constructor(
    readonly source: ObjectReader,
    options: LogReaderOptions = {},
  ) {
    const bytes = options.cacheBytes ?? 512 * 1024 * 1024;
    const sizeCalculation = (v: Cached) => v.retainedBytes + ENTRY_OVERHEAD_BYTES;
    // The right edge is a few objects per tree size; an eighth of the budget is plenty.
    this.full = new LRUCache({ maxSize: bytes - Math.floor(bytes / 8), sizeCalculation });
    this.partial = new LRUCache({ maxSize: Math.max(1, Math.floor(bytes / 8)), sizeCalculation, ttl: options.partialTtlMs ?? 1000 });
  }

  /** Bytes the caches hold now (what they count against `cacheBytes`). */
  get cachedBytes(): number {
    return this.full.calculatedSize + this.partial.calculatedSize;
  }

  /** The cached object, or a promise of it once loaded (concurrent loads of one key are shared). */
  private cached<T extends Cached>(key: string, full: boolean, load: () => Promise<T>): Maybe<T> {
    const cache = full ? this.full : this.partial;
    const hit = cache.get(key);
    if (hit) {
      this.stats.hits++;
      return hit as T;
    }
    let p = this.inflight.get(key) as Promise<T> | undefined;
    if (!p) {
      this.stats.fetches++;
      p = load()
        .then((value) => {
          cache.set(key, value);
          return value;
        })
        .finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  private tileNow(level: number, index: number, width: number): Maybe<HashTile> {
    this.stats.hashTileReads++;
    return this.cached(`${level}/${index}/${width}`, width === TILE_WIDTH, async () => {
      const tile = await readHashTile(this.source, level, index, width);
      return new HashTile(level, index, owned(tile.data));
    });
  }

  private bundleNow(kind: 'entries' | 'records', index: number, width: number): Maybe<Bundle> {
    return this.cached(`${kind}/${index}/${width}`, width === TILE_WIDTH, () => readCompactBundle(this.source, kind, index, width));
  }

  /** Hash tile (level, index) at `width` hashes. */
  async tile(level: number, index: number, width: number): Promise<HashTile> {
    return this.tileNow(level, index, width);
  }

  /** The first `width` items of bundle (kind, index). */
  async bundle(kind: 'entries' | 'records', index: number, width: number): Promise<Uint8Array[]> {
    return (await this.bundleNow(kind, index, width)).items(width);
  }

  /** A reader of the tree of `size` leaves; kept per size so its range memo is reused. */
  private hashReader(size: number): TileHashReader {
    let r = this.readers.get(size);
    if (!r) {
      r = new TileHashReader(size, (level, index, width) => this.tileNow(level, index, width));
      this.readers.set(size, r);
    }
    return r;
  }

  /** Runs a plan over the tiles of the tree of `size` leaves, each tile read once. */
  private run<T>(size: number, plan: (reader: TileHashReader) => HashPlan<T>): Maybe<T> {
    const reader = this.hashReader(size);
    const p = plan(reader);
    return then(p.refs.length === 0 ? [] : reader.hashes(p.refs), (hashes) => p.finish(hashes));
  }

  // `published` is the size of a tree whose tiles exist (a checkpoint's): tile widths come
  // from it, so hashes of any smaller tree are read from the tiles that are actually there.

  async treeHash(size: number, published = size): Promise<Uint8Array> {
    return this.run(Math.max(size, published), (r) => planTreeHash(size, r.rangeMemo));
  }

  async inclusionProof(index: number, size: number, published = size): Promise<Uint8Array[]> {
    return this.run(Math.max(size, published), (r) => planInclusion(index, size, r.rangeMemo));
  }

  async consistencyProof(first: number, second: number, published = second): Promise<Uint8Array[]> {
    return this.run(Math.max(second, published), (r) => planConsistency(first, second, r.rangeMemo));
  }

  /** Both roots and the consistency proof between them, reading each tile once. */
  async consistency(first: number, second: number, published = second): Promise<ConsistencyAt> {
    return this.run(Math.max(second, published), (r) => planConsistencyWithRoots(first, second, r.rangeMemo));
  }

  /**
   * Entry `seq` of the tree of `size` leaves: its record and entry hash from the bundles,
   * checked against each other's leaf in the hash tile.
   */
  async entry(seq: number, size: number): Promise<EntryAt> {
    return this.readEntry(seq, size, false);
  }

  /** As entry, with the audit path; the leaf and the path come from one read of each tile. */
  async entryWithProof(seq: number, size: number): Promise<EntryWithProof> {
    return this.readEntry(seq, size, true);
  }

  /** The entry, with its audit path if asked for (else an empty one). */
  private readEntry(seq: number, size: number, withProof: boolean): Maybe<EntryWithProof> {
    if (!Number.isSafeInteger(seq) || seq < 0 || seq >= size) throw new RangeError(`no entry ${seq} in a tree of ${size}`);
    const n = Math.floor(seq / TILE_WIDTH);
    const width = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    const hashes = this.run(size, (r) => planAll(planLeafHash(seq), withProof ? planInclusion(seq, size, r.rangeMemo) : NO_PROOF));
    const parts = all(this.bundleNow('entries', n, width), this.bundleNow('records', n, width), hashes);
    return then(parts, ([entries, records, [leaf, auditPath]]) => {
      const i = seq - n * TILE_WIDTH;
      // Each item is checked the first time it is served (bundles are immutable): the entry
      // hash against the tile's leaf, the record as an entry. Later reads skip both.
      const entryHash = entries.item(i);
      if (!entries.checked(i)) {
        if (!bytesEqual(leafHash(entryHash), leaf)) throw new LogIntegrityError(`entry bundle item ${seq} does not match its leaf hash`);
        entries.markChecked(i);
      }
      const canonical = records.item(i);
      if (!records.checked(i)) {
        parseCanonicalEntry(canonical);
        records.markChecked(i);
      }
      return new ReadEntry(seq, canonical, entryHash, leaf, auditPath);
    });
  }
}

/** An entry as read from the bundles; its record is parsed on the first read of `entry`. */
class ReadEntry implements EntryWithProof {
  private parsed: CanonicalEntry | undefined;

  constructor(
    readonly seq: number,
    readonly canonical: Uint8Array,
    readonly entryHash: Uint8Array,
    readonly leafHash: Uint8Array,
    readonly auditPath: Uint8Array[],
  ) {}

  get entry(): CanonicalEntry {
    return (this.parsed ??= parseCanonicalEntry(this.canonical));
  }
}
