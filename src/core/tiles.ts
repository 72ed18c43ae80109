// C2SP tlog-tiles: tile paths, hash tiles with their interior hashes, the tile a subtree
// hash lives in, and a HashReader that reads each needed tile once (docs/design.md §1.2).
import { HASH_SIZE, nodeHash } from './hash.js';
import { type HashReader, RightEdgeMemo, type SubtreeRef, subtreeWidth } from './merkle.js';

export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 256;

/** A hash tile level (0, 1, …) or one of the two bundle kinds. */
export type TileKind = number | 'entries' | 'records';

export interface TileId {
  readonly kind: TileKind;
  readonly index: number;
  /** 1..256; 256 is a full tile. */
  readonly width: number;
}

/** 5 → "005", 1234067 → "x001/x234/067". */
export function formatTileIndex(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`bad tile index ${n}`);
  let s = String(n % 1000).padStart(3, '0');
  for (n = Math.floor(n / 1000); n > 0; n = Math.floor(n / 1000)) s = `x${String(n % 1000).padStart(3, '0')}/${s}`;
  return s;
}

export function tilePath(id: TileId): string {
  if (!Number.isInteger(id.width) || id.width < 1 || id.width > TILE_WIDTH)
    throw new RangeError(`bad tile width ${id.width}`);
  const base = `tile/${id.kind}/${formatTileIndex(id.index)}`;
  return id.width === TILE_WIDTH ? base : `${base}.p/${id.width}`;
}

