// src/core/tiles.ts: C2SP tile paths, hash tiles, locating subtree hashes in tiles, and bundles.
import { describe, expect, it } from 'vitest';
import { leafHash } from '../../src/core/hash.js';
import { type SubtreeRef, treeHash } from '../../src/core/merkle.js';
import {
  HashTile,
  TILE_HEIGHT,
  TILE_WIDTH,
  type TileFetcher,
  TileFormatError,
  TileHashReader,
  type TileId,
  formatTileIndex,
  levelHashCount,
  locateSubtree,
  parseTilePath,
  tilePath,
  tileWidthAt,
} from '../../src/core/tiles.js';
import { decodeBundle, encodeBundle } from '../../src/core/bundle.js';
import { TileSet } from '../../src/read/tile-set.js';
import { NaiveTree, sha256 } from '../helpers/naive.js';
import { hex, loadVectors } from '../helpers/vectors.js';

const vectors = loadVectors();
const SIZE = 70000;

function u64be(i: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(i));
  return b;
}

function concat(hs: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(hs.length * 32);
  hs.forEach((h, i) => out.set(h, i * 32));
  return out;
}

/** Every tile of a tree of `size` leaves, derived from levelHashCount / tileWidthAt / tilePath. */
function allTileIds(size: number, kind: 'hash' | 'entries' | 'records'): TileId[] {
  const ids: TileId[] = [];
  for (let level = 0; levelHashCount(level, size) > 0; level++) {
    if (kind !== 'hash' && level > 0) break;
    for (let index = 0; tileWidthAt(level, index, size) > 0; index++) {
      ids.push({ kind: kind === 'hash' ? level : kind, index, width: tileWidthAt(level, index, size) });
    }
  }
  return ids;
}

describe('tile index encoding', () => {
  it('matches vectors.tiles.indexEncoding', () => {
    const enc = vectors.tiles.indexEncoding;
    expect(Object.keys(enc).length).toBeGreaterThanOrEqual(5);
    for (const [n, s] of Object.entries(enc)) expect(formatTileIndex(Number(n))).toBe(s);
    expect(enc['1234067']).toBe('x001/x234/067');
  });

  it('groups digits in threes with x prefixes', () => {
    expect(formatTileIndex(0)).toBe('000');
    expect(formatTileIndex(5)).toBe('005');
    expect(formatTileIndex(999)).toBe('999');
    expect(formatTileIndex(1000)).toBe('x001/000');
    expect(formatTileIndex(1001)).toBe('x001/001');
    expect(formatTileIndex(1000000)).toBe('x001/x000/000');
    expect(formatTileIndex(1234067)).toBe('x001/x234/067');
    expect(formatTileIndex(Number.MAX_SAFE_INTEGER)).toBe('x009/x007/x199/x254/x740/991');
  });

  it('refuses non-integers and negatives', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => formatTileIndex(bad)).toThrow(RangeError);
    }
  });

  it('tilePath writes full and partial tiles', () => {
    expect(tilePath({ kind: 0, index: 5, width: 256 })).toBe('tile/0/005');
    expect(tilePath({ kind: 0, index: 273, width: 112 })).toBe('tile/0/273.p/112');
    expect(tilePath({ kind: 2, index: 1234067, width: 1 })).toBe('tile/2/x001/x234/067.p/1');
    expect(tilePath({ kind: 'entries', index: 1000, width: 256 })).toBe('tile/entries/x001/000');
    expect(tilePath({ kind: 'records', index: 7, width: 255 })).toBe('tile/records/007.p/255');
    for (const width of [0, 257, 1.5, -1]) expect(() => tilePath({ kind: 0, index: 0, width })).toThrow(RangeError);
  });
});

