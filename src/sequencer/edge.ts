// The right edge of the tree: the partial tile at every level plus the partial entry and
// record bundles. Appending a batch to it is pure and synchronous: it yields the new edge,
// every tile and bundle the batch creates, and the new root. Memory is bounded by the
// edge (≤ 255 hashes a level), never by the log's size.
import { HASH_SIZE, bytesEqual, concatBytes, leafHash } from '../hash.js';
import { ZERO_HASH, entryHash } from '../entry.js';
import { treeHashSync } from '../merkle.js';
import type { StoredObject } from '../store/store.js';
import { HashTile, TILE_WIDTH, type TileKind, TileSet, encodeBundle, levelHashCount, tilePath } from '../tiles.js';

const TILE_BYTES = TILE_WIDTH * HASH_SIZE;
const EMPTY = new Uint8Array(0);

export interface BatchResult {
  readonly edge: RightEdge;
  /** Hash tiles, entry bundles and record bundles to create. */
  readonly objects: StoredObject[];
  readonly entryHashes: Uint8Array[];
  /** Every tile needed for inclusion proofs of this batch's leaves at the new size. */
  readonly tiles: TileSet;
  readonly root: Uint8Array;
}

export class RightEdge {
  constructor(
    readonly size: number,
    /** rows[L]: the hashes of the partial level-L tile (0..255 of them). */
    readonly rows: readonly Uint8Array[],
    /** Entry hashes of the partial entry bundle. */
    readonly entries: readonly Uint8Array[],
    /** Canonical entries of the partial record bundle. */
    readonly records: readonly Uint8Array[],
    readonly lastEntryHash: Uint8Array,
  ) {
    if (entries.length !== size % TILE_WIDTH || records.length !== entries.length) {
      throw new RangeError('right edge bundles do not match the tree size');
    }
    rows.forEach((row, level) => {
      if (row.length !== (levelHashCount(level, size) % TILE_WIDTH) * HASH_SIZE) {
        throw new RangeError(`right edge level ${level} does not match the tree size`);
      }
    });
    for (let level = rows.length; levelHashCount(level, size) > 0; level++) {
      if (levelHashCount(level, size) % TILE_WIDTH !== 0) throw new RangeError(`right edge lacks level ${level}`);
    }
  }

  static empty(): RightEdge {
    return new RightEdge(0, [], [], [], ZERO_HASH);
  }

  /** The partial hash tiles of this edge (levels whose partial tile is non-empty). */
  partialTiles(): HashTile[] {
    const out: HashTile[] = [];
    this.rows.forEach((row, level) => {
      if (row.length > 0) out.push(new HashTile(level, Math.floor(levelHashCount(level, this.size) / TILE_WIDTH), row));
    });
    return out;
  }

  root(): Uint8Array {
    return treeHashSync(this.size, new TileSet(this.partialTiles()).lookup(this.size));
  }

  /** Appends canonical entries (already validated) as leaves size, size+1, … */
  append(canonicals: readonly Uint8Array[]): BatchResult {
    const entryHashes: Uint8Array[] = new Array(canonicals.length);
    const leaves: Uint8Array[] = new Array(canonicals.length);
    let prior = this.lastEntryHash;
    canonicals.forEach((c, i) => {
      prior = entryHash(this.size + i, c, prior);
      entryHashes[i] = prior;
      leaves[i] = leafHash(prior);
    });
    return this.appendHashed(canonicals, entryHashes, leaves);
  }

  /**
   * Appends entries whose entry and leaf hashes were computed as they arrived, chained from
   * this edge (the first link is checked: a batch sequenced from a stale edge is refused).
   */
  appendHashed(canonicals: readonly Uint8Array[], entryHashes: Uint8Array[], leafHashes: readonly Uint8Array[]): BatchResult {
    const n = canonicals.length;
    if (n === 0) throw new RangeError('empty batch');
    if (entryHashes.length !== n || leafHashes.length !== n) throw new RangeError('batch hashes do not match its entries');
    if (!bytesEqual(entryHash(this.size, canonicals[0]!, this.lastEntryHash), entryHashes[0]!)) {
      throw new RangeError(`batch is not chained to the edge at size ${this.size}`);
    }
    const leaves = new Uint8Array(n * HASH_SIZE);
    leafHashes.forEach((h, i) => leaves.set(h, i * HASH_SIZE));
    const prior = entryHashes[n - 1]!;

    const objects: StoredObject[] = [];
    const entries = this.bundles('entries', this.entries, entryHashes, objects);
    const records = this.bundles('records', this.records, canonicals, objects);

    const tiles = new TileSet(this.partialTiles());
    const rows: Uint8Array[] = [];
    let additions: Uint8Array = leaves;
    for (let level = 0; additions.length > 0 || level < this.rows.length; level++) {
      const old = this.rows[level] ?? EMPTY;
      if (additions.length === 0) {
        rows[level] = old;
        continue;
      }
      const row = concatBytes(old, additions);
      const first = Math.floor(levelHashCount(level, this.size) / TILE_WIDTH);
      const roots: Uint8Array[] = [];
      for (let k = 0; k * TILE_BYTES < row.length; k++) {
        const tile = new HashTile(level, first + k, row.subarray(k * TILE_BYTES, (k + 1) * TILE_BYTES));
        objects.push({ key: tile.path, data: tile.data });
        tiles.add(tile);
        if (tile.width === TILE_WIDTH) roots.push(tile.root());
      }
      rows[level] = row.subarray(row.length - (row.length % TILE_BYTES));
      additions = concatBytes(...roots);
    }

    const size = this.size + n;
    const edge = new RightEdge(size, trimEmpty(rows), entries, records, prior);
    return { edge, objects, entryHashes, tiles, root: treeHashSync(size, tiles.lookup(size)) };
  }

  /** Emits the bundles of one kind that the batch touches; returns the new partial bundle. */
  private bundles(kind: TileKind, old: readonly Uint8Array[], added: readonly Uint8Array[], out: StoredObject[]): Uint8Array[] {
    const all = [...old, ...added];
    const first = Math.floor(this.size / TILE_WIDTH);
    for (let k = 0; k * TILE_WIDTH < all.length; k++) {
      const chunk = all.slice(k * TILE_WIDTH, (k + 1) * TILE_WIDTH);
      out.push({ key: tilePath({ kind, index: first + k, width: chunk.length }), data: encodeBundle(chunk) });
    }
    return all.slice(all.length - (all.length % TILE_WIDTH));
  }
}

/** Drops trailing empty levels so the edge's shape depends only on its size. */
function trimEmpty(rows: Uint8Array[]): Uint8Array[] {
  let end = rows.length;
  while (end > 0 && rows[end - 1]!.length === 0) end--;
  return rows.slice(0, end);
}
