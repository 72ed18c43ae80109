// LogReader: proofs and entries computed from a published log's tiles, through a cache.
// Full tiles and bundles are immutable, so they are cached without expiry (LRU by bytes);
// partial ones only for a moment, since a newer width replaces them. A request plans every
// hash it needs first and reads each tile or bundle once: synchronously when all are
// cached (the common case on a warm replica), else after loading the missing ones.
//
// Nothing is used before it is authenticated (unless the reader is made `unverified`, for
// clients that check proofs against their own pinned checkpoint). Authentication happens
// once per object, on its first use after it enters the cache, so a warm request pays a
// set lookup per tile and a bit test per bundle item:
//   - a full hash tile (L, N): its root equals hash N mod 256 of its parent tile
//     (L+1, N/256), itself authenticated; full tiles are immutable, so this holds for good;
//   - the right-edge partial tiles of a tree: together they hash to the tree's root, which
//     a signed checkpoint gives (every chain of parents ends in one of them);
//   - entry bundle item i: leafHash(entry hash) is leaf i of the authenticated level-0 tile;
//   - record i: entryHash(seq, record, prior) is the entry hash, prior being the previous
//     (authenticated) entry hash.
// The trusted roots come with the requests: a tree is named by its head (size and root; a
// PublishedCheckpoint is one), and the reader remembers the last few heads it was given.
// A mismatch is a CorruptObjectError naming the object, which is dropped from the cache.
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { ZERO_HASH, entryHash as hashEntry } from '../core/entry.js';
import { HASH_SIZE, bytesEqual, concatBytes, leafHash, toHex } from '../core/hash.js';
import {
  EDGE_NODE,
  type HashPlan,
  auditPathNodes,
  planAll,
  planConsistency,
  planConsistencyWithRoots,
  planInclusion,
  planLeafHash,
  planTreeHash,
  subtreeWidth,
  treeHashSync,
} from '../core/merkle.js';
import type { ObjectReader } from '../store/store.js';
import {
  HashTile,
  TILE_HEIGHT,
  TILE_WIDTH,
  TileFormatError,
  TileHashReader,
  type TileId,
  type TileKind,
  levelHashCount,
  tilePath,
  tileWidthAt,
} from '../core/tiles.js';
import { type Bundle, bundlePrefix } from '../core/bundle.js';
import { type Maybe, all, andThen } from './maybe.js';
import { type EntryAt, type EntryWithProof, ReadEntry } from './read-entry.js';
import { TileSet } from './tile-set.js';
import { LogIntegrityError, readCompactBundle, readHashTile } from './tilestore.js';

export interface LogReaderOptions {
  /** Bytes of tiles and bundles kept in memory (default 512 MiB: every level-0 tile and bundle of a ~1.5M-entry log). */
  readonly cacheBytes?: number;
  /** How long a partial tile may be reused, in ms (default 1,000). */
  readonly partialTtlMs?: number;
  /**
   * Serve hash tiles without authenticating them against a checkpoint: only for clients,
   * which verify every proof against the checkpoint they pinned (bundle items are still
   * checked against the tiles). A server never sets it.
   */
  readonly unverified?: boolean;
  /** Told once per object that fails authentication (a server logs it). */
  readonly onCorrupt?: (key: string, message: string) => void;
  /** Check each bundle item as it is read, not the pair's 256 at once (sweep): a client reading a
   * few entries (`stele ledger verify`), for which hashing the other 255 costs more than it saves. */
  readonly itemByItem?: boolean;
}

/** A tree and its root as a signed checkpoint gives it (a PublishedCheckpoint is one). */
export interface TreeHead {
  readonly size: number;
  readonly root: Uint8Array;
}

/** The tree to read: its head, or its size alone when the reader already knows its root. */
export type TreeRef = number | TreeHead;