describe('the tiles of a 70,000-leaf tree', () => {
  it('level hash counts and widths', () => {
    expect([0, 1, 2, 3].map((l) => levelHashCount(l, SIZE))).toEqual([70000, 273, 1, 0]);
    expect(tileWidthAt(0, 0, SIZE)).toBe(256);
    expect(tileWidthAt(0, 272, SIZE)).toBe(256);
    expect(tileWidthAt(0, 273, SIZE)).toBe(112);
    expect(tileWidthAt(0, 274, SIZE)).toBe(0);
    expect(tileWidthAt(1, 0, SIZE)).toBe(256);
    expect(tileWidthAt(1, 1, SIZE)).toBe(17);
    expect(tileWidthAt(1, 2, SIZE)).toBe(0);
    expect(tileWidthAt(2, 0, SIZE)).toBe(1);
    expect(tileWidthAt(3, 0, SIZE)).toBe(0);
    expect(tileWidthAt(0, 0, 0)).toBe(0);
    expect(tileWidthAt(0, 0, 1)).toBe(1);
    expect(tileWidthAt(1, 0, 255)).toBe(0);
    expect(tileWidthAt(1, 0, 256)).toBe(1);
  });

  it('hash tile paths equal vectors.tiles.hashTiles exactly', () => {
    const paths = allTileIds(SIZE, 'hash').map(tilePath);
    expect(paths.length).toBe(277);
    expect(new Set(paths).size).toBe(paths.length);
    expect([...paths].sort()).toEqual([...vectors.tiles.hashTiles].sort());
    expect(paths).toEqual(vectors.tiles.hashTiles);
  });

  it('entry bundle paths equal vectors.tiles.entryBundles exactly', () => {
    const paths = allTileIds(SIZE, 'entries').map(tilePath);
    expect(paths.length).toBe(274);
    expect([...paths].sort()).toEqual([...vectors.tiles.entryBundles].sort());
    expect(paths).toEqual(vectors.tiles.entryBundles);
    const records = allTileIds(SIZE, 'records').map(tilePath);
    expect(records).toEqual(vectors.tiles.entryBundles.map((p) => p.replace('tile/entries/', 'tile/records/')));
  });
});

describe('parseTilePath', () => {
  it('round-trips every vector path', () => {
    const all = [
      ...vectors.tiles.hashTiles,
      ...vectors.tiles.entryBundles,
      ...vectors.tiles.entryBundles.map((p) => p.replace('tile/entries/', 'tile/records/')),
    ];
    for (const p of all) {
      const id = parseTilePath(p);
      expect(id, p).not.toBeNull();
      expect(tilePath(id!)).toBe(p);
    }
    expect(parseTilePath('tile/0/273.p/112')).toEqual({ kind: 0, index: 273, width: 112 });
    expect(parseTilePath('tile/entries/005')).toEqual({ kind: 'entries', index: 5, width: 256 });
    expect(parseTilePath('tile/records/x001/x234/067.p/255')).toEqual({ kind: 'records', index: 1234067, width: 255 });
    expect(parseTilePath('tile/2/000.p/1')).toEqual({ kind: 2, index: 0, width: 1 });
  });

  it('round-trips many indexes, levels and widths', () => {
    const indexes = [
      0,
      1,
      9,
      10,
      99,
      100,
      999,
      1000,
      1001,
      999999,
      1000000,
      1234067,
      2 ** 32,
      2 ** 40 + 7,
      Number.MAX_SAFE_INTEGER,
    ];
    for (const index of indexes) {
      for (const kind of [0, 1, 7, 63, 'entries', 'records'] as const) {
        for (const width of [1, 2, 99, 100, 255, 256]) {
          const id: TileId = { kind, index, width };
          expect(parseTilePath(tilePath(id))).toEqual(id);
        }
      }
    }
  });

  it('rejects non-canonical and malformed paths', () => {
    const bad = [
      'tile/0/x000/005', // leading zero group
      'tile/0/x000/x001/000',
      'tile/0/000.p/0',
      'tile/0/000.p/256',
      'tile/0/000.p/257',
      'tile/0/000.p/007', // leading zeros in the width
      'tile/0/000.p/07',
      'tile/0/000.p/',
      'tile/0/000.p',
      'tile/foo/000',
      'tile/Entries/000',
      'tile/0/000/', // trailing slash
      'tile/0/x001/',
      '/tile/0/000',
      'tile/0/5',
      'tile/0/05',
      'tile/0/0005',
      'tile/0/1234',
      'tile/0/x1/000',
      'tile/0/x0001/000',
      'tile/0/001/000',
      'tile/0/x001',
      'tile/00/000',
      'tile/01/000',
      'tile/-1/000',
      'tile//000',
      'tile/0/',
      'tile/0/000 ',
      ' tile/0/000',
      'tile/0/000\n',
      'tile/0/abc',
      'tile/0/000.p/1.p/2',
      'tile/0/x009/x007/x199/x254/x740/992', // 2^53, not a safe integer
      'tiles/0/000',
      'checkpoint',
      '',
    ];
    for (const p of bad) expect(parseTilePath(p), JSON.stringify(p)).toBeNull();
  });
});

