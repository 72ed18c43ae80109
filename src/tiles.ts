// C2SP tlog-tiles: tile paths, hash tiles with their interior hashes, the tile a subtree
// hash lives in, and a HashReader that reads each needed tile once (DESIGN.md §1.2).
import { HASH_SIZE, nodeHash } from './hash.js';
import type { HashReader, SubtreeRef, SyncHashLookup } from './merkle.js';

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
  if (!Number.isInteger(id.width) || id.width < 1 || id.width > TILE_WIDTH) throw new RangeError(`bad tile width ${id.width}`);
  const base = `tile/${id.kind}/${formatTileIndex(id.index)}`;
  return id.width === TILE_WIDTH ? base : `${base}.p/${id.width}`;
}

const TILE_PATH = /^tile\/(entries|records|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*)([0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/;

/** Parses a C2SP tile path; null if it is not one (canonical form only). */
export function parseTilePath(path: string): TileId | null {
  const m = TILE_PATH.exec(path);
  if (!m) return null;
  const groups = [...(m[2] ?? '').split('/').filter(Boolean).map((g) => g.slice(1)), m[3]!];
  if (groups.length > 1 && groups[0] === '000') return null; // leading zero group is not canonical
  const index = groups.reduce((acc, g) => acc * 1000 + Number(g), 0);
  const width = m[4] === undefined ? TILE_WIDTH : Number(m[4]);
  if ((m[4] !== undefined && width >= TILE_WIDTH) || !Number.isSafeInteger(index)) return null; // .p/256 is not canonical
  const kind: TileKind = m[1] === 'entries' || m[1] === 'records' ? m[1] : Number(m[1]);
  return { kind, index, width };
}

/** Number of level-L tile hashes (hashes at tree level 8L) in a tree of `size` leaves. */
export function levelHashCount(level: number, size: number): number {
  return Math.floor(size / TILE_WIDTH ** level);
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
  private rows: Uint8Array[] | undefined;

  constructor(
    readonly level: number,
    readonly index: number,
    readonly data: Uint8Array,
  ) {
    if (data.length === 0 || data.length % HASH_SIZE !== 0 || data.length > TILE_WIDTH * HASH_SIZE) {
      throw new TileFormatError(`tile/${level}/${formatTileIndex(index)} has ${data.length} bytes, not a whole number of 1..256 hashes`);
    }
  }

  get width(): number {
    return this.data.length / HASH_SIZE;
  }

  get path(): string {
    return tilePath({ kind: this.level, index: this.index, width: this.width });
  }

  /** Hash j of row r (r = 0 is the stored row; row r has floor(width / 2^r) hashes). */
  hashAt(r: number, j: number): Uint8Array {
    const row = this.row(r);
    if (j < 0 || (j + 1) * HASH_SIZE > row.length) {
      throw new RangeError(`tile/${this.level}/${formatTileIndex(this.index)} (width ${this.width}) has no hash ${j} in row ${r}`);
    }
    return row.subarray(j * HASH_SIZE, (j + 1) * HASH_SIZE);
  }

  /** Hash of the whole tile when full: the tree hash at level 8(L+1). */
  root(): Uint8Array {
    if (this.width !== TILE_WIDTH) throw new RangeError('only a full tile has a root');
    return this.hashAt(TILE_HEIGHT, 0);
  }

  private row(r: number): Uint8Array {
    if (r === 0) return this.data;
    if (!this.rows) {
      this.rows = [this.data];
      for (let k = 1; k <= TILE_HEIGHT; k++) {
        const below = this.rows[k - 1]!;
        const n = Math.floor(below.length / HASH_SIZE / 2);
        const row = new Uint8Array(n * HASH_SIZE);
        for (let j = 0; j < n; j++) {
          const l = below.subarray(2 * j * HASH_SIZE, (2 * j + 1) * HASH_SIZE);
          const rr = below.subarray((2 * j + 1) * HASH_SIZE, (2 * j + 2) * HASH_SIZE);
          row.set(nodeHash(l, rr), j * HASH_SIZE);
        }
        this.rows.push(row);
      }
    }
    const row = this.rows[r];
    if (!row) throw new RangeError(`tile row ${r} out of range`);
    return row;
  }
}

export class TileFormatError extends Error {
  override name = 'TileFormatError';
}

/** Where a perfect subtree's hash lives: tile (level, index), row r, position j. */
export function locateSubtree(ref: SubtreeRef): { level: number; index: number; row: number; pos: number } {
  const level = Math.floor(ref.level / TILE_HEIGHT);
  const row = ref.level - level * TILE_HEIGHT;
  const bottom = ref.index * 2 ** row; // first tile-row-0 hash under the subtree
  const index = Math.floor(bottom / TILE_WIDTH);
  return { level, index, row, pos: (bottom - index * TILE_WIDTH) / 2 ** row };
}

/** Fetches hash tile (level, index) at the given width (the width the tree size implies). */
export type TileFetcher = (level: number, index: number, width: number) => Promise<HashTile>;

const tileKey = (level: number, index: number): string => `${level}/${index}`;

function locateAll(refs: readonly SubtreeRef[], size: number) {
  return refs.map((ref) => {
    if ((ref.index + 1) * 2 ** ref.level > size) {
      throw new RangeError(`subtree ${ref.level}/${ref.index} is beyond tree size ${size}`);
    }
    return locateSubtree(ref);
  });
}

/**
 * A HashReader over the tiles of a tree of `size` leaves. Each call groups the refs by
 * tile and fetches every tile once, in parallel.
 */
export class TileHashReader implements HashReader {
  readonly rangeMemo = new Map<string, Uint8Array>();

  constructor(
    readonly size: number,
    private readonly fetch: TileFetcher,
  ) {}

  async readHashes(refs: readonly SubtreeRef[]): Promise<Uint8Array[]> {
    const spots = locateAll(refs, this.size);
    const pending = new Map<string, Promise<HashTile>>();
    for (const s of spots) {
      const key = tileKey(s.level, s.index);
      if (!pending.has(key)) pending.set(key, this.fetch(s.level, s.index, tileWidthAt(s.level, s.index, this.size)));
    }
    const loaded = new Map<string, HashTile>();
    await Promise.all([...pending].map(async ([k, p]) => loaded.set(k, await p)));
    return spots.map((s) => loaded.get(tileKey(s.level, s.index))!.hashAt(s.row, s.pos));
  }
}

/** Hash tiles held in memory (a sequencer's right edge and the tiles of its last batch). */
export class TileSet {
  private readonly tiles = new Map<string, HashTile>();

  constructor(tiles: Iterable<HashTile> = []) {
    for (const t of tiles) this.add(t);
  }

  add(tile: HashTile): void {
    const key = tileKey(tile.level, tile.index);
    const had = this.tiles.get(key);
    if (!had || had.width < tile.width) this.tiles.set(key, tile);
  }

  get(level: number, index: number): HashTile | undefined {
    return this.tiles.get(tileKey(level, index));
  }

  all(): IterableIterator<HashTile> {
    return this.tiles.values();
  }

  /** A synchronous lookup for a tree of `size` leaves; throws if a needed tile is absent. */
  lookup(size: number): SyncHashLookup {
    return (refs) =>
      locateAll(refs, size).map((s) => {
        const tile = this.get(s.level, s.index);
        if (!tile || tile.width < tileWidthAt(s.level, s.index, size)) {
          throw new RangeError(`tile ${s.level}/${s.index} is not in memory`);
        }
        return tile.hashAt(s.row, s.pos);
      });
  }
}

/** Entry/record bundle framing: per item a 2-byte big-endian length, then the bytes. */
export function encodeBundle(items: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const it of items) {
    if (it.length > 0xffff) throw new RangeError(`bundle item of ${it.length} bytes exceeds 65,535`);
    n += 2 + it.length;
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const it of items) {
    out[off] = it.length >>> 8;
    out[off + 1] = it.length & 0xff;
    out.set(it, off + 2);
    off += 2 + it.length;
  }
  return out;
}

export function decodeBundle(data: Uint8Array, path = 'bundle', maxItems = TILE_WIDTH): Uint8Array[] {
  const items: Uint8Array[] = [];
  let off = 0;
  while (off < data.length) {
    if (off + 2 > data.length) throw new TileFormatError(`${path}: truncated length at byte ${off}`);
    const len = (data[off]! << 8) | data[off + 1]!;
    if (off + 2 + len > data.length) throw new TileFormatError(`${path}: item at byte ${off} runs past the end`);
    items.push(data.subarray(off + 2, off + 2 + len));
    off += 2 + len;
  }
  if (items.length > maxItems) throw new TileFormatError(`${path}: ${items.length} items, more than ${maxItems}`);
  return items;
}
