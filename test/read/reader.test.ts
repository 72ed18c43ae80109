// LogReader over a real log: compact bundles, one read of each tile per request, the
// synchronous path on a warm cache, byte-bounded memory, and corruption still detected.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { leafHash, toHex } from '../../src/core/hash.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import {
  MemoryHashReader,
  proveConsistency,
  proveInclusion,
  treeHash,
  verifyConsistency,
  verifyInclusion,
} from '../../src/core/merkle.js';
import { CorruptObjectError, LogReader, type TreeHead, UntrustedTreeError } from '../../src/read/reader.js';
import { LogIntegrityError } from '../../src/read/tilestore.js';
import { FsObjectStore } from '../../src/store/fs.js';
import type { ObjectReader } from '../../src/store/store.js';
import { TILE_WIDTH, TileFormatError, tilePath } from '../../src/core/tiles.js';
import { Bundle, decodeBundle, encodeBundle } from '../../src/core/bundle.js';
import { parseCanonicalEntry } from '../../src/core/entry.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

/** The bundle decoder as it was before Bundle: one subarray per item. */
function referenceDecode(data: Uint8Array, maxItems = TILE_WIDTH): Uint8Array[] {
  const items: Uint8Array[] = [];
  let off = 0;
  while (off < data.length) {
    if (off + 2 > data.length) throw new TileFormatError('truncated length');
    const len = (data[off]! << 8) | data[off + 1]!;
    if (off + 2 + len > data.length) throw new TileFormatError('item runs past the end');
    items.push(data.subarray(off + 2, off + 2 + len));
    off += 2 + len;
  }
  if (items.length > maxItems) throw new TileFormatError('too many items');
  return items;
}

const outcome = (f: () => Uint8Array[]): string[] | string => {
  try {
    return f().map(toHex);
  } catch (e) {
    return (e as Error).name;
  }
};

describe('Bundle', () => {
  const rnd = (n: number) => Uint8Array.from({ length: n }, () => Math.floor(Math.random() * 256));

  it('decodes exactly what the reference decoder does, for every prefix of random bundles', () => {
    for (let trial = 0; trial < 20; trial++) {
      const items = Array.from({ length: 1 + Math.floor(Math.random() * 12) }, () =>
        rnd(Math.floor(Math.random() * 40)),
      );
      const data = encodeBundle(items);
      for (let cut = 0; cut <= data.length; cut++) {
        const prefix = data.subarray(0, cut);
        expect(
          outcome(() => Bundle.decode(prefix).items()),
          `cut ${cut}`,
        ).toEqual(outcome(() => referenceDecode(prefix)));
        expect(outcome(() => decodeBundle(prefix))).toEqual(outcome(() => referenceDecode(prefix)));
      }
    }
  });

  it('gives items by index, refuses indexes it does not have, and caps the item count', () => {
    const items = [Uint8Array.of(1, 2, 3), new Uint8Array(0), rnd(300)];
    const b = Bundle.decode(encodeBundle(items));
    expect(b.length).toBe(3);
    items.forEach((it, i) => expect(toHex(b.item(i))).toBe(toHex(it)));
    expect(b.items(2).length).toBe(2);
    for (const bad of [-1, 3, 1.5]) expect(() => b.item(bad)).toThrow(RangeError);
    expect(() => Bundle.decode(encodeBundle([Uint8Array.of(1), Uint8Array.of(2)]), 'x', 1)).toThrow(TileFormatError);
    // one buffer and one small table, not an object per item
    expect(b.retainedBytes).toBe(b.data.buffer.byteLength + 3 * 4 + 4); // offsets, and a word of check bits
  });

  it('remembers exactly the items marked checked, across the words of its bit set', () => {
    const bundle = Bundle.decode(encodeBundle(Array.from({ length: 256 }, (_, i) => Uint8Array.of(i))));
    const marked = [0, 1, 30, 31, 32, 63, 64, 200, 255];
    for (const i of marked) bundle.markChecked(i);
    bundle.markChecked(31);
    const checked = Array.from({ length: 256 }, (_, i) => i).filter((i) => bundle.checked(i));
    expect(checked).toEqual(marked);
    expect(bundle.checked(256)).toBe(false);
  });
});