const TILE_PATH = /^tile\/(entries|records|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*)([0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/;

/** Parses a C2SP tile path; null if it is not one (canonical form only). */
export function parseTilePath(path: string): TileId | null {
  const m = TILE_PATH.exec(path);
  if (!m) return null;
  const groups = [
    ...(m[2] ?? '')
      .split('/')
      .filter(Boolean)
      .map((g) => g.slice(1)),
    m[3]!,
  ];
  if (groups.length > 1 && groups[0] === '000') return null; // leading zero group is not canonical
  const index = groups.reduce((acc, g) => acc * 1000 + Number(g), 0);
  const width = m[4] === undefined ? TILE_WIDTH : Number(m[4]);
  if ((m[4] !== undefined && width >= TILE_WIDTH) || !Number.isSafeInteger(index)) return null; // .p/256 is not canonical
  const kind: TileKind = m[1] === 'entries' || m[1] === 'records' ? m[1] : Number(m[1]);
  return { kind, index, width };
}

/** Leaves under one hash of each tile level (256^L), looked up rather than raised per call. */
const LEAVES_PER_LEVEL_HASH = Array.from({ length: 8 }, (_, level) => TILE_WIDTH ** level);

/** Number of level-L tile hashes (hashes at tree level 8L) in a tree of `size` leaves. */
export function levelHashCount(level: number, size: number): number {
  return Math.floor(size / (LEAVES_PER_LEVEL_HASH[level] ?? TILE_WIDTH ** level));
}

/** Width of tile (level, index) in a tree of `size` leaves; 0 if the tile does not exist. */
export function tileWidthAt(level: number, index: number, size: number): number {
  return Math.max(0, Math.min(TILE_WIDTH, levelHashCount(level, size) - index * TILE_WIDTH));
}

/**
 * A hash tile: `width` hashes at tree level 8L, plus the interior hashes above them,
 * computed once on first use (so a proof reading eight levels from one tile hashes it once).
 */
export class HashTile {
  private interior: Uint8Array | undefined;

  /** The stored hashes, as a plain Uint8Array view (proofs cut hashes from it; a Buffer's cuts cost about twice as much). */
  readonly data: Uint8Array;

  constructor(
    readonly level: number,
    readonly index: number,
    data: Uint8Array,
  ) {
    if (data.length === 0 || data.length % HASH_SIZE !== 0 || data.length > TILE_WIDTH * HASH_SIZE) {
      throw new TileFormatError(
        `tile/${level}/${formatTileIndex(index)} has ${data.length} bytes, not a whole number of 1..256 hashes`,
      );
    }
    this.data = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }

  get width(): number {
    return this.data.length / HASH_SIZE;
  }

  get path(): string {
    return tilePath({ kind: this.level, index: this.index, width: this.width });
  }

  /** Hash j of row r (r = 0 is the stored row; row r has floor(width / 2^r) hashes). */
  hashAt(r: number, j: number): Uint8Array {
    const from = this.offsetOf(r, j);
    return this.bytesOf(r).subarray(from, from + HASH_SIZE);
  }

  /** Copies hash j of row r into `out` at `at`: as hashAt, without a view per hash (an entry proof copies ~20). */
  copyHash(r: number, j: number, out: Uint8Array, at: number): void {
    const from = this.offsetOf(r, j);
    const bytes = this.bytesOf(r);
    for (let k = 0; k < HASH_SIZE; k++) out[at + k] = bytes[from + k]!;
  }

  /** Bytes this tile keeps alive, counting its interior rows (computed on first use) as about its data again. */
  get retainedBytes(): number {
    return this.data.buffer.byteLength + this.data.length;
  }

  /** Hash of the whole tile when full: the tree hash at level 8(L+1). */
  root(): Uint8Array {
    if (this.width !== TILE_WIDTH) throw new RangeError('only a full tile has a root');
    return this.hashAt(TILE_HEIGHT, 0);
  }

  /** Where hash j of row r starts in bytesOf(r); throws for a hash the tile does not have. */
  private offsetOf(r: number, j: number): number {
    const width = this.width;
    if (!(r >= 0 && r <= TILE_HEIGHT) || !(j >= 0 && j < width >> r)) {
      throw new RangeError(
        `tile/${this.level}/${formatTileIndex(this.index)} (width ${this.width}) has no hash ${j} in row ${r}`,
      );
    }
    let at = j * HASH_SIZE;
    for (let k = 1; k < r; k++) at += (width >> k) * HASH_SIZE;
    return at;
  }

  /**
   * The bytes holding row r: the stored row, or the interior rows 1..8 back to back,
   * computed on first use. One array, not one per row: a proof reads a hash from each row
   * of a tile met at random, and each array is another cache miss.
   */
  private bytesOf(r: number): Uint8Array {
    if (r === 0) return this.data;
    if (!this.interior) {
      let size = 0;
      for (let k = 1; k <= TILE_HEIGHT; k++) size += (this.width >> k) * HASH_SIZE;
      const interior = new Uint8Array(size);
      let below = this.data;
      let at = 0;
      for (let k = 1; k <= TILE_HEIGHT; k++) {
        const n = Math.floor(below.length / HASH_SIZE / 2);
        const row = interior.subarray(at, at + n * HASH_SIZE);
        for (let j = 0; j < n; j++) {
          const l = below.subarray(2 * j * HASH_SIZE, (2 * j + 1) * HASH_SIZE);
          const rr = below.subarray((2 * j + 1) * HASH_SIZE, (2 * j + 2) * HASH_SIZE);
          row.set(nodeHash(l, rr), j * HASH_SIZE);
        }
        below = row;
        at += n * HASH_SIZE;
      }
      this.interior = interior;
    }
    return this.interior;
  }
}

/** The partial tiles and bundles that exist at tree size `size` (one per level with a partial tile). */
export function partialTilesAt(size: number): { kind: TileKind; index: number; width: number; level: number }[] {
  const out: { kind: TileKind; index: number; width: number; level: number }[] = [];
  const w0 = size % TILE_WIDTH;
  if (w0 > 0) {
    const index = Math.floor(size / TILE_WIDTH);
    for (const kind of ['entries', 'records'] as const) out.push({ kind, index, width: w0, level: 0 });
  }
  for (let level = 0; levelHashCount(level, size) > 0; level++) {
    const count = levelHashCount(level, size);
    if (count % TILE_WIDTH > 0)
      out.push({ kind: level, index: Math.floor(count / TILE_WIDTH), width: count % TILE_WIDTH, level });
  }
  return out;
}

/** Hash of a full tile's 256 hashes: the tree hash one tile level up. */
export function tileRoot(row: Uint8Array): Uint8Array {
  if (row.length !== TILE_WIDTH * HASH_SIZE) throw new RangeError('only a full tile has a root');
  let cur = row;
  for (let n = TILE_WIDTH / 2; n >= 1; n /= 2) {
    const next = new Uint8Array(n * HASH_SIZE);
    for (let j = 0; j < n; j++)
      next.set(
        nodeHash(
          cur.subarray(2 * j * HASH_SIZE, (2 * j + 1) * HASH_SIZE),
          cur.subarray((2 * j + 1) * HASH_SIZE, (2 * j + 2) * HASH_SIZE),
        ),
        j * HASH_SIZE,
      );
    cur = next;
  }
  return cur;
}

export class TileFormatError extends Error {
  override name = 'TileFormatError';
}

/** Where a perfect subtree's hash lives: tile (level, index), row r, position j. */
export function locateSubtree(ref: SubtreeRef): { level: number; index: number; row: number; pos: number } {
  const level = Math.floor(ref.level / TILE_HEIGHT);
  const row = ref.level - level * TILE_HEIGHT;
  const bottom = ref.index * subtreeWidth(row); // first tile-row-0 hash under the subtree
  const index = Math.floor(bottom / TILE_WIDTH);
  return { level, index, row, pos: (bottom - index * TILE_WIDTH) / subtreeWidth(row) };
}

/**
 * Fetches hash tile (level, index) at the given width (the width the tree size implies);
 * a cache may answer synchronously.
 */
export type TileFetcher = (level: number, index: number, width: number) => HashTile | Promise<HashTile>;

/** Where a subtree hash of a tree of `size` leaves lives; throws for one beyond the tree. */
function locateIn(ref: SubtreeRef, size: number): ReturnType<typeof locateSubtree> {
  if ((ref.index + 1) * subtreeWidth(ref.level) > size) {
    throw new RangeError(`subtree ${ref.level}/${ref.index} is beyond tree size ${size}`);
  }
  return locateSubtree(ref);
}

/** Where each subtree hash of a tree of `size` leaves lives; throws for one beyond the tree. */
export function locateAll(refs: readonly SubtreeRef[], size: number) {
  return refs.map((ref) => locateIn(ref, size));
}

/**
 * A HashReader over the tiles of a tree of `size` leaves. Each call groups the refs by
 * tile and fetches every tile once, in parallel.
 */
export class TileHashReader implements HashReader {
  readonly rangeMemo: RightEdgeMemo;

  constructor(
    readonly size: number,
    private readonly fetch: TileFetcher,
  ) {
    this.rangeMemo = new RightEdgeMemo(size);
  }

  async readHashes(refs: readonly SubtreeRef[]): Promise<Uint8Array[]> {
    return this.hashes(refs);
  }

  /** As readHashes, but synchronous when the fetcher answers every tile synchronously. */
  hashes(refs: readonly SubtreeRef[]): Uint8Array[] | Promise<Uint8Array[]> {
    // A request needs a handful of tiles (about one per level), so a linear scan beats a Map;
    // each ref's place is kept in flat arrays (proofs are the read path's hot loop).
    const count = refs.length;
    const levels: number[] = [];
    const indexes: number[] = [];
    const tiles: (HashTile | Promise<HashTile>)[] = [];
    const slots = new Array<number>(count);
    const rows = new Array<number>(count);
    const positions = new Array<number>(count);
    let waiting = false;
    for (let i = 0; i < count; i++) {
      const s = locateIn(refs[i]!, this.size);
      let t = 0;
      while (t < tiles.length && (levels[t] !== s.level || indexes[t] !== s.index)) t++;
      if (t === tiles.length) {
        const tile = this.fetch(s.level, s.index, tileWidthAt(s.level, s.index, this.size));
        waiting ||= tile instanceof Promise;
        levels.push(s.level);
        indexes.push(s.index);
        tiles.push(tile);
      }
      slots[i] = t;
      rows[i] = s.row;
      positions[i] = s.pos;
    }
    const pick = (loaded: readonly HashTile[]) => {
      const out = new Array<Uint8Array>(count);
      for (let i = 0; i < count; i++) out[i] = loaded[slots[i]!]!.hashAt(rows[i]!, positions[i]!);
      return out;
    };
    return waiting ? Promise.all(tiles).then(pick) : pick(tiles as HashTile[]);
  }
}