/** An object in storage that does not match what the checkpoint commits to. */
export class CorruptObjectError extends LogIntegrityError {
  override name = 'CorruptObjectError';
  constructor(
    readonly key: string,
    detail: string,
  ) {
    super(`${key}: ${detail}`);
  }
}

/** What a server's reader does with a corrupt object: logs it, once, with its key. */
export function logCorruptObjects(logger: Logger | undefined): Pick<LogReaderOptions, 'onCorrupt'> {
  return {
    onCorrupt: (key, message) =>
      logger?.error({ object: key, err: message }, 'corrupt object in storage; answering corrupt_storage'),
  };
}

/** A verifying reader was asked for a tree whose root it was never given. */
export class UntrustedTreeError extends Error {
  override name = 'UntrustedTreeError';
}

export interface ReaderStats {
  /** Objects fetched from the underlying reader. */
  fetches: number;
  /** Lookups answered from the cache. */
  hits: number;
  /** Hash tiles read (fetched or from the cache; bundles not counted): about one per tree level per proof. */
  hashTileReads: number;
  /** Objects that failed authentication (each counted once). */
  corruptObjects: number;
}

export interface ConsistencyAt {
  readonly firstRoot: Uint8Array;
  readonly secondRoot: Uint8Array;
  readonly proof: Uint8Array[];
}

type Cached = HashTile | Bundle;

/** A tree being read: its size and, when verifying, its trusted root. */
interface Tree {
  readonly size: number;
  readonly root: Uint8Array | undefined;
}

const sizeOf = (tree: TreeRef): number => (typeof tree === 'number' ? tree : tree.size);

/** Items of bundle n (and hashes of level-0 tile n) in a tree of `size` leaves. */
const bundleWidth = (n: number, size: number): number => Math.min(TILE_WIDTH, size - n * TILE_WIDTH);

/** Heads remembered, so a request naming a recent tree by its size alone is still verified. */
const REMEMBERED_HEADS = 64;

export { type Maybe, andThen } from './maybe.js';
export type { EntryAt, EntryWithProof } from './read-entry.js';

/** Cache key kinds: hash tile levels (below 64), then the two bundle kinds. */
const KEY_KINDS = 66;

/**
 * An object's cache key as one number: a string key would be built and hashed on every
 * lookup, a few of which every proof makes. Unique while the index is below 2^53 ÷ (66 × 257),
 * about 5 × 10^11 tiles, far beyond any log.
 */
function cacheKey(kind: TileKind, index: number, width: number): number {
  const code = kind === 'entries' ? 64 : kind === 'records' ? 65 : kind;
  const key = (index * KEY_KINDS + code) * (TILE_WIDTH + 1) + width;
  if (!Number.isSafeInteger(key)) throw new RangeError(`tile index ${index} is beyond any log`);
  return key;
}

/** Per cached object: the LRU's node, key and bookkeeping, beyond the bytes it retains. */
const ENTRY_OVERHEAD_BYTES = 512;

const NO_PROOF: HashPlan<Uint8Array[]> = { refs: [], finish: () => [] };

/** A view that owns its whole buffer, so the cache's byte count is what it keeps alive. */
function owned(data: Uint8Array): Uint8Array {
  return data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
}