/** An ObjectReader that counts what it is asked for. */
class CountingReader implements ObjectReader {
  readonly gets: string[] = [];
  constructor(private readonly inner: ObjectReader) {}
  get(key: string) {
    this.gets.push(key);
    return this.inner.get(key);
  }
}

// 70,001 leaves: full and partial tiles at levels 0 and 1, a partial level-2 tile.
const N = 70_001;
let dir: string;
let store: FsObjectStore;
let leaves: Uint8Array[];
let mem: MemoryHashReader;
let root: Uint8Array;
let head: TreeHead;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stele-reader-'));
  const { sequencer } = await openLocalLog({
    dataDir: dir,
    origin: 'reader.test/log',
    fsync: false,
    batchInterval: 1,
    maxBatch: 65_536,
  });
  const digest = (i: number) => i.toString(16).padStart(64, '0');
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest(i), { artifact: `a${i}` })),
    ),
  );
  expect(sequencer.checkpoint.size).toBe(N);
  root = sequencer.checkpoint.root;
  head = { size: N, root };
  await sequencer.close();
  store = new FsObjectStore(join(dir, 'log'));
  const all = new LogReader(store, { unverified: true });
  leaves = [];
  for (let n = 0; n * TILE_WIDTH < N; n++) {
    const items = await all.bundle('entries', n, Math.min(TILE_WIDTH, N - n * TILE_WIDTH));
    leaves.push(...items.map((h) => leafHash(h)));
  }
  mem = new MemoryHashReader(leaves);
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const samples = [0, 1, 255, 256, 65_535, 65_536, 69_887, 69_888, N - 2, N - 1, 12_345, 40_000];