// A full tree of 70,000 leaves and its tiles, for HashTile / locateSubtree / readers.
const inputs = Array.from({ length: SIZE }, (_, i) => sha256(u64be(i)));
const leaves = inputs.map((d) => leafHash(d));
const naive = new NaiveTree(leaves);
const tiles = new Map<string, HashTile>();
{
  let row: Uint8Array[] = leaves;
  for (let level = 0; row.length > 0; level++) {
    const next: Uint8Array[] = [];
    for (let t = 0; t * TILE_WIDTH < row.length; t++) {
      const chunk = row.slice(t * TILE_WIDTH, (t + 1) * TILE_WIDTH);
      const tile = new HashTile(level, t, concat(chunk));
      tiles.set(`${level}/${t}`, tile);
      if (chunk.length === TILE_WIDTH) next.push(tile.root());
    }
    row = next;
  }
}

describe('HashTile', () => {
  it('refuses data that is not 1..256 whole hashes', () => {
    for (const n of [0, 1, 31, 33, 64 + 1, 257 * 32, 300 * 32]) {
      expect(() => new HashTile(0, 0, new Uint8Array(n))).toThrow(TileFormatError);
    }
    expect(new HashTile(0, 0, new Uint8Array(32)).width).toBe(1);
    expect(new HashTile(0, 0, new Uint8Array(256 * 32)).width).toBe(256);
  });

  it('knows its path', () => {
    expect(tiles.get('0/273')!.path).toBe('tile/0/273.p/112');
    expect(tiles.get('0/5')!.path).toBe('tile/0/005');
    expect(tiles.get('1/1')!.path).toBe('tile/1/001.p/17');
    expect(tiles.get('2/0')!.path).toBe('tile/2/000.p/1');
  });

  it('every row of a full tile holds the naive subtree hashes, and root() is MTH of its 256 leaves', () => {
    for (const t of [0, 1, 200, 272]) {
      const tile = tiles.get(`0/${t}`)!;
      for (let r = 0; r <= TILE_HEIGHT; r++) {
        const step = 2 ** r;
        for (let j = 0; j < TILE_WIDTH / step; j++) {
          const lo = t * TILE_WIDTH + j * step;
          expect(hex(tile.hashAt(r, j))).toBe(hex(naive.mth(lo, lo + step)));
        }
        expect(() => tile.hashAt(r, TILE_WIDTH / step)).toThrow(RangeError);
        expect(() => tile.hashAt(r, -1)).toThrow(RangeError);
      }
      expect(hex(tile.root())).toBe(hex(naive.mth(t * TILE_WIDTH, (t + 1) * TILE_WIDTH)));
      expect(() => tile.hashAt(TILE_HEIGHT + 1, 0)).toThrow(RangeError);
    }
    // a level-1 tile: its rows are subtrees of 2^(8+r) leaves
    const l1 = tiles.get('1/0')!;
    for (let r = 0; r <= TILE_HEIGHT; r++) {
      const step = 2 ** (8 + r);
      for (const j of new Set([0, 1, TILE_WIDTH / 2 ** r - 1].filter((x) => x < TILE_WIDTH / 2 ** r))) {
        expect(hex(l1.hashAt(r, j))).toBe(hex(naive.mth(j * step, (j + 1) * step)));
      }
    }
  });

  it('a partial tile has floor(width / 2^r) hashes in row r and no root', () => {
    const tile = tiles.get('0/273')!; // 112 leaves: 69888..69999
    expect(tile.width).toBe(112);
    for (let r = 0; r <= TILE_HEIGHT; r++) {
      const count = Math.floor(112 / 2 ** r);
      for (let j = 0; j < count; j++) {
        const lo = 273 * 256 + j * 2 ** r;
        expect(hex(tile.hashAt(r, j))).toBe(hex(naive.mth(lo, lo + 2 ** r)));
      }
      expect(() => tile.hashAt(r, count)).toThrow(RangeError);
    }
    expect(() => tile.root()).toThrow(RangeError);
  });
});

