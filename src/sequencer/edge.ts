// The right edge of the tree: the partial tile at every level plus the partial entry and
// record bundles. Appending a batch to it is pure and synchronous: it yields the new edge,
// every tile and bundle the batch creates, and the new root. Memory is bounded by the
// edge (≤ 255 hashes a level), never by the log's size. A batch comes packed in a few flat
// buffers (PackedEntries) and its bundles are written straight from them.
import { HASH_SIZE, bytesEqual, concatBytes, leafHash } from '../hash.js';
import { ZERO_HASH, entryHash } from '../entry.js';
import { treeHashSync } from '../merkle.js';
import type { StoredObject } from '../store/store.js';
import { HashTile, TILE_WIDTH, type TileKind, TileSet, levelHashCount, tilePath } from '../tiles.js';

const TILE_BYTES = TILE_WIDTH * HASH_SIZE;
const EMPTY = new Uint8Array(0);

/** A batch's entries packed flat: canonical entries back to back (ends[i] is where the i-th ends), 32-byte entry and leaf hashes. */
export interface PackedEntries {
  readonly canonicals: Uint8Array;
  readonly ends: Uint32Array;
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
    const n = canonicals.length;
    const packed = packCanonicals(canonicals);
    const entryHashes = new Uint8Array(n * HASH_SIZE);
    const leafHashes = new Uint8Array(n * HASH_SIZE);
    let prior = this.lastEntryHash;
    canonicals.forEach((c, i) => {
      prior = entryHash(this.size + i, c, prior);
      entryHashes.set(prior, i * HASH_SIZE);
      leafHashes.set(leafHash(prior), i * HASH_SIZE);
    });
    return this.appendHashed({ ...packed, entryHashes, leafHashes });
  }

  /**
   * Appends entries whose entry and leaf hashes were computed as they arrived, chained from
   * this edge (the first link is checked: a batch sequenced from a stale edge is refused).
   */
  appendHashed(batch: PackedEntries): BatchResult {
    const { canonicals, ends, entryHashes, leafHashes } = batch;
    const n = ends.length;
    if (n === 0) throw new RangeError('empty batch');
    if (entryHashes.length !== n * HASH_SIZE || leafHashes.length !== n * HASH_SIZE) throw new RangeError('batch hashes do not match its entries');
    if (!bytesEqual(entryHash(this.size, canonicals.subarray(0, ends[0]!), this.lastEntryHash), entryHashes.subarray(0, HASH_SIZE))) {
      throw new RangeError(`batch is not chained to the edge at size ${this.size}`);
    }
    const prior = entryHashes.slice((n - 1) * HASH_SIZE);

    const objects: StoredObject[] = [];
    const entries = this.bundles('entries', this.entries, hashItems(entryHashes), objects);
    const records = this.bundles('records', this.records, canonicalItems(batch), objects);

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

  /** Emits the bundles of one kind that the batch touches; returns the new partial bundle. */
  private bundles(kind: TileKind, old: readonly Uint8Array[], added: Items, out: StoredObject[]): Uint8Array[] {
    const total = old.length + added.count;
    const first = Math.floor(this.size / TILE_WIDTH);
    for (let from = 0; from < total; from += TILE_WIDTH) {
      const to = Math.min(total, from + TILE_WIDTH);
      out.push({ key: tilePath({ kind, index: first + from / TILE_WIDTH, width: to - from }), data: encodeItems(old, added, from, to) });
    }
    // Copies again: the edge must not hold the batch's buffers.
    const partial: Uint8Array[] = [];
    for (let i = total - (total % TILE_WIDTH); i < total; i++) partial.push(i < old.length ? old[i]! : added.bytes.slice(added.start(i - old.length), added.end(i - old.length)));
    return partial;
  }
}

/** Items packed in one buffer: item k is bytes[start(k), end(k)). */
interface Items {
  readonly count: number;
  readonly bytes: Buffer;
  start(k: number): number;
  end(k: number): number;
}

const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

function hashItems(hashes: Uint8Array): Items {
  return { count: hashes.length / HASH_SIZE, bytes: asBuffer(hashes), start: (k) => k * HASH_SIZE, end: (k) => (k + 1) * HASH_SIZE };
}

function canonicalItems({ canonicals, ends }: Pick<PackedEntries, 'canonicals' | 'ends'>): Items {
  return { count: ends.length, bytes: asBuffer(canonicals), start: (k) => (k === 0 ? 0 : ends[k - 1]!), end: (k) => ends[k]! };
}

/** Bundle framing (as encodeBundle) of items [from, to) of `old` followed by `added`, copied straight from their buffers. */
function encodeItems(old: readonly Uint8Array[], added: Items, from: number, to: number): Uint8Array {
  const length = (i: number) => (i < old.length ? old[i]!.length : added.end(i - old.length) - added.start(i - old.length));
  let n = 0;
  for (let i = from; i < to; i++) n += 2 + length(i);
  const out = new Uint8Array(n);
  let off = 0;
  for (let i = from; i < to; i++) {
    const len = length(i);
    if (len > 0xffff) throw new RangeError(`bundle item of ${len} bytes exceeds 65,535`);
    out[off] = len >>> 8;
    out[off + 1] = len & 0xff;
    if (i < old.length) out.set(old[i]!, off + 2);
    else added.bytes.copy(out, off + 2, added.start(i - old.length), added.end(i - old.length));
    off += 2 + len;
  }
  return out;
}

/** The record bundle of a batch's canonical entries (what a staged batch holds). */
export function encodeRecords(batch: Pick<PackedEntries, 'canonicals' | 'ends'>): Uint8Array {
  return encodeItems([], canonicalItems(batch), 0, batch.ends.length);
}

/** Canonical entries packed back to back, with where each ends. */
export function packCanonicals(canonicals: readonly Uint8Array[]): Pick<PackedEntries, 'canonicals' | 'ends'> {
  const ends = new Uint32Array(canonicals.length);
  let at = 0;
  canonicals.forEach((c, i) => (ends[i] = at += c.length));
  const packed = new Uint8Array(at);
  canonicals.forEach((c, i) => packed.set(c, i === 0 ? 0 : ends[i - 1]!));
  return { canonicals: packed, ends };
}

/** Drops trailing empty levels so the edge's shape depends only on its size. */
function trimEmpty(rows: Uint8Array[]): Uint8Array[] {
  let end = rows.length;
  while (end > 0 && rows[end - 1]!.length === 0) end--;
  return rows.slice(0, end);
}
