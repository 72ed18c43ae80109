// LogReader: proofs and entries computed from a published log's tiles, through a cache.
// Full tiles and bundles are immutable, so they are cached without expiry (LRU by count);
// partial ones only for a moment, since a newer width replaces them.
import { LRUCache } from 'lru-cache';
import { type CanonicalEntry, parseCanonicalEntry } from './entry.js';
import { bytesEqual, leafHash } from './hash.js';
import { proveConsistency, proveInclusion, treeHash } from './merkle.js';
import type { ObjectReader } from './store/store.js';
import { HashTile, TILE_WIDTH, TileHashReader } from './tiles.js';
import { readBundle, readHashTile } from './tilestore.js';
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
}

export interface EntryAt {
  readonly seq: number;
  readonly entry: CanonicalEntry;
  readonly canonical: Uint8Array;
  readonly entryHash: Uint8Array;
  /** The leaf hash as the level-0 tile records it (checked against entryHash). */
  readonly leafHash: Uint8Array;
}

export class LogReader {
  readonly stats: ReaderStats = { fetches: 0, hits: 0 };
  private readonly cache: LRUCache<string, HashTile | Uint8Array[]>;
  private readonly inflight = new Map<string, Promise<HashTile | Uint8Array[]>>();
  private readonly partialTtl: number;
  private readonly readers = new LRUCache<number, TileHashReader>({ max: 16 });

  constructor(
    readonly source: ObjectReader,
    options: LogReaderOptions = {},
  ) {
    this.cache = new LRUCache({
      maxSize: options.cacheBytes ?? 512 * 1024 * 1024,
      // A hash tile keeps its interior rows too (about as many bytes again).
      sizeCalculation: (v) => (v instanceof HashTile ? 2 * v.data.length : v.reduce((n, item) => n + item.length + 64, 64)),
    });
    this.partialTtl = options.partialTtlMs ?? 1000;
  }

  private cached<T extends HashTile | Uint8Array[]>(key: string, full: boolean, load: () => Promise<T>): Promise<T> {
    const hit = this.cache.get(key);
    if (hit) {
      this.stats.hits++;
      return Promise.resolve(hit as T);
    }
    return this.fill(key, full, load);
  }

  private async fill<T extends HashTile | Uint8Array[]>(key: string, full: boolean, load: () => Promise<T>): Promise<T> {
    let p = this.inflight.get(key) as Promise<T> | undefined;
    if (!p) {
      this.stats.fetches++;
      p = load().finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
      const value = await p;
      this.cache.set(key, value, full ? {} : { ttl: this.partialTtl });
      return value;
    }
    return p;
  }

  /** Hash tile (level, index) at `width` hashes. */
  tile(level: number, index: number, width: number): Promise<HashTile> {
    return this.cached(`${level}/${index}/${width}`, width === TILE_WIDTH, () => readHashTile(this.source, level, index, width));
  }

  /** The first `width` items of bundle (kind, index). */
  bundle(kind: 'entries' | 'records', index: number, width: number): Promise<Uint8Array[]> {
    return this.cached(`${kind}/${index}/${width}`, width === TILE_WIDTH, () => readBundle(this.source, kind, index, width));
  }

  /** A reader of the tree of `size` leaves; kept per size so its range memo is reused. */
  hashReader(size: number): TileHashReader {
    let r = this.readers.get(size);
    if (!r) {
      r = new TileHashReader(size, (level, index, width) => this.tile(level, index, width));
      this.readers.set(size, r);
    }
    return r;
  }

  // `published` is the size of a tree whose tiles exist (a checkpoint's): tile widths come
  // from it, so hashes of any smaller tree are read from the tiles that are actually there.

  treeHash(size: number, published = size): Promise<Uint8Array> {
    return treeHash(size, this.hashReader(Math.max(size, published)));
  }

  inclusionProof(index: number, size: number, published = size): Promise<Uint8Array[]> {
    return proveInclusion(index, size, this.hashReader(Math.max(size, published)));
  }

  consistencyProof(first: number, second: number, published = second): Promise<Uint8Array[]> {
    return proveConsistency(first, second, this.hashReader(Math.max(second, published)));
  }

  /** Leaf hash of `index` as the level-0 tile records it. */
  async leafHash(index: number, size: number): Promise<Uint8Array> {
    const [h] = await this.hashReader(size).readHashes([{ level: 0, index }]);
    return h!;
  }

  /**
   * Entry `seq` of the tree of `size` leaves: its record and entry hash from the bundles,
   * checked against each other's leaf in the hash tile.
   */
  async entry(seq: number, size: number): Promise<EntryAt> {
    if (!Number.isSafeInteger(seq) || seq < 0 || seq >= size) throw new RangeError(`no entry ${seq} in a tree of ${size}`);
    const n = Math.floor(seq / TILE_WIDTH);
    const width = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    const [entries, records, leaf] = await Promise.all([
      this.bundle('entries', n, width),
      this.bundle('records', n, width),
      this.leafHash(seq, size),
    ]);
    const i = seq - n * TILE_WIDTH;
    const entryHash = entries[i]!;
    if (!bytesEqual(leafHash(entryHash), leaf)) throw new LogIntegrityError(`entry bundle item ${seq} does not match its leaf hash`);
    const canonical = records[i]!;
    return { seq, entry: parseCanonicalEntry(canonical), canonical, entryHash, leafHash: leaf };
  }
}