describe('locateSubtree', () => {
  it('maps subtrees to tile, row and position', () => {
    expect(locateSubtree({ level: 0, index: 0 })).toEqual({ level: 0, index: 0, row: 0, pos: 0 });
    expect(locateSubtree({ level: 0, index: 300 })).toEqual({ level: 0, index: 1, row: 0, pos: 44 });
    expect(locateSubtree({ level: 3, index: 40 })).toEqual({ level: 0, index: 1, row: 3, pos: 8 });
    expect(locateSubtree({ level: 8, index: 0 })).toEqual({ level: 1, index: 0, row: 0, pos: 0 });
    expect(locateSubtree({ level: 8, index: 5 })).toEqual({ level: 1, index: 0, row: 0, pos: 5 });
    expect(locateSubtree({ level: 8, index: 273 })).toEqual({ level: 1, index: 1, row: 0, pos: 17 });
    expect(locateSubtree({ level: 9, index: 3 })).toEqual({ level: 1, index: 0, row: 1, pos: 3 });
    expect(locateSubtree({ level: 16, index: 1 })).toEqual({ level: 2, index: 0, row: 0, pos: 1 });
    expect(locateSubtree({ level: 0, index: 2 ** 40 + 5 })).toEqual({ level: 0, index: 2 ** 32, row: 0, pos: 5 });
    expect(locateSubtree({ level: 41, index: 3 })).toEqual({ level: 5, index: 0, row: 1, pos: 3 });
  });

  it('every perfect subtree of the 70,000-leaf tree is found in the in-memory tiles', () => {
    const set = new TileSet(tiles.values());
    const lookup = set.lookup(SIZE);
    const refs: SubtreeRef[] = [];
    for (let level = 0; 2 ** level <= SIZE; level++) {
      for (let index = 0; (index + 1) * 2 ** level <= SIZE; index++) refs.push({ level, index });
    }
    const got = lookup(refs);
    const wrong = refs.filter(
      (r, i) => Buffer.compare(got[i]!, naive.mth(r.index * 2 ** r.level, (r.index + 1) * 2 ** r.level)) !== 0,
    );
    expect(refs.length).toBe(139994);
    expect(wrong).toEqual([]);
  });
});

describe('TileSet', () => {
  it('refuses subtrees beyond the tree size and tiles it does not have', () => {
    const set = new TileSet(tiles.values());
    expect(() => set.lookup(600)([{ level: 0, index: 600 }])).toThrow(RangeError);
    expect(() => set.lookup(600)([{ level: 3, index: 75 }])).toThrow(RangeError); // leaves 600..607: beyond the tree
    expect(set.lookup(600)([{ level: 3, index: 74 }]).length).toBe(1);
    const partial = new TileSet([tiles.get('0/0')!]);
    expect(() => partial.lookup(600)([{ level: 0, index: 300 }])).toThrow(RangeError);
  });

  it('keeps the widest version of each tile and refuses one narrower than the size needs', () => {
    const full = tiles.get('0/0')!;
    const narrow = new HashTile(0, 0, full.data.subarray(0, 10 * 32));
    const set = new TileSet([narrow]);
    expect(set.get(0, 0)!.width).toBe(10);
    expect(hex(set.lookup(10)([{ level: 0, index: 9 }])[0]!)).toBe(hex(leaves[9]!));
    expect(() => set.lookup(11)([{ level: 0, index: 0 }])).toThrow(RangeError);
    set.add(full);
    expect(set.get(0, 0)).toBe(full);
    set.add(narrow);
    expect(set.get(0, 0)).toBe(full);
    expect(set.get(0, 1)).toBeUndefined();
  });
});

describe('TileHashReader', () => {
  it('fetches each tile once per call, at the width the tree size implies', async () => {
    const calls: string[] = [];
    const fetch: TileFetcher = async (level, index, width) => {
      calls.push(`${level}/${index}/${width}`);
      const t = tiles.get(`${level}/${index}`)!;
      return new HashTile(level, index, t.data.subarray(0, width * 32));
    };
    const reader = new TileHashReader(65537, fetch);
    const refs: SubtreeRef[] = [
      { level: 0, index: 0 },
      { level: 0, index: 1 },
      { level: 4, index: 3 },
      { level: 0, index: 65536 },
      { level: 8, index: 100 },
      { level: 9, index: 7 },
      { level: 16, index: 0 },
    ];
    const got = await reader.readHashes(refs);
    expect(got.map(hex)).toEqual(refs.map((r) => hex(naive.mth(r.index * 2 ** r.level, (r.index + 1) * 2 ** r.level))));
    expect([...calls].sort()).toEqual(['0/0/256', '0/256/1', '1/0/256', '2/0/1']);
    expect(hex(await treeHash(65537, reader))).toBe(vectors.large.roots.find((r) => r.size === 65537)!.root);
  });

  it('refuses subtrees beyond its tree size', async () => {
    const reader = new TileHashReader(600, async () => {
      throw new Error('must not fetch');
    });
    await expect(reader.readHashes([{ level: 0, index: 600 }])).rejects.toThrow(RangeError);
    await expect(reader.readHashes([{ level: 10, index: 0 }])).rejects.toThrow(RangeError);
  });
});