export class LogReader {
  readonly stats: ReaderStats = { fetches: 0, hits: 0, hashTileReads: 0, corruptObjects: 0 };
  /** Full tiles and bundles. No TTL here: tracking one makes every lookup about twice as slow. */
  private readonly full: LRUCache<number, Cached>;
  /** Partial tiles and bundles of the right edge, each reused for a moment only. */
  private readonly partial: LRUCache<number, Cached>;
  private readonly inflight = new Map<number, Promise<Cached>>();
  private readonly readers = new LRUCache<number, TileHashReader>({ max: 16 });
  /** Cached hash tiles that passed authentication (a cache entry carries no flag of its own). */
  private readonly authentic = new WeakSet<HashTile>();
  /** Cached bundles whose every item passed authentication (see publishedObject). */
  private readonly authenticBundles = new WeakSet<Bundle>();
  /** Record bundles whose items were all checked at once, on their first use (see sweep). */
  private readonly swept = new WeakSet<Bundle>();
  /** Right-edge checks under way, by tree size (concurrent requests share one). */
  private readonly edges = new Map<number, Promise<HashTile[]>>();
  /** Trusted roots by tree size: the last heads given. */
  private readonly heads = new LRUCache<number, Uint8Array>({ max: REMEMBERED_HEADS });
  /** Objects already reported corrupt: each is logged and counted once. */
  private readonly reported = new LRUCache<string, true>({ max: 10_000 });
  private readonly verify: boolean;
  private readonly sweeps: boolean;
  /** auditPathNodes' output, reused (a proof is computed synchronously, one at a time). */
  private readonly pathNodes: number[] = [];
  private readonly onCorrupt: ((key: string, message: string) => void) | undefined;

  constructor(
    readonly source: ObjectReader,
    options: LogReaderOptions = {},
  ) {
    const bytes = options.cacheBytes ?? 512 * 1024 * 1024;
    const sizeCalculation = (v: Cached) => v.retainedBytes + ENTRY_OVERHEAD_BYTES;
    // The right edge is a few objects per tree size; an eighth of the budget is plenty.
    this.full = new LRUCache({ maxSize: bytes - Math.floor(bytes / 8), sizeCalculation });
    this.partial = new LRUCache({
      maxSize: Math.max(1, Math.floor(bytes / 8)),
      sizeCalculation,
      ttl: options.partialTtlMs ?? 1000,
    });
    this.verify = options.unverified !== true;
    this.sweeps = options.itemByItem !== true;
    this.onCorrupt = options.onCorrupt;
  }

  /** Bytes the caches hold now (what they count against `cacheBytes`). */
  get cachedBytes(): number {
    return this.full.calculatedSize + this.partial.calculatedSize;
  }

  /** Trusts `head`'s root for its size from now on (a checkpoint the caller verified or signed). */
  trust(head: TreeHead): void {
    const known = this.heads.get(head.size);
    if (known === head.root) return;
    if (known && !bytesEqual(known, head.root)) {
      throw new LogIntegrityError(`two roots for tree size ${head.size}: ${toHex(known)} and ${toHex(head.root)}`);
    }
    this.heads.set(head.size, head.root);
  }

  /** The tree `ref` names, with its trusted root when verifying. */
  private resolve(ref: TreeRef): Tree {
    if (!this.verify) return { size: sizeOf(ref), root: undefined };
    if (typeof ref !== 'number') {
      this.trust(ref);
      return ref;
    }
    const root = this.heads.get(ref);
    if (!root) throw new UntrustedTreeError(`no trusted root for tree size ${ref}: pass its checkpoint`);
    return { size: ref, root };
  }

  /** The tree whose tiles hold the hashes of a tree of `size` leaves: `published`, or `size` if larger. */
  private treeFor(size: number, published: TreeRef): Tree {
    return this.resolve(sizeOf(published) >= size ? published : size);
  }

  /** The cached object, or a promise of it once loaded (concurrent loads of one key are shared). */
  private cached<T extends Cached>(key: number, full: boolean, load: () => Promise<T>): Maybe<T> {
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
    return this.cached(cacheKey(level, index, width), width === TILE_WIDTH, async () => {
      const tile = await this.malformed(readHashTile(this.source, level, index, width), level, index, width);
      return new HashTile(level, index, owned(tile.data));
    });
  }

  private bundleNow(kind: 'entries' | 'records', index: number, width: number): Maybe<Bundle> {
    return this.cached(cacheKey(kind, index, width), width === TILE_WIDTH, () =>
      this.malformed(readCompactBundle(this.source, kind, index, width), kind, index, width),
    );
  }