describe('LogReader', () => {
  it('entryWithProof gives the entry, its leaf and the naive audit path, which verifies against the checkpoint', async () => {
    const reader = new LogReader(store);
    for (const seq of samples) {
      const got = await reader.entryWithProof(seq, head);
      const plain = await reader.entry(seq, head);
      expect(toHex(got.entryHash)).toBe(toHex(plain.entryHash));
      expect(toHex(got.leafHash)).toBe(toHex(leaves[seq]!));
      expect(got.entry).toEqual(plain.entry);
      expect(got.auditPath.map(toHex)).toEqual((await proveInclusion(seq, N, mem)).map(toHex));
      expect(verifyInclusion(seq, N, got.leafHash, got.auditPath, root)).toBe(true);
      // a smaller tree, read from the tiles of the published one
      if (seq < 70_000)
        expect((await reader.inclusionProof(seq, 70_000, head)).map(toHex)).toEqual(
          (await proveInclusion(seq, 70_000, mem)).map(toHex),
        );
    }
  });

  it('a warm read answers synchronously, straight from the tiles, with the naive leaf and audit path', async () => {
    const reader = new LogReader(store);
    const leavesToRead = [...samples, ...Array.from({ length: 40 }, (_, k) => Math.floor((k * N) / 40) + k)];
    for (const seq of leavesToRead) await reader.entryWithProof(seq, head);
    for (const seq of leavesToRead) {
      const warm = reader.entryWithProofNow(seq, head);
      if (warm instanceof Promise) throw new Error(`leaf ${seq}: a warm read waited`);
      expect(toHex(warm.leafHash)).toBe(toHex(leaves[seq]!));
      const naive = (await proveInclusion(seq, N, mem)).map(toHex);
      expect(warm.auditPath.map(toHex)).toEqual(naive);
      expect(toHex(warm.auditPathBytes)).toBe(naive.join(''));
      // Kept for long, it holds one buffer of its own: neither the bundles nor the pool's slab.
      const kept = warm.detached();
      expect(toHex(kept.auditPathBytes)).toBe(naive.join(''));
      expect([kept.seq, toHex(kept.leafHash), toHex(kept.entryHash)]).toEqual([
        seq,
        toHex(leaves[seq]!),
        toHex(warm.entryHash),
      ]);
      expect(Buffer.from(kept.canonical).equals(Buffer.from(warm.canonical))).toBe(true);
      const own = kept.canonical.buffer;
      expect([kept.entryHash.buffer, kept.auditPathBytes.buffer]).toEqual([own, own]);
      expect(own.byteLength).toBe(kept.canonical.length + 32 + 32 + kept.auditPathBytes.length);
      expect(own).not.toBe(warm.canonical.buffer);
    }
  });

  it('consistency gives both roots and the naive proof', async () => {
    const reader = new LogReader(store);
    const pairs = [
      [1, N],
      [255, 257],
      [256, 65_536],
      [257, 65_537],
      [12_345, 69_999],
      [65_537, N],
      [N, N],
      [69_999, 70_000],
    ] as const;
    for (const [first, second] of pairs) {
      const got = await reader.consistency(first, second, head);
      expect(toHex(got.firstRoot)).toBe(toHex(await treeHash(first, mem)));
      expect(toHex(got.secondRoot)).toBe(toHex(await treeHash(second, mem)));
      expect(got.proof.map(toHex)).toEqual((await proveConsistency(first, second, mem)).map(toHex));
      expect(verifyConsistency(first, second, got.proof, got.firstRoot, got.secondRoot)).toBe(true);
    }
    expect(toHex((await reader.consistency(5, N, head)).secondRoot)).toBe(toHex(root));
  });

  it('reads each tile and bundle once per request, and nothing from storage once they are cached', async () => {
    const source = new CountingReader(store);
    const reader = new LogReader(source);
    const seq = 12_345;
    await reader.entryWithProof(seq, head);
    // two bundles and one hash tile per level (level 0 also holds the leaf); the right edge's
    // partial tiles for the range hashes the proof folds
    expect(new Set(source.gets).size).toBe(source.gets.length);
    expect(source.gets).toEqual(
      expect.arrayContaining([
        tilePath({ kind: 'entries', index: 48, width: 256 }),
        tilePath({ kind: 'records', index: 48, width: 256 }),
        tilePath({ kind: 0, index: 48, width: 256 }),
      ]),
    );
    // Warm, a request reads the two bundles and one hash tile per level its path crosses.
    const warmReads = async (leaf: number) => {
      await reader.entryWithProof(leaf, head);
      const before = { ...reader.stats, gets: source.gets.length };
      await reader.entryWithProof(leaf, head);
      expect(source.gets.length).toBe(before.gets);
      expect(reader.stats.fetches).toBe(before.fetches);
      return { all: reader.stats.hits - before.hits, hashTiles: reader.stats.hashTileReads - before.hashTileReads };
    };
    expect(await warmReads(seq)).toEqual({ all: 2 + 2, hashTiles: 2 }); // its sibling at level 16 is the (memoised) right edge
    expect(await warmReads(65_600)).toEqual({ all: 2 + 3, hashTiles: 3 }); // its sibling at level 16 is in the level-2 tile

    await reader.consistency(300, 69_000, head); // cold: also reads what authenticates its tiles
    const cBefore = reader.stats.hits + reader.stats.fetches;
    await reader.consistency(300, 69_000, head);
    const cReads = reader.stats.hits + reader.stats.fetches - cBefore;
    await reader.consistency(300, 69_000, head);
    expect(reader.stats.hits + reader.stats.fetches - cBefore - cReads).toBe(cReads); // same tiles, each once
    expect(cReads).toBeLessThanOrEqual(6); // two paths of at most three levels
  });

  it('keeps its cache within the byte budget, and stays correct when it is tiny', async () => {
    const reader = new LogReader(store, { cacheBytes: 256 * 1024 });
    for (let seq = 0; seq < N; seq += 97) await reader.entryWithProof(seq, head);
    expect(reader.cachedBytes).toBeGreaterThan(0);
    expect(reader.cachedBytes).toBeLessThanOrEqual(256 * 1024);
    for (const seq of samples) {
      const got = await reader.entryWithProof(seq, head);
      expect(verifyInclusion(seq, N, got.leafHash, got.auditPath, root)).toBe(true);
    }
    const roomy = new LogReader(store);
    for (let seq = 0; seq < N; seq += 256) await roomy.entry(seq, head);
    // every bundle pair and level-0 tile: data plus interior rows, offsets and bookkeeping
    const files = ['entries', 'records', 0] as const;
    let bytes = 0;
    for (let n = 0; n * 256 < N; n++)
      for (const kind of files)
        bytes += (await store.get(tilePath({ kind, index: n, width: Math.min(256, N - n * 256) })))!.length;
    expect(roomy.cachedBytes).toBeGreaterThan(bytes);
    expect(roomy.cachedBytes).toBeLessThan(2 * bytes);
  });

  it('reuses the right edge’s partial tiles and bundles only for a moment, the full ones for good', async () => {
    const reader = new LogReader(store, { partialTtlMs: 40 });
    const fetchesFor = async (seq: number) => {
      const before = reader.stats.fetches;
      await reader.entryWithProof(seq, head);
      return reader.stats.fetches - before;
    };
    expect(await fetchesFor(N - 1)).toBeGreaterThan(0);
    expect(await fetchesFor(N - 1)).toBe(0);
    expect(await fetchesFor(100)).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 80));
    expect(await fetchesFor(100)).toBe(0);
    expect(await fetchesFor(N - 1)).toBeGreaterThanOrEqual(3); // two partial bundles and the partial level-0 tile, again
  });

  // Each case flips bytes of a real log's file, asks a fresh verifying reader, and restores it.
  const flip = (key: string, at: number, to?: number) => {
    const file = join(dir, 'log', key);
    const data = readContent(file);
    const was = data[at]!;
    data[at] = to ?? was ^ 0x01;
    writeContent(file, data);
    return () => {
      data[at] = was;
      writeContent(file, data);
    };
  };
  const corruptKey = async (p: Promise<unknown>): Promise<string> => {
    const e = await p.then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(CorruptObjectError);
    return (e as CorruptObjectError).key;
  };
  const verifies = async (reader: LogReader, seq: number) => {
    const got = await reader.entryWithProof(seq, head);
    expect(toHex(got.leafHash)).toBe(toHex(leaves[seq]!));
    expect(verifyInclusion(seq, N, got.leafHash, got.auditPath, root)).toBe(true);
  };

  it('refuses an entry bundle item that does not match its leaf, and the next record whose prior it is', async () => {
    const restore = flip(tilePath({ kind: 'entries', index: 3, width: 256 }), 5 * 34 + 2 + 7); // item 5's hash
    try {
      const told: string[] = [];
      const reader = new LogReader(store, { onCorrupt: (key, message) => told.push(`${key}: ${message}`) });
      expect(await corruptKey(reader.entryWithProof(3 * 256 + 5, head))).toBe('tile/entries/003');
      await expect(reader.entry(3 * 256 + 5, head)).rejects.toThrow(LogIntegrityError);
      // entry 6's record hashes with entry 5's hash: it cannot be authenticated either
      expect(await corruptKey(reader.entry(3 * 256 + 6, head))).toBe('tile/entries/003');
      await verifies(reader, 3 * 256 + 7);
      expect(reader.stats.corruptObjects).toBe(1); // one object, counted and told once
      expect(told).toEqual([
        expect.stringMatching(
          /^tile\/entries\/003: tile\/entries\/003: entry bundle item 773 does not match its leaf hash in tile\/0\/003$/,
        ),
      ]);
    } finally {
      restore();
    }
  });

  it('refuses a record that does not hash to its entry hash, though it still parses', async () => {
    const key = tilePath({ kind: 'records', index: 5, width: 256 });
    const bundle = Bundle.decode(readContent(join(dir, 'log', key)));
    const item = bundle.item(9);
    const at = item.byteOffset + Buffer.from(item).indexOf('"digest":"') + 10; // the digest's first hex digit
    const restore = flip(key, at, item[at - item.byteOffset] === 0x30 ? 0x31 : 0x30);
    try {
      const reader = new LogReader(store);
      expect(await corruptKey(reader.entryWithProof(5 * 256 + 9, head))).toBe(key);
      expect(await corruptKey(reader.records(5 * 256, 6 * 256, head))).toBe(key);
      expect(() => parseCanonicalEntry(Bundle.decode(readContent(join(dir, 'log', key))).item(9))).not.toThrow();
      await verifies(reader, 5 * 256 + 10);
      expect((await reader.records(4 * 256, 5 * 256, head)).length).toBe(256);
    } finally {
      restore();
    }
  });

  it('refuses a level-0 tile whose root is not its hash in the level-1 tile; an unverified reader serves a bad proof', async () => {
    const restore = flip(tilePath({ kind: 0, index: 7, width: 256 }), 9 * 32 + 3); // leaf 9 of tile 7
    try {
      const reader = new LogReader(store);
      // the neighbour's own leaf is intact, but its proof crosses the flipped hash
      expect(await corruptKey(reader.entryWithProof(7 * 256 + 8, head))).toBe('tile/0/007');
      expect(await corruptKey(reader.inclusionProof(7 * 256 + 100, N, head))).toBe('tile/0/007');
      expect(await corruptKey(reader.consistency(7 * 256 + 10, N, head))).toBe('tile/0/007');
      await verifies(reader, 8 * 256 + 5); // its proof uses tile 7's root from the level-1 tile
      const unverified = await new LogReader(store, { unverified: true }).entryWithProof(7 * 256 + 8, N);
      expect(verifyInclusion(unverified.seq, N, unverified.leafHash, unverified.auditPath, root)).toBe(false);
    } finally {
      restore();
    }
  });

  it('blames a level-1 tile that is not its hash in the level-2 tile, and serves what does not depend on it', async () => {
    const restore = flip(tilePath({ kind: 1, index: 0, width: 256 }), 3 * 32); // the root of level-0 tile 3
    const reader = new LogReader(store);
    try {
      expect(await corruptKey(reader.entryWithProof(3 * 256 + 1, head))).toBe('tile/1/000');
      expect(await corruptKey(reader.entry(40_000, head))).toBe('tile/1/000');
      expect(await corruptKey(reader.consistency(300, 69_000, head))).toBe('tile/1/000');
      await verifies(reader, 65_600); // above 65,536 the path holds tile/1/000's root, from the level-2 tile
      expect(await corruptKey(reader.tileOf(head, 1, 0))).toBe('tile/1/000');
      expect((await new LogReader(store).tile(1, 0, 256)).width).toBe(256); // the raw read is the caller’s to check
      expect((await reader.tileOf(head, 1, 1)).width).toBe(17); // 273 level-1 hashes: the right-edge tile
      // a failed request leaves its sibling loads running: let them finish on the corrupt bytes
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      restore();
    }
    // not kept as authenticated: the same reader serves the repaired tile
    await verifies(reader, 40_000);
  });

  it('refuses right-edge tiles that do not hash to the checkpoint root, and a tree whose root it was not given', async () => {
    const key = tilePath({ kind: 0, index: Math.floor(N / 256), width: N % 256 });
    const restore = flip(key, 0); // leaf 69,888: not the leaf asked for, but in its proof
    const reader = new LogReader(store);
    try {
      expect(await corruptKey(reader.entryWithProof(N - 1, head))).toContain(key);
      expect(await corruptKey(reader.treeHash(N - 5, head))).toContain(key);
      expect(reader.stats.corruptObjects).toBe(1);
    } finally {
      restore();
    }
    await verifies(reader, N - 1); // dropped from the cache, read again once repaired
    await expect(new LogReader(store).entry(5, N)).rejects.toThrow(UntrustedTreeError);
    await expect(new LogReader(store).entry(5, { size: N, root: leaves[0]! })).rejects.toThrow(CorruptObjectError);
  });
});