describe('bundles', () => {
  const enc = new TextEncoder();

  it('frames each item with a 2-byte big-endian length', () => {
    const big = new Uint8Array(300).fill(7);
    const b = encodeBundle([Uint8Array.of(0xaa), new Uint8Array(0), big]);
    expect(b.length).toBe(3 + 2 + 302);
    expect([...b.subarray(0, 7)]).toEqual([0x00, 0x01, 0xaa, 0x00, 0x00, 0x01, 0x2c]);
    expect(b.subarray(7)).toEqual(big);
    expect(encodeBundle([])).toEqual(new Uint8Array(0));
    // an entry bundle: per entry 0x00 0x20 and the 32-byte entry_hash
    const hashes = [leaves[0]!, leaves[1]!, leaves[2]!];
    const eb = encodeBundle(hashes);
    expect(eb.length).toBe(3 * 34);
    for (let i = 0; i < 3; i++) {
      expect([eb[i * 34], eb[i * 34 + 1]]).toEqual([0x00, 0x20]);
      expect(hex(eb.subarray(i * 34 + 2, i * 34 + 34))).toBe(hex(hashes[i]!));
    }
  });

  it('round-trips', () => {
    const cases: Uint8Array[][] = [
      [],
      [new Uint8Array(0)],
      [enc.encode('{"v":1}')],
      [new Uint8Array(65535).fill(0x5a), Uint8Array.of(1)],
      Array.from({ length: 256 }, (_, i) => leaves[i]!),
      Array.from({ length: 256 }, (_, i) => enc.encode(`{"n":${i},"pad":"${'x'.repeat(i)}"}`)),
    ];
    for (const items of cases) {
      const decoded = decodeBundle(encodeBundle(items));
      expect(decoded.length).toBe(items.length);
      decoded.forEach((d, i) => expect(hex(d)).toBe(hex(items[i]!)));
    }
  });

  it('refuses an item longer than 65,535 bytes', () => {
    expect(() => encodeBundle([new Uint8Array(65536)])).toThrow(RangeError);
  });

  it('every truncation either ends on an item boundary or throws TileFormatError', () => {
    const items = [enc.encode('alpha'), new Uint8Array(0), enc.encode('a longer third item'), Uint8Array.of(0, 1, 2)];
    const data = encodeBundle(items);
    const boundaries = new Map<number, number>();
    let off = 0;
    boundaries.set(0, 0);
    items.forEach((it, i) => {
      off += 2 + it.length;
      boundaries.set(off, i + 1);
    });
    for (let cut = 0; cut < data.length; cut++) {
      const prefix = data.subarray(0, cut);
      if (boundaries.has(cut)) {
        expect(decodeBundle(prefix).length).toBe(boundaries.get(cut));
      } else {
        expect(() => decodeBundle(prefix), `cut at ${cut}`).toThrow(TileFormatError);
      }
    }
  });

  it('refuses trailing bytes, lengths past the end and more than 256 items', () => {
    const data = encodeBundle([enc.encode('x')]);
    expect(() => decodeBundle(Uint8Array.of(...data, 0x00))).toThrow(TileFormatError);
    expect(() => decodeBundle(Uint8Array.of(...data, 0x00, 0x05, 1, 2))).toThrow(TileFormatError);
    expect(() => decodeBundle(Uint8Array.of(0xff, 0xff, 1, 2, 3))).toThrow(TileFormatError);
    expect(() => decodeBundle(Uint8Array.of(0x00, 0x02, 1))).toThrow(TileFormatError);
    expect(decodeBundle(encodeBundle(Array.from({ length: 256 }, () => new Uint8Array(0)))).length).toBe(256);
    expect(() => decodeBundle(encodeBundle(Array.from({ length: 257 }, () => new Uint8Array(0))))).toThrow(
      TileFormatError,
    );
    expect(() => decodeBundle(Uint8Array.of(0x00), 'tile/entries/005')).toThrow(/tile\/entries\/005/);
  });
});