  /** An object that cannot even be parsed (a cut or altered length) is as corrupt as one that does not hash right. */
  private malformed<T>(loading: Promise<T>, kind: TileKind, index: number, width: number): Promise<T> {
    return loading.catch((e: unknown) => {
      if (e instanceof TileFormatError) throw this.corrupt([], tilePath({ kind, index, width }), e.message);
      throw e;
    });
  }

  /** Hash tile (level, index) of `tree`, authenticated when verifying: synchronous once it is. */
  private treeTile(tree: Tree, level: number, index: number, width: number): Maybe<HashTile> {
    const tile = this.tileNow(level, index, width);
    if (tree.root === undefined || (!(tile instanceof Promise) && this.authentic.has(tile))) return tile;
    return this.authenticate(tree as TreeHead, level, index, width, tile);
  }

  /** Authenticates a hash tile of `tree`: a full one against its parent, a partial one with the right edge. */
  private async authenticate(
    tree: TreeHead,
    level: number,
    index: number,
    width: number,
    loading: Maybe<HashTile>,
  ): Promise<HashTile> {
    const tile = await loading;
    if (this.authentic.has(tile)) return tile;
    // A partial tile of a tree is that tree's right-edge tile at its level.
    if (width < TILE_WIDTH) return (await this.edge(tree))[level]!;
    const up = Math.floor(index / TILE_WIDTH);
    const parent = await this.treeTile(tree, level + 1, up, tileWidthAt(level + 1, up, tree.size));
    if (!bytesEqual(tile.root(), parent.hashAt(0, index % TILE_WIDTH))) {
      throw this.corrupt(
        [cacheKey(level, index, width)],
        tile.path,
        `does not hash to hash ${index % TILE_WIDTH} of ${parent.path}`,
      );
    }
    this.authentic.add(tile);
    return tile;
  }

  /** The right-edge tiles of `tree` (by level; absent where a level has none), checked against its root together. */
  private edge(tree: TreeHead): Promise<HashTile[]> {
    let p = this.edges.get(tree.size);
    if (!p) {
      p = this.checkEdge(tree).finally(() => this.edges.delete(tree.size));
      this.edges.set(tree.size, p);
    }
    return p;
  }

  private async checkEdge(tree: TreeHead): Promise<HashTile[]> {
    const tiles: HashTile[] = [];
    const keys: number[] = [];
    const reads: Maybe<HashTile>[] = [];
    for (let level = 0; levelHashCount(level, tree.size) > 0; level++) {
      const count = levelHashCount(level, tree.size);
      const [index, width] = [Math.floor(count / TILE_WIDTH), count % TILE_WIDTH];
      if (width === 0) continue;
      keys.push(cacheKey(level, index, width));
      reads.push(andThen(this.tileNow(level, index, width), (t) => (tiles[level] = t)));
    }
    await Promise.all(reads);
    const present = tiles.filter((t) => t !== undefined);
    // As RightEdge.root(): the tree hash of a size is folded from its right-edge tiles alone.
    if (!bytesEqual(treeHashSync(tree.size, new TileSet(present).lookup(tree.size)), tree.root)) {
      const paths = present.map((t) => t.path).join(', ');
      throw this.corrupt(
        keys,
        paths,
        `the right-edge tiles of tree size ${tree.size} do not hash to its checkpoint root`,
      );
    }
    for (const t of present) this.authentic.add(t);
    return tiles;
  }

  /**
   * Reports a failed check (once per object key) and drops the objects from the cache, so
   * a repaired object is read again. Returns the error to throw.
   */
  private corrupt(cacheKeys: readonly number[], key: string, detail: string): CorruptObjectError {
    for (const k of cacheKeys) {
      this.full.delete(k);
      this.partial.delete(k);
    }
    const error = new CorruptObjectError(key, detail);
    if (!this.reported.has(key)) {
      this.reported.set(key, true);
      this.stats.corruptObjects++;
      this.onCorrupt?.(key, error.message);
    }
    return error;
  }

