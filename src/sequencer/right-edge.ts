// The right edge of the tree: the partial tile at every level plus the partial entry and
// record bundles. Appending a batch to it is pure and synchronous: it yields the new edge,
// every tile and bundle the batch creates, and the new root. Memory is bounded by the
// edge (≤ 255 hashes a level), never by the log's size. A batch comes as a few packed
// buffers (BatchEntries: the sequencing runs' canonical entries, flat hashes), and its
// bundles of each kind are framed straight from them into one buffer (see bundles()).
import { HASH_SIZE, bytesEqual, concatBytes } from '../core/hash.js';
import { ZERO_HASH, chainEntryHashes, entryHash } from '../core/entry.js';
import { treeHashSync } from '../core/merkle.js';
import type { StoredObject } from '../store/store.js';
import { HashTile, TILE_WIDTH, type TileKind, levelHashCount, tilePath } from '../core/tiles.js';
import { type Packed, frame, framedSize, packCanonicals, packedItem } from '../core/bundle.js';
import { TileSet } from '../read/tile-set.js';

const TILE_BYTES = TILE_WIDTH * HASH_SIZE;
const EMPTY = new Uint8Array(0);

/** A batch: its canonical entries in one or more packed pieces, its entry and leaf hashes flat (32 bytes each). */
export type { Packed } from '../core/bundle.js';

export interface BatchEntries {
  readonly canonicals: readonly Packed[];
  readonly entryHashes: Uint8Array;
  readonly leafHashes: Uint8Array;
}

export interface BatchResult {
  readonly edge: RightEdge;
  /** Hash tiles, entry bundles and record bundles to create. */
  readonly objects: StoredObject[];
  /** The batch's entry hashes, 32 bytes each. */
  readonly entryHashes: Uint8Array;
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
    const { entryHashes, leafHashes } = chainEntryHashes(canonicals, this.size, this.lastEntryHash);
    return this.appendHashed({ canonicals: [packCanonicals(canonicals)], entryHashes, leafHashes });
  }

  /**
   * Appends entries whose entry and leaf hashes were computed as they arrived, chained from
   * this edge (the first link is checked: a batch sequenced from a stale edge is refused).
   */
  appendHashed(batch: BatchEntries): BatchResult {
    const { canonicals, entryHashes, leafHashes } = batch;
    let n = 0;
    for (const p of canonicals) n += p.to - p.from;
    if (n === 0) throw new RangeError('empty batch');
    if (entryHashes.length !== n * HASH_SIZE || leafHashes.length !== n * HASH_SIZE)
      throw new RangeError('batch hashes do not match its entries');
    const first = canonicals.find((p) => p.to > p.from)!;
    if (
      !bytesEqual(
        entryHash(this.size, packedItem(first, first.from), this.lastEntryHash),
        entryHashes.subarray(0, HASH_SIZE),
      )
    ) {
      throw new RangeError(`batch is not chained to the edge at size ${this.size}`);
    }
    const prior = entryHashes.slice((n - 1) * HASH_SIZE);

    const objects: StoredObject[] = [];
    const entries = this.bundles('entries', this.entries, [hashes(entryHashes)], objects);
    const records = this.bundles('records', this.records, canonicals, objects);

    const tiles = new TileSet(this.partialTiles());
    const rows: Uint8Array[] = [];
    let additions: Uint8Array = leafHashes;
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
      // A copy: the edge outlives the batch and must not hold its rows.
      rows[level] = row.slice(row.length - (row.length % TILE_BYTES));
      additions = concatBytes(...roots);
    }

    const size = this.size + n;
    const edge = new RightEdge(size, trimEmpty(rows), entries, records, prior);
    return { edge, objects, entryHashes, tiles, root: treeHashSync(size, tiles.lookup(size)) };
  }

  /** Emits the bundles of one kind that the batch touches; returns the new partial bundle (copied). */
  private bundles(
    kind: TileKind,
    old: readonly Uint8Array[],
    added: readonly Packed[],
    out: StoredObject[],
  ): Uint8Array[] {
    let total = old.length;
    for (const p of added) total += p.to - p.from;
    const first = Math.floor(this.size / TILE_WIDTH);
    const framed: { key: string; items: ReturnType<typeof sliceItems>; size: number }[] = [];
    let bytes = 0;
    for (let from = 0; from < total; from += TILE_WIDTH) {
      const to = Math.min(total, from + TILE_WIDTH);
      const items = sliceItems(old, added, from, to);
      const size = framedSize(items.old, items.pieces);
      framed.push({ key: tilePath({ kind, index: first + from / TILE_WIDTH, width: to - from }), items, size });
      bytes += size;
    }
    // One buffer for all of the batch's bundles of this kind: large enough for malloc to map
    // it on its own and unmap it once the batch is gone, where hundreds of 8-70 KB buffers
    // freed every batch would fragment the heap and grow the process.
    const into = new Uint8Array(bytes);
    let at = 0;
    for (const f of framed) {
      out.push({ key: f.key, data: frame(f.items.old, f.items.pieces, into.subarray(at, at + f.size)) });
      at += f.size;
    }
    const rest = sliceItems(old, added, total - (total % TILE_WIDTH), total);
    return [
      ...rest.old,
      ...rest.pieces.flatMap((p) => Array.from({ length: p.to - p.from }, (_, j) => packedItem(p, p.from + j).slice())),
    ];
  }
}

/** Items [from, to) of `old` followed by the pieces' items. */
function sliceItems(
  old: readonly Uint8Array[],
  pieces: readonly Packed[],
  from: number,
  to: number,
): { old: Uint8Array[]; pieces: Packed[] } {
  const out: Packed[] = [];
  let base = old.length;
  for (const p of pieces) {
    const n = p.to - p.from;
    const a = Math.max(from, base);
    const b = Math.min(to, base + n);
    if (a < b) out.push({ ...p, from: p.from + a - base, to: p.from + b - base });
    base += n;
  }
  return { old: old.slice(from, Math.min(to, old.length)), pieces: out };
}

/** Flat 32-byte hashes as a packed piece. */
function hashes(flat: Uint8Array): Packed {
  const n = flat.length / HASH_SIZE;
  const ends = new Uint32Array(n);
  for (let j = 0; j < n; j++) ends[j] = (j + 1) * HASH_SIZE;
  return { bytes: flat, ends, from: 0, to: n };
}

/** Drops trailing empty levels so the edge's shape depends only on its size. */
function trimEmpty(rows: Uint8Array[]): Uint8Array[] {
  let end = rows.length;
  while (end > 0 && rows[end - 1]!.length === 0) end--;
  return rows.slice(0, end);
}