  /**
   * Reports an object found corrupt by a check made outside the reader (the served
   * checkpoint): logged and counted once, as the reader's own. Returns the error to throw.
   */
  reportCorrupt(key: string, detail: string): CorruptObjectError {
    return this.corrupt([], key, detail);
  }

  /**
   * Tile or bundle `id` as the log serves it, authenticated against `tree`: at the width
   * `tree` gives it, the bytes the reader authenticated (from its cache); at an older width
   * (a partial that clients at older tree sizes read), the stored object, which must be the
   * prefix of those bytes; null when that one is not stored. Throws a RangeError if `tree`
   * has no such object (it lies beyond it) and CorruptObjectError if it does not verify.
   * Bundles are checked item by item once, then remembered.
   */
  async publishedObject(tree: TreeRef, id: TileId): Promise<Uint8Array | null> {
    const t = this.resolve(tree);
    const level = typeof id.kind === 'number' ? id.kind : 0;
    const have = tileWidthAt(level, id.index, t.size);
    if (id.width > have) throw new RangeError(`${tilePath(id)} is not in the tree of size ${t.size}`);
    const bytes =
      typeof id.kind === 'number'
        ? (await this.treeTile(t, level, id.index, have)).data
        : await this.authenticBundle(t, id.kind, id.index, have);
    if (id.width === have) return bytes;
    const key = tilePath(id);
    const stored = await this.source.get(key);
    if (!stored) return null;
    const prefix =
      typeof id.kind === 'number' ? bytes.subarray(0, id.width * HASH_SIZE) : bundlePrefix(bytes, id.width);
    if (!bytesEqual(stored, prefix))
      throw this.corrupt([], key, `differs from the first ${id.width} items of ${tilePath({ ...id, width: have })}`);
    return stored;
  }

  /** The bytes of bundle (kind, n) at `width` items, every item authenticated against `tree`. */
  private async authenticBundle(
    tree: Tree,
    kind: 'entries' | 'records',
    n: number,
    width: number,
  ): Promise<Uint8Array> {
    const bundle = await this.bundleNow(kind, n, width);
    if (!this.authenticBundles.has(bundle) && tree.root !== undefined) {
      if (kind === 'entries') {
        const tile = await this.treeTile(tree, 0, n, width);
        for (let i = 0; i < width; i++) this.checkedEntryHash(bundle, tile, n * TILE_WIDTH + i);
      } else {
        const entries = await this.bundleNow('entries', n, width);
        for (let i = 0; i < width; i++)
          if (!bundle.checked(i)) await this.checkEntry(tree, n * TILE_WIDTH + i, entries, bundle);
      }
      this.authenticBundles.add(bundle);
    }
    // A full bundle read for a missing partial holds more items than asked for.
    return bundle.length === width ? bundle.data : bundlePrefix(bundle.data, width);
  }

  /** Hash tile (level, index) of `tree`, at the width the tree gives it, authenticated unless the reader is unverified. */
  async tileOf(tree: TreeRef, level: number, index: number): Promise<HashTile> {
    const t = this.resolve(tree);
    const width = tileWidthAt(level, index, t.size);
    if (width === 0) throw new RangeError(`tile ${level}/${index} is not in a tree of ${t.size}`);
    return this.treeTile(t, level, index, width);
  }

  /** Hash tile (level, index) at `width` hashes, as stored (unauthenticated: the caller checks what it proves). */
  async tile(level: number, index: number, width: number): Promise<HashTile> {
    return this.tileNow(level, index, width);
  }

  /** The first `width` items of bundle (kind, index), as stored (unauthenticated). */
  async bundle(kind: 'entries' | 'records', index: number, width: number): Promise<Uint8Array[]> {
    return (await this.bundleNow(kind, index, width)).items(width);
  }

  /** A reader of `tree`'s hashes; kept per size so its range memo is reused. */
  private hashReader(tree: Tree): TileHashReader {
    let r = this.readers.get(tree.size);
    if (!r) {
      r = new TileHashReader(tree.size, (level, index, width) => this.treeTile(tree, level, index, width));
      this.readers.set(tree.size, r);
    }
    return r;
  }

  /** Runs a plan over the tiles of `tree`, each tile read once. */
  private run<T>(tree: Tree, plan: (reader: TileHashReader) => HashPlan<T>): Maybe<T> {
    const reader = this.hashReader(tree);
    const p = plan(reader);
    return andThen(p.refs.length === 0 ? [] : reader.hashes(p.refs), (hashes) => p.finish(hashes));
  }

  // `published` is a tree whose tiles exist (a checkpoint's): tile widths come from it, so
  // hashes of any smaller tree are read from the tiles that are actually there. A verifying
  // reader needs its root: pass the checkpoint, or a size whose checkpoint it was given.

  async treeHash(size: number, published: TreeRef = size): Promise<Uint8Array> {
    return this.run(this.treeFor(size, published), (r) => planTreeHash(size, r.rangeMemo));
  }

  async inclusionProof(index: number, size: number, published: TreeRef = size): Promise<Uint8Array[]> {
    return this.run(this.treeFor(size, published), (r) => planInclusion(index, size, r.rangeMemo));
  }

  async consistencyProof(first: number, second: number, published: TreeRef = second): Promise<Uint8Array[]> {
    return this.run(this.treeFor(second, published), (r) => planConsistency(first, second, r.rangeMemo));
  }

  /** Both roots and the consistency proof between them, reading each tile once. */
  async consistency(first: number, second: number, published: TreeRef = second): Promise<ConsistencyAt> {
    return this.consistencyNow(first, second, published);
  }

  /** As consistency, synchronously when every tile it needs is cached and authenticated (a server's hot path). */
  consistencyNow(first: number, second: number, published: TreeRef = second): Maybe<ConsistencyAt> {
    return this.run(this.treeFor(second, published), (r) => planConsistencyWithRoots(first, second, r.rangeMemo));
  }

  /**
   * Entry `seq` of `tree`: its record and entry hash from the bundles, checked against its
   * leaf in the hash tile and against each other.
   */
  async entry(seq: number, tree: TreeRef): Promise<EntryAt> {
    return this.readEntry(seq, this.resolve(tree), false);
  }

  /** As entry, with the audit path; the leaf and the path come from one read of each tile. */
  async entryWithProof(seq: number, tree: TreeRef): Promise<EntryWithProof> {
    return this.readEntry(seq, this.resolve(tree), true);
  }

  /** As entryWithProof, synchronously when its tiles and bundles are cached and checked (a server's hot path). */
  entryWithProofNow(seq: number, tree: TreeRef): Maybe<EntryWithProof> {
    return this.readEntry(seq, this.resolve(tree), true);
  }

  /** The records of leaves [from, to) of `tree`, each checked as `entry` checks it (for indexing). */
  async records(from: number, to: number, tree: TreeRef): Promise<Uint8Array[]> {
    const t = this.resolve(tree);
    if (!Number.isSafeInteger(from) || from < 0 || to > t.size || from > to)
      throw new RangeError(`no entries [${from}, ${to}) in a tree of ${t.size}`);
    const out: Uint8Array[] = [];
    for (let n = Math.floor(from / TILE_WIDTH); n * TILE_WIDTH < to; n++) {
      const width = bundleWidth(n, t.size);
      const [entries, records] = await all(this.bundleNow('entries', n, width), this.bundleNow('records', n, width));
      for (let seq = Math.max(from, n * TILE_WIDTH); seq < Math.min(to, n * TILE_WIDTH + width); seq++) {
        const i = seq - n * TILE_WIDTH;
        if (!entries.checked(i) || !records.checked(i)) await this.checkEntry(t, seq, entries, records);
        out.push(records.item(i));
      }
    }
    return out;
  }

  /** The entry, with its audit path if asked for (else an empty one). */
  private readEntry(seq: number, tree: Tree, withProof: boolean): Maybe<EntryWithProof> {
    const size = tree.size;
    if (!Number.isSafeInteger(seq) || seq < 0 || seq >= size)
      throw new RangeError(`no entry ${seq} in a tree of ${size}`);
    const n = Math.floor(seq / TILE_WIDTH);
    const i = seq - n * TILE_WIDTH;
    const width = bundleWidth(n, size);
    const entries = this.bundleNow('entries', n, width);
    const records = this.bundleNow('records', n, width);
    const warm = withProof ? this.provenNow(tree, seq) : undefined;
    // A warm server's request: everything cached and checked, answered without a plan or a promise.
    if (
      warm !== undefined &&
      !(entries instanceof Promise) &&
      !(records instanceof Promise) &&
      entries.checked(i) &&
      records.checked(i)
    )
      return new ReadEntry(seq, records.item(i), entries.item(i), warm);
    const hashes =
      warm ??
      andThen(
        this.run(tree, (r) => planAll(planLeafHash(seq), withProof ? planInclusion(seq, size, r.rangeMemo) : NO_PROOF)),
        ([leaf, auditPath]) => concatBytes(leaf, ...auditPath),
      );
    return andThen(all(entries, records, hashes), ([entries, records, proof]) => {
      const read = () => new ReadEntry(seq, records.item(i), entries.item(i), proof);
      // Bundles are immutable: each item is checked the first time it is served, then trusted.
      return entries.checked(i) && records.checked(i)
        ? read()
        : andThen(this.checkEntry(tree, seq, entries, records), read);
    });
  }

  /**
   * Leaf `seq`'s hash then its audit path in `tree`, back to back, copied straight from the
   * tiles when they are all cached and authenticated and the path's right-edge hash is
   * memoised (a warm server: no plan, no view per hash); undefined otherwise, for the planned read.
   */
  private provenNow(tree: Tree, seq: number): Uint8Array | undefined {
    const size = tree.size;
    const nodes = this.pathNodes;
    const count = auditPathNodes(seq, size, nodes);
    // From Node's buffer pool: a typed array over 64 bytes gets a backing store of its own,
    // which costs ~1 µs to make and collect (0.1 µs from the pool). An answer kept for long
    // holds a detached copy (EntryWithProof.detached), not the pool's slab.
    const out = Buffer.allocUnsafe((count + 1) * HASH_SIZE);
    let tile: HashTile | undefined;
    // The leaf (node -1), then the path: the tile one level of nodes reads serves the next 7.
    for (let k = -1; k < count; k++) {
      const level = k < 0 ? 0 : nodes[2 * k]!;
      const node = k < 0 ? seq : nodes[2 * k + 1]!;
      if (level === EDGE_NODE) {
        const h = this.hashReader(tree).rangeMemo.get(node, size);
        if (!h) return undefined;
        out.set(h, (k + 1) * HASH_SIZE);
        continue;
      }
      const tileLevel = Math.floor(level / TILE_HEIGHT);
      const row = level - tileLevel * TILE_HEIGHT;
      const bottom = node * subtreeWidth(row);
      const index = Math.floor(bottom / TILE_WIDTH);
      if (tile?.level !== tileLevel || tile.index !== index) {
        const t = this.treeTile(tree, tileLevel, index, tileWidthAt(tileLevel, index, size));
        if (t instanceof Promise) {
          t.catch(() => undefined); // the planned read that follows asks again, and answers its failure
          return undefined;
        }
        tile = t;
      }
      tile.copyHash(row, (bottom - index * TILE_WIDTH) / subtreeWidth(row), out, (k + 1) * HASH_SIZE);
    }
    return out;
  }

  /** Checks entry `seq` in its bundles (of `tree`'s width): its entry hash against its leaf, its record against both. */
  private checkEntry(tree: Tree, seq: number, entries: Bundle, records: Bundle): Maybe<void> {
    const n = Math.floor(seq / TILE_WIDTH);
    const i = seq - n * TILE_WIDTH;
    return andThen(this.treeTile(tree, 0, n, bundleWidth(n, tree.size)), (tile) => {
      if (this.sweeps) this.sweep(tile, entries, records);
      const eh = this.checkedEntryHash(entries, tile, seq);
      if (records.checked(i)) return;
      // The prior is in this bundle and tile but for item 0, whose prior ends the previous bundle.
      const prior =
        i > 0 ? this.checkedEntryHash(entries, tile, seq - 1) : seq === 0 ? ZERO_HASH : this.entryHashAt(tree, seq - 1);
      return andThen(prior, (before) => {
        if (!recordChains(records, i, seq, before, eh)) {
          const key = tilePath({ kind: 'records', index: n, width: records.length });
          throw this.corrupt(
            [cacheKey('records', n, bundleWidth(n, tree.size))],
            key,
            `record ${seq} does not hash to its entry hash`,
          );
        }
        records.markChecked(i);
      });
    });
  }

  /**
   * Checks every item of a pair of bundles at once, the first time one of them is used: the
   * entry hashes against the authenticated level-0 `tile`, each record against its entry
   * hash and the one before it (item 0's prior is in the previous bundle: left to its own
   * check). Items that pass are marked, so later reads of the bundle hash nothing, as a
   * reader that checked the whole log at start would; any that fail are left unmarked for
   * the per-item check, which reports them when one is asked for.
   */
  private sweep(tile: HashTile, entries: Bundle, records: Bundle): void {
    if (this.swept.has(records)) return;
    this.swept.add(records);
    const first = tile.index * TILE_WIDTH;
    const width = Math.min(tile.width, entries.length, records.length);
    for (let i = 0; i < width; i++) {
      if (!entries.checked(i)) {
        if (!entryIsLeaf(entries, tile, i)) continue;
        entries.markChecked(i);
      }
      if (i > 0 && !records.checked(i) && entries.checked(i - 1)) {
        if (recordChains(records, i, first + i, entries.item(i - 1), entries.item(i))) records.markChecked(i);
      }
    }
  }

  /** Entry hash `seq` of `tree`, checked against its leaf. */
  private entryHashAt(tree: Tree, seq: number): Maybe<Uint8Array> {
    const n = Math.floor(seq / TILE_WIDTH);
    const width = bundleWidth(n, tree.size);
    return andThen(all(this.bundleNow('entries', n, width), this.treeTile(tree, 0, n, width)), ([entries, tile]) =>
      this.checkedEntryHash(entries, tile, seq),
    );
  }

  /** Item `seq` of its entry bundle, checked (once) against leaf `seq` of its level-0 tile. */
  private checkedEntryHash(entries: Bundle, tile: HashTile, seq: number): Uint8Array {
    const i = seq % TILE_WIDTH;
    if (!entries.checked(i)) {
      if (!entryIsLeaf(entries, tile, i)) {
        const key = tilePath({ kind: 'entries', index: tile.index, width: entries.length });
        throw this.corrupt(
          [cacheKey('entries', tile.index, tile.width)],
          key,
          `entry bundle item ${seq} does not match its leaf hash in ${tile.path}`,
        );
      }
      entries.markChecked(i);
    }
    return entries.item(i);
  }
}

/** An entry bundle item's check (the one home of it): its leaf hash is leaf i of the level-0 tile. */
const entryIsLeaf = (entries: Bundle, tile: HashTile, i: number): boolean =>
  bytesEqual(leafHash(entries.item(i)), tile.hashAt(0, i));

/** A record's check (the one home of it): record i, leaf `seq`, hashes after `prior` to entry hash `eh`. */
const recordChains = (records: Bundle, i: number, seq: number, prior: Uint8Array, eh: Uint8Array): boolean =>
  bytesEqual(hashEntry(seq, records.item(i), prior), eh);
