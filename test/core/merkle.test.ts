// src/core/merkle.ts against an independent naive RFC 6962 implementation (test/helpers/naive.ts)
// and against vectors computed with Go's golang.org/x/mod/sumdb/tlog.
import { describe, expect, it } from 'vitest';
import { EMPTY_ROOT, leafHash, nodeHash, sha256 as coreSha256 } from '../../src/core/hash.js';
import {
  type HashReader,
  MemoryHashReader,
  type SubtreeRef,
  type SyncHashLookup,
  foldSubtrees,
  perfectSubtrees,
  proveConsistency,
  proveInclusion,
  proveInclusionSync,
  rootFromInclusionProof,
  rootsFromConsistencyProof,
  splitPoint,
  treeHash,
  treeHashSync,
  verifyConsistency,
  verifyInclusion,
} from '../../src/core/merkle.js';
import { HashTile, TILE_WIDTH, type TileFetcher, TileHashReader } from '../../src/core/tiles.js';
import { TileSet } from '../../src/read/tile-set.js';
import {
  NaiveTree,
  largestPowerOfTwoBelow,
  mth,
  naiveLeafHash,
  path as naivePath,
  proof as naiveProof,
  sha256,
} from '../helpers/naive.js';
import { fromHex, hex, loadVectors } from '../helpers/vectors.js';

const vectors = loadVectors();
const utf8 = new TextEncoder();

const hexes = (hs: readonly Uint8Array[]): string[] => hs.map(hex);
const sameHashes = (a: readonly Uint8Array[], b: readonly Uint8Array[]): boolean =>
  a.length === b.length && a.every((h, i) => Buffer.compare(h, b[i]!) === 0);

function flipped(h: Uint8Array, byte: number, mask = 0x01): Uint8Array {
  const c = Uint8Array.from(h);
  c[byte] = c[byte]! ^ mask;
  return c;
}

function u64be(i: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(i));
  return b;
}

// ---------------------------------------------------------------------------------------
// A 600-leaf tree, every size and every proof.
// ---------------------------------------------------------------------------------------

const N = 600;
const inputs = Array.from({ length: N }, (_, i) => utf8.encode(`stele test leaf ${i}`));
const naive = NaiveTree.fromInputs(inputs);
const leaves = inputs.map((d) => leafHash(d));
/** roots[n] = naive MTH(D[0:n]). */
const roots = Array.from({ length: N + 2 }, (_, n) => (n <= N ? naive.root(n) : new Uint8Array(32)));

/** A lookup of perfect-subtree hashes (from the naive tree) that refuses to read past size n. */
function lookupFor(n: number): SyncHashLookup {
  return (refs) =>
    refs.map(({ level, index }) => {
      const lo = index * 2 ** level;
      const hi = lo + 2 ** level;
      if (!Number.isSafeInteger(lo) || hi > n)
        throw new Error(`read of subtree ${level}/${index} beyond tree size ${n}`);
      return naive.mth(lo, hi);
    });
}

function readerFor(n: number): HashReader {
  const lookup = lookupFor(n);
  return { readHashes: async (refs) => lookup(refs) };
}

describe('naive helper sanity', () => {
  it('the memoised naive tree equals the literal array definitions for small trees', () => {
    for (let n = 1; n <= 24; n++) {
      const D = inputs.slice(0, n);
      expect(hex(naive.root(n))).toBe(hex(mth(D)));
      for (let m = 0; m < n; m++) expect(hexes(naive.path(m, n))).toEqual(hexes(naivePath(m, D)));
      for (let m = 1; m <= n; m++) expect(hexes(naive.proof(m, n))).toEqual(hexes(naiveProof(m, D)));
    }
    expect(hex(mth([]))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('src leaf hashes equal the naive ones', () => {
    expect(hexes(leaves)).toEqual(hexes(naive.leafHashes));
  });
});

describe('tree hashes', () => {
  it('treeHashSync(n) = MTH(D[n]) for every n in 0..600', () => {
    const bad: number[] = [];
    for (let n = 0; n <= N; n++) if (Buffer.compare(treeHashSync(n, lookupFor(n)), roots[n]!) !== 0) bad.push(n);
    expect(bad).toEqual([]);
  });

  it('async treeHash(n) = MTH(D[n]) for every n in 0..600', async () => {
    const bad: number[] = [];
    for (let n = 0; n <= N; n++) if (Buffer.compare(await treeHash(n, readerFor(n)), roots[n]!) !== 0) bad.push(n);
    expect(bad).toEqual([]);
  });

  it('the empty tree hashes to SHA-256 of the empty string', async () => {
    expect(hex(EMPTY_ROOT)).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(treeHashSync(0, () => []))).toBe(hex(EMPTY_ROOT));
    expect(hex(await treeHash(0, { readHashes: async () => [] }))).toBe(hex(EMPTY_ROOT));
    expect(hex(foldSubtrees([]))).toBe(hex(EMPTY_ROOT));
  });

  it('rejects negative and fractional sizes', async () => {
    expect(() => treeHashSync(-1, lookupFor(N))).toThrow(RangeError);
    expect(() => treeHashSync(2.5, lookupFor(N))).toThrow(RangeError);
    expect(() => treeHashSync(Number.NaN, lookupFor(N))).toThrow(RangeError);
    await expect(treeHash(-1, readerFor(N))).rejects.toThrow(RangeError);
  });
});

describe('splitPoint and perfectSubtrees', () => {
  it('splitPoint(n) is the largest power of two below n', () => {
    for (let n = 2; n <= 5000; n++) expect(splitPoint(n)).toBe(largestPowerOfTwoBelow(n));
    expect(splitPoint(2 ** 32)).toBe(2 ** 31);
    expect(splitPoint(2 ** 32 + 1)).toBe(2 ** 32);
    expect(splitPoint(2 ** 40 + 1)).toBe(2 ** 40);
    expect(splitPoint(Number.MAX_SAFE_INTEGER)).toBe(2 ** 52);
  });

  it('agrees with the plain loops on both sides of 2^31, where the bit operations stop being exact', () => {
    const splitLoop = (n: number) => {
      let k = 1;
      while (k * 2 < n) k *= 2;
      return k;
    };
    const subtreesLoop = (lo: number, hi: number) => {
      const out: { level: number; index: number }[] = [];
      for (let at = lo; at < hi; ) {
        let size = 1;
        while (size * 2 <= hi - at && at % (size * 2) === 0) size *= 2;
        out.push({ level: Math.log2(size), index: at / size });
        at += size;
      }
      return out;
    };
    for (const n of [2, 3, 2 ** 30, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 33 - 1])
      expect(splitPoint(n)).toBe(splitLoop(n));
    const ranges = [
      [0, 2 ** 31 - 1],
      [2 ** 30 + 4, 2 ** 31 - 1],
      [2 ** 31 - 8, 2 ** 31 + 3],
      [2 ** 31, 2 ** 32 + 7],
      [3 * 2 ** 29, 2 ** 31 - 2],
    ];
    for (let i = 0; i < 2000; i++) {
      const hi = 1 + Math.floor(Math.random() * 2 ** (i % 2 === 0 ? 31 : 33));
      ranges.push([Math.floor(Math.random() * hi), hi]);
    }
    for (const [lo, hi] of ranges) expect(perfectSubtrees(lo!, hi!), `${lo}..${hi}`).toEqual(subtreesLoop(lo!, hi!));
  });

  it('perfectSubtrees(0, n) is the binary decomposition of n, largest first', () => {
    expect(perfectSubtrees(0, 0)).toEqual([]);
    expect(perfectSubtrees(0, 1)).toEqual([{ level: 0, index: 0 }]);
    expect(perfectSubtrees(0, 7)).toEqual([
      { level: 2, index: 0 },
      { level: 1, index: 2 },
      { level: 0, index: 6 },
    ]);
    expect(perfectSubtrees(0, 70000)).toEqual([
      { level: 16, index: 0 },
      { level: 12, index: 16 },
      { level: 8, index: 272 },
      { level: 6, index: 1092 },
      { level: 5, index: 2186 },
      { level: 4, index: 4374 },
    ]);
    expect(perfectSubtrees(0, 2 ** 40 + 5)).toEqual([
      { level: 40, index: 0 },
      { level: 2, index: 2 ** 38 },
      { level: 0, index: 2 ** 40 + 4 },
    ]);
    expect(perfectSubtrees(256, 300)).toEqual([
      { level: 5, index: 8 },
      { level: 3, index: 36 },
      { level: 2, index: 74 },
    ]);
    for (let n = 1; n <= 1000; n++) {
      const refs = perfectSubtrees(0, n);
      expect(refs.length).toBe(n.toString(2).replaceAll('0', '').length);
      let at = 0;
      for (const r of refs) {
        expect(r.index * 2 ** r.level).toBe(at);
        at += 2 ** r.level;
      }
      expect(at).toBe(n);
    }
  });
});

/** Which (m, n) proofs are also verified: all of them up to size 256, a spread beyond (keeps the suite fast). */
const verifyToo = (m: number, n: number): boolean => n <= 256 || m % 13 === n % 13 || m <= 2 || m >= n - 2;

describe('inclusion proofs, every size 1..600 and every index', () => {
  it('proveInclusionSync equals PATH(m, D[n]) and verifies against MTH(D[n])', () => {
    const wrong: string[] = [];
    const unverified: string[] = [];
    let count = 0;
    let verified = 0;
    for (let n = 1; n <= N; n++) {
      const lookup = lookupFor(n);
      for (let m = 0; m < n; m++) {
        const got = proveInclusionSync(m, n, lookup);
        if (!sameHashes(got, naive.path(m, n))) wrong.push(`${m}@${n}`);
        count++;
        if (!verifyToo(m, n)) continue;
        verified++;
        if (!verifyInclusion(m, n, leaves[m]!, got, roots[n]!)) unverified.push(`${m}@${n}`);
      }
    }
    expect(count).toBe((N * (N + 1)) / 2);
    expect(verified).toBeGreaterThan(40000);
    expect(wrong).toEqual([]);
    expect(unverified).toEqual([]);
  });

  it('rootFromInclusionProof recomputes MTH(D[n]) from every index of sizes 1..128', () => {
    const wrong: string[] = [];
    for (let n = 1; n <= 128; n++) {
      for (let m = 0; m < n; m++) {
        const r = rootFromInclusionProof(m, n, leaves[m]!, naive.path(m, n));
        if (r === null || Buffer.compare(r, roots[n]!) !== 0) wrong.push(`${m}@${n}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('async proveInclusion equals PATH(m, D[n]) (every size, a spread of indexes)', async () => {
    const wrong: string[] = [];
    for (let n = 1; n <= N; n++) {
      const reader = readerFor(n);
      for (let m = 0; m < n; m++) {
        if (n > 128 && m % 7 !== n % 7 && m !== n - 1) continue;
        if (!sameHashes(await proveInclusion(m, n, reader), naive.path(m, n))) wrong.push(`${m}@${n}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('refuses indexes outside the tree', async () => {
    expect(() => proveInclusionSync(5, 5, lookupFor(5))).toThrow(RangeError);
    expect(() => proveInclusionSync(0, 0, lookupFor(0))).toThrow(RangeError);
    expect(() => proveInclusionSync(-1, 5, lookupFor(5))).toThrow(RangeError);
    expect(() => proveInclusionSync(1.5, 5, lookupFor(5))).toThrow(RangeError);
    await expect(proveInclusion(7, 6, readerFor(6))).rejects.toThrow(RangeError);
  });
});

describe('consistency proofs, every size 1..600 and every older size', () => {
  it('proveConsistency equals PROOF(m, D[n]) and verifies against both roots', async () => {
    const wrong: string[] = [];
    const unverified: string[] = [];
    let count = 0;
    let verified = 0;
    for (let n = 1; n <= N; n++) {
      const reader = readerFor(n);
      for (let m = 1; m <= n; m++) {
        const got = await proveConsistency(m, n, reader);
        if (!sameHashes(got, naive.proof(m, n))) wrong.push(`${m}->${n}`);
        count++;
        if (!verifyToo(m, n)) continue;
        verified++;
        if (!verifyConsistency(m, n, got, roots[m]!, roots[n]!)) unverified.push(`${m}->${n}`);
      }
    }
    expect(count).toBe((N * (N + 1)) / 2);
    expect(verified).toBeGreaterThan(40000);
    expect(wrong).toEqual([]);
    expect(unverified).toEqual([]);
  });

  it('rootsFromConsistencyProof recomputes both roots for every pair of sizes up to 128', () => {
    const wrong: string[] = [];
    for (let n = 1; n <= 128; n++) {
      for (let m = 1; m <= n; m++) {
        const rs = rootsFromConsistencyProof(m, n, naive.proof(m, n), roots[m]!);
        if (rs === null || Buffer.compare(rs.first, roots[m]!) !== 0 || Buffer.compare(rs.second, roots[n]!) !== 0) {
          wrong.push(`${m}->${n}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('gives an empty proof from size 0 and between equal sizes', async () => {
    expect(await proveConsistency(0, 17, readerFor(17))).toEqual([]);
    expect(await proveConsistency(0, 0, readerFor(0))).toEqual([]);
    expect(await proveConsistency(17, 17, readerFor(17))).toEqual([]);
    expect(verifyConsistency(17, 17, [], roots[17]!, roots[17]!)).toBe(true);
    expect(verifyConsistency(17, 17, [], roots[17]!, roots[18]!)).toBe(false);
  });

  it('refuses a first size above the second', async () => {
    await expect(proveConsistency(6, 5, readerFor(6))).rejects.toThrow(RangeError);
    await expect(proveConsistency(-1, 5, readerFor(5))).rejects.toThrow(RangeError);
    await expect(proveConsistency(1, 2.5, readerFor(5))).rejects.toThrow(RangeError);
  });
});

describe('MemoryHashReader', () => {
  it('gives the naive roots and proofs for every size 1..64', async () => {
    for (let n = 1; n <= 64; n++) {
      const mem = new MemoryHashReader(leaves.slice(0, n)); // reading past n would throw
      expect(hex(treeHashSync(n, mem.lookup))).toBe(hex(roots[n]!));
      expect(hex(await treeHash(n, mem))).toBe(hex(roots[n]!));
      for (let m = 0; m < n; m++) {
        expect(hexes(proveInclusionSync(m, n, mem.lookup))).toEqual(hexes(naive.path(m, n)));
        expect(hexes(await proveInclusion(m, n, mem))).toEqual(hexes(naive.path(m, n)));
      }
      for (let m = 1; m <= n; m++) expect(hexes(await proveConsistency(m, n, mem))).toEqual(hexes(naive.proof(m, n)));
    }
  });

  it('throws for a leaf it does not have', () => {
    const mem = new MemoryHashReader(leaves.slice(0, 3));
    expect(() => mem.lookup([{ level: 0, index: 3 }])).toThrow(RangeError);
    expect(() => mem.lookup([{ level: 2, index: 0 }])).toThrow(RangeError);
  });
});

describe('RFC 6962 reference vectors', () => {
  const rfc = vectors.rfc6962;
  const rfcInputs = rfc.leafInputs.map(fromHex);
  const rfcLeaves = rfcInputs.map((d) => leafHash(d));
  const rfcRoots = new Map(rfc.roots.map((r) => [r.size, r.root]));
  const mem = new MemoryHashReader(rfcLeaves);

  it('has the well-known 8-leaf inputs and root', () => {
    expect(rfc.leafInputs).toEqual([
      '',
      '00',
      '10',
      '2021',
      '3031',
      '40414243',
      '5051525354555657',
      '606162636465666768696a6b6c6d6e6f',
    ]);
    expect(rfcRoots.get(8)).toBe('5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328');
    expect(rfc.roots.map((r) => r.size)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('roots for sizes 1..8 (src and naive)', () => {
    for (const { size, root } of rfc.roots) {
      expect(hex(treeHashSync(size, mem.lookup))).toBe(root);
      expect(hex(mth(rfcInputs.slice(0, size)))).toBe(root);
    }
  });

  it(`every inclusion proof (${rfc.inclusion.length})`, async () => {
    expect(rfc.inclusion.length).toBe(36);
    for (const v of rfc.inclusion) {
      expect(hex(rfcLeaves[v.index]!)).toBe(v.leafHash);
      expect(hexes(proveInclusionSync(v.index, v.size, mem.lookup))).toEqual(v.path);
      expect(hexes(await proveInclusion(v.index, v.size, mem))).toEqual(v.path);
      expect(hexes(naivePath(v.index, rfcInputs.slice(0, v.size)))).toEqual(v.path);
      expect(
        verifyInclusion(v.index, v.size, fromHex(v.leafHash), v.path.map(fromHex), fromHex(rfcRoots.get(v.size)!)),
      ).toBe(true);
    }
  });

  it(`every consistency proof (${rfc.consistency.length})`, async () => {
    expect(rfc.consistency.length).toBe(36);
    for (const v of rfc.consistency) {
      expect(hexes(await proveConsistency(v.first, v.second, mem))).toEqual(v.proof);
      expect(hexes(naiveProof(v.first, rfcInputs.slice(0, v.second)))).toEqual(v.proof);
      const r1 = fromHex(rfcRoots.get(v.first)!);
      const r2 = fromHex(rfcRoots.get(v.second)!);
      expect(verifyConsistency(v.first, v.second, v.proof.map(fromHex), r1, r2)).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------
// The 70,000-leaf tree of vectors.large, read through hash tiles built in memory.
// ---------------------------------------------------------------------------------------

describe('large vectors through tiles (70,000 leaves)', () => {
  const L = vectors.large;
  const bigInputs = Array.from({ length: L.size }, (_, i) => sha256(u64be(i)));
  const bigLeaves = bigInputs.map((d) => leafHash(d));
  const bigNaive = NaiveTree.fromInputs(bigInputs);

  /** Full and partial hash tiles of the whole tree: level 0 from leaf hashes, higher levels from tile roots. */
  const tiles = new Map<string, HashTile>();
  {
    let row: Uint8Array[] = bigLeaves;
    for (let level = 0; row.length > 0; level++) {
      const next: Uint8Array[] = [];
      for (let t = 0; t * TILE_WIDTH < row.length; t++) {
        const chunk = row.slice(t * TILE_WIDTH, (t + 1) * TILE_WIDTH);
        const data = new Uint8Array(chunk.length * 32);
        chunk.forEach((h, j) => data.set(h, j * 32));
        const tile = new HashTile(level, t, data);
        tiles.set(`${level}/${t}`, tile);
        if (chunk.length === TILE_WIDTH) next.push(tile.root());
      }
      row = next;
    }
  }

  const fetched: string[] = [];
  const fetch: TileFetcher = async (level, index, width) => {
    const t = tiles.get(`${level}/${index}`);
    if (!t || width < 1 || width > t.width) throw new Error(`no tile ${level}/${index} of width ${width}`);
    fetched.push(`${level}/${index}/${width}`);
    return width === t.width ? t : new HashTile(level, index, t.data.subarray(0, width * 32));
  };
  const tileSet = new TileSet(tiles.values());
  const rootOf = new Map(L.roots.map((r) => [r.size, r.root]));
  const rootFor = (n: number): Uint8Array => fromHex(rootOf.get(n) ?? hex(bigNaive.root(n)));

  it('the vectors describe what this test computes', () => {
    expect(L.size).toBe(70000);
    expect(L.leafInput).toContain('SHA-256(uint64 big-endian i)');
  });

  it('built exactly the tiles of the vectors, and tile hashes equal naive subtree roots', () => {
    expect([...tiles.values()].map((t) => t.path).sort()).toEqual([...vectors.tiles.hashTiles].sort());
    const level1 = tiles.get('1/0')!;
    for (let j = 0; j < 256; j++) expect(hex(level1.hashAt(0, j))).toBe(hex(bigNaive.mth(j * 256, (j + 1) * 256)));
    expect(hex(tiles.get('2/0')!.hashAt(0, 0))).toBe(hex(bigNaive.mth(0, 65536)));
  });

  it(`roots (${L.roots.length}) via TileHashReader, TileSet and the naive tree`, async () => {
    for (const { size, root } of L.roots) {
      expect(hex(await treeHash(size, new TileHashReader(size, fetch)))).toBe(root);
      expect(hex(treeHashSync(size, tileSet.lookup(size)))).toBe(root);
      expect(hex(bigNaive.root(size))).toBe(root);
    }
  });

  it(`inclusion proofs (${L.inclusion.length}) via TileHashReader, TileSet and the naive tree`, async () => {
    for (const v of L.inclusion) {
      expect(hexes(await proveInclusion(v.index, v.size, new TileHashReader(v.size, fetch)))).toEqual(v.path);
      expect(hexes(proveInclusionSync(v.index, v.size, tileSet.lookup(v.size)))).toEqual(v.path);
      expect(hexes(bigNaive.path(v.index, v.size))).toEqual(v.path);
      expect(verifyInclusion(v.index, v.size, bigLeaves[v.index]!, v.path.map(fromHex), rootFor(v.size))).toBe(true);
    }
  });

  it(`consistency proofs (${L.consistency.length}) via TileHashReader and the naive tree`, async () => {
    for (const v of L.consistency) {
      expect(hexes(await proveConsistency(v.first, v.second, new TileHashReader(v.second, fetch)))).toEqual(v.proof);
      expect(hexes(bigNaive.proof(v.first, v.second))).toEqual(v.proof);
      expect(verifyConsistency(v.first, v.second, v.proof.map(fromHex), rootFor(v.first), rootFor(v.second))).toBe(
        true,
      );
    }
  });

  it('reads partial tiles at the widths the tree size implies, each tile once per call', async () => {
    fetched.length = 0;
    await proveInclusion(69999, 70000, new TileHashReader(70000, fetch));
    expect(new Set(fetched).size).toBe(fetched.length);
    expect(fetched).toContain('0/273/112');
    fetched.length = 0;
    await proveConsistency(257, 65537, new TileHashReader(65537, fetch));
    expect(new Set(fetched).size).toBe(fetched.length);
    expect(fetched.filter((f) => f.startsWith('0/256/'))).toEqual(['0/256/1']);
    expect(fetched.every((f) => !f.startsWith('2/'))).toBe(true);
  });

  it('exhaustively rejects every flipped bit of the inclusion proof 12345@65537', () => {
    const v = L.inclusion.find((x) => x.index === 12345 && x.size === 65537)!;
    const p = v.path.map(fromHex);
    const leaf = bigLeaves[12345]!;
    const root = rootFor(65537);
    expect(verifyInclusion(12345, 65537, leaf, p, root)).toBe(true);
    let accepted = 0;
    for (let e = 0; e < p.length; e++) {
      for (let bit = 0; bit < 256; bit++) {
        const q = p.slice();
        q[e] = flipped(p[e]!, bit >> 3, 1 << (bit & 7));
        if (verifyInclusion(12345, 65537, leaf, q, root)) accepted++;
      }
    }
    for (let bit = 0; bit < 256; bit++) {
      if (verifyInclusion(12345, 65537, flipped(leaf, bit >> 3, 1 << (bit & 7)), p, root)) accepted++;
      if (verifyInclusion(12345, 65537, leaf, p, flipped(root, bit >> 3, 1 << (bit & 7)))) accepted++;
    }
    expect(accepted).toBe(0);
  });

  it('exhaustively rejects every flipped bit of the consistency proof 257->65537', () => {
    const v = L.consistency.find((x) => x.first === 257 && x.second === 65537)!;
    const p = v.proof.map(fromHex);
    const r1 = rootFor(257);
    const r2 = rootFor(65537);
    expect(verifyConsistency(257, 65537, p, r1, r2)).toBe(true);
    let accepted = 0;
    for (let e = 0; e < p.length; e++) {
      for (let bit = 0; bit < 256; bit++) {
        const q = p.slice();
        q[e] = flipped(p[e]!, bit >> 3, 1 << (bit & 7));
        if (verifyConsistency(257, 65537, q, r1, r2)) accepted++;
      }
    }
    for (let bit = 0; bit < 256; bit++) {
      if (verifyConsistency(257, 65537, p, flipped(r1, bit >> 3, 1 << (bit & 7)), r2)) accepted++;
      if (verifyConsistency(257, 65537, p, r1, flipped(r2, bit >> 3, 1 << (bit & 7)))) accepted++;
    }
    expect(accepted).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------
// Verification must reject anything but the exact proof.
// ---------------------------------------------------------------------------------------

const SAMPLE_SIZES = [
  1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 511, 512, 513, 599,
  600,
];

function sampleIndexes(n: number, from: number, to: number): number[] {
  if (n <= 70) return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  const s = new Set([from, from + 1, from + 2, Math.floor(n / 2), to - 2, to - 1, to]);
  for (let i = from; i <= to; i += 37) s.add(i);
  return [...s].filter((i) => i >= from && i <= to).sort((a, b) => a - b);
}

describe('inclusion verification rejects tampering', () => {
  it('exhaustively rejects every flipped bit of 137@600 and 511@513, and every byte value of 5@6', () => {
    let accepted = 0;
    let tried = 0;
    for (const [m, n] of [
      [137, 600],
      [511, 513],
    ] as const) {
      const p = naive.path(m, n);
      for (let e = 0; e < p.length; e++) {
        for (let bit = 0; bit < 256; bit++) {
          const q = p.slice();
          q[e] = flipped(p[e]!, bit >> 3, 1 << (bit & 7));
          tried++;
          if (verifyInclusion(m, n, leaves[m]!, q, roots[n]!)) accepted++;
        }
      }
    }
    const p = naive.path(5, 6);
    expect(p.length).toBe(2);
    for (let e = 0; e < p.length; e++) {
      for (let byte = 0; byte < 32; byte++) {
        for (let mask = 1; mask < 256; mask++) {
          const q = p.slice();
          q[e] = flipped(p[e]!, byte, mask);
          tried++;
          if (verifyInclusion(5, 6, leaves[5]!, q, roots[6]!)) accepted++;
        }
      }
    }
    expect(tried).toBe((10 + 10) * 256 + 2 * 32 * 255);
    expect(accepted).toBe(0);
  });

  it('rejects flipped path bytes, wrong leaf, index, size and root, and extra or missing elements', () => {
    const failures: string[] = [];
    const mustReject = (what: string, ok: boolean): void => {
      if (ok) failures.push(what);
    };
    for (const n of SAMPLE_SIZES) {
      for (const m of sampleIndexes(n, 0, n - 1)) {
        const p = naive.path(m, n);
        const leaf = leaves[m]!;
        const root = roots[n]!;
        const tag = `${m}@${n}`;
        if (!verifyInclusion(m, n, leaf, p, root)) failures.push(`${tag}: the genuine proof did not verify`);
        p.forEach((h, e) => {
          const q = p.slice();
          q[e] = flipped(h, (e * 7 + m) % 32, 0x80);
          mustReject(`${tag}: flipped element ${e}`, verifyInclusion(m, n, leaf, q, root));
        });
        mustReject(`${tag}: flipped leaf`, verifyInclusion(m, n, flipped(leaf, m % 32), p, root));
        const otherIndexes = n <= 33 ? Array.from({ length: n }, (_, i) => i) : [0, m - 1, m + 1, n - 1 - m, n - 1];
        for (const w of otherIndexes) {
          if (w === m || w < 0 || w >= n) continue;
          mustReject(`${tag}: as index ${w}`, verifyInclusion(w, n, leaf, p, root));
          mustReject(`${tag}: as index ${w} with that leaf`, verifyInclusion(w, n, leaves[w]!, p, root));
        }
        for (const s of [n - 1, n + 1, n + 2, 2 * n, 2 * n - 1]) {
          if (s === n || s <= m || s > N) continue;
          mustReject(`${tag}: as size ${s}`, verifyInclusion(m, s, leaf, p, roots[s]!));
        }
        for (const r of [
          roots[n - 1]!,
          roots[n + 1]!,
          flipped(root, 31),
          flipped(root, 0, 0x80),
          EMPTY_ROOT,
          ...(n > 1 ? [leaf] : []),
        ]) {
          mustReject(`${tag}: wrong root ${hex(r)}`, verifyInclusion(m, n, leaf, p, r));
        }
        const extras = [
          [...p, leaf],
          [...p, root],
          [leaf, ...p],
          [...p, p[p.length - 1] ?? leaf],
        ];
        for (const q of extras) {
          mustReject(`${tag}: extra element`, verifyInclusion(m, n, leaf, q, root));
          if (rootFromInclusionProof(m, n, leaf, q) !== null) failures.push(`${tag}: extra element not malformed`);
        }
        for (let e = 0; e < p.length; e++) {
          const q = [...p.slice(0, e), ...p.slice(e + 1)];
          mustReject(`${tag}: missing element ${e}`, verifyInclusion(m, n, leaf, q, root));
          if (rootFromInclusionProof(m, n, leaf, q) !== null)
            failures.push(`${tag}: missing element ${e} not malformed`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('rejects impossible indexes and sizes as malformed', () => {
    const p = naive.path(3, 10);
    const leaf = leaves[3]!;
    expect(rootFromInclusionProof(3, 10, leaf, p)).not.toBeNull();
    for (const [i, n] of [
      [-1, 10],
      [10, 10],
      [11, 10],
      [0, 0],
      [3, -10],
      [3.5, 10],
      [3, 10.5],
      [Number.NaN, 10],
      [3, Number.POSITIVE_INFINITY],
    ] as const) {
      expect(rootFromInclusionProof(i, n, leaf, p)).toBeNull();
      expect(verifyInclusion(i, n, leaf, p, roots[10]!)).toBe(false);
    }
  });
});

describe('consistency verification rejects tampering', () => {
  it('exhaustively rejects every flipped bit of 300->600 and 256->600 (first root omitted)', () => {
    let accepted = 0;
    for (const [m, n] of [
      [300, 600],
      [256, 600],
      [3, 4],
    ] as const) {
      const p = naive.proof(m, n);
      expect(verifyConsistency(m, n, p, roots[m]!, roots[n]!)).toBe(true);
      for (let e = 0; e < p.length; e++) {
        for (let bit = 0; bit < 256; bit++) {
          const q = p.slice();
          q[e] = flipped(p[e]!, bit >> 3, 1 << (bit & 7));
          if (verifyConsistency(m, n, q, roots[m]!, roots[n]!)) accepted++;
        }
      }
      for (let bit = 0; bit < 256; bit++) {
        if (verifyConsistency(m, n, p, flipped(roots[m]!, bit >> 3, 1 << (bit & 7)), roots[n]!)) accepted++;
        if (verifyConsistency(m, n, p, roots[m]!, flipped(roots[n]!, bit >> 3, 1 << (bit & 7)))) accepted++;
      }
    }
    expect(accepted).toBe(0);
  });

  it('rejects flipped proof bytes, wrong sizes and roots, and extra or missing elements', () => {
    const failures: string[] = [];
    const mustReject = (what: string, ok: boolean): void => {
      if (ok) failures.push(what);
    };
    for (const n of SAMPLE_SIZES) {
      for (const m of sampleIndexes(n, 1, n)) {
        const p = naive.proof(m, n);
        const r1 = roots[m]!;
        const r2 = roots[n]!;
        const tag = `${m}->${n}`;
        if (!verifyConsistency(m, n, p, r1, r2)) failures.push(`${tag}: the genuine proof did not verify`);
        p.forEach((h, e) => {
          const q = p.slice();
          q[e] = flipped(h, (e * 11 + m) % 32, 0x04);
          mustReject(`${tag}: flipped element ${e}`, verifyConsistency(m, n, q, r1, r2));
        });
        for (const r of [roots[m - 1]!, roots[m + 1]!, flipped(r1, 5), EMPTY_ROOT]) {
          mustReject(`${tag}: wrong first root`, verifyConsistency(m, n, p, r, r2));
        }
        for (const r of [roots[n - 1]!, roots[n + 1]!, flipped(r2, 17), EMPTY_ROOT]) {
          mustReject(`${tag}: wrong second root`, verifyConsistency(m, n, p, r1, r));
        }
        for (const f of [m - 1, m + 1, m + 2, 2 * m]) {
          if (f === m || f < 1 || f > n) continue;
          mustReject(`${tag}: as first size ${f}`, verifyConsistency(f, n, p, roots[f]!, r2));
        }
        for (const s of [n - 1, n + 1, n + 2, 2 * n]) {
          if (s === n || s < m || s > N) continue;
          mustReject(`${tag}: as second size ${s}`, verifyConsistency(m, s, p, r1, roots[s]!));
        }
        const extras = [
          [...p, r2],
          [r1, ...p],
          [...p, p[p.length - 1] ?? r1],
          [...p, EMPTY_ROOT],
        ];
        for (const q of extras) {
          mustReject(`${tag}: extra element`, verifyConsistency(m, n, q, r1, r2));
          if (rootsFromConsistencyProof(m, n, q, r1) !== null) failures.push(`${tag}: extra element not malformed`);
        }
        for (let e = 0; e < p.length; e++) {
          const q = [...p.slice(0, e), ...p.slice(e + 1)];
          mustReject(`${tag}: missing element ${e}`, verifyConsistency(m, n, q, r1, r2));
          if (rootsFromConsistencyProof(m, n, q, r1) !== null)
            failures.push(`${tag}: missing element ${e} not malformed`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('rejects impossible sizes as malformed', () => {
    const p = naive.proof(3, 10);
    expect(rootsFromConsistencyProof(3, 10, p, roots[3]!)).not.toBeNull();
    for (const [m, n] of [
      [0, 10],
      [-3, 10],
      [11, 10],
      [3.5, 10],
      [3, 10.5],
      [Number.NaN, 10],
    ] as const) {
      expect(rootsFromConsistencyProof(m, n, p, roots[3]!)).toBeNull();
    }
    expect(verifyConsistency(11, 10, p, roots[3]!, roots[10]!)).toBe(false);
    expect(verifyConsistency(0, 10, p, roots[3]!, roots[10]!)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------
// Sizes far beyond 2^32: generation and verification agree (no 32-bit arithmetic).
// ---------------------------------------------------------------------------------------

describe('huge trees', () => {
  /**
   * A consistent tree of `size` leaves where every leaf is Z except inside a few windows of
   * distinct leaves, so any perfect-subtree hash costs O(window + height) even for 2^53 leaves.
   */
  function sparseTree(windows: ReadonlyArray<readonly [number, number]>): {
    lookup: SyncHashLookup;
    leaf: (i: number) => Uint8Array;
  } {
    const zero = [sha256(utf8.encode('uniform leaf'))];
    for (let l = 1; l <= 53; l++) zero.push(sha256(Uint8Array.of(1), zero[l - 1]!, zero[l - 1]!));
    const memo = new Map<string, Uint8Array>();
    const leaf = (i: number): Uint8Array =>
      windows.some(([a, b]) => a <= i && i < b) ? sha256(utf8.encode(`leaf ${i}`)) : zero[0]!;
    const hash = (level: number, index: number): Uint8Array => {
      const lo = index * 2 ** level;
      const hi = lo + 2 ** level;
      if (!windows.some(([a, b]) => a < hi && lo < b)) return zero[level]!;
      if (level === 0) return leaf(index);
      const key = `${level}/${index}`;
      let h = memo.get(key);
      if (!h) {
        h = sha256(Uint8Array.of(1), hash(level - 1, 2 * index), hash(level - 1, 2 * index + 1));
        memo.set(key, h);
      }
      return h;
    };
    return { lookup: (refs: readonly SubtreeRef[]) => refs.map((r) => hash(r.level, r.index)), leaf };
  }

  const around = (x: number, w = 40): [number, number] => [
    Math.max(0, x - w),
    Math.min(Number.MAX_SAFE_INTEGER, x + w),
  ];

  it('inclusion proofs verify for sizes up to 2^53 - 1, and not for a neighbouring index', () => {
    for (const [m, n] of [
      [2 ** 40, 2 ** 40 + 5],
      [2 ** 40 + 4, 2 ** 40 + 5],
      [12345, 2 ** 40 + 5],
      [2 ** 32 - 1, 2 ** 32 + 1],
      [2 ** 32, 2 ** 32 + 1],
      [2 ** 32 + 77, 2 ** 34 + 2 ** 32 + 3],
      [Number.MAX_SAFE_INTEGER - 1, Number.MAX_SAFE_INTEGER],
      [2 ** 52 + 3, Number.MAX_SAFE_INTEGER],
      [1, Number.MAX_SAFE_INTEGER],
    ] as const) {
      const t = sparseTree([around(0), around(m), around(n - 1), around(2 ** 32)]);
      const p = proveInclusionSync(m, n, t.lookup);
      expect(p.length).toBeLessThanOrEqual(53);
      const root = treeHashSync(n, t.lookup);
      const r = rootFromInclusionProof(m, n, t.leaf(m), p);
      expect(r).not.toBeNull();
      expect(hex(r!)).toBe(hex(root));
      expect(verifyInclusion(m, n, t.leaf(m), p, root)).toBe(true);
      expect(verifyInclusion(m - 1, n, t.leaf(m - 1), p, root)).toBe(false);
      if (m + 1 < n) expect(verifyInclusion(m + 1, n, t.leaf(m + 1), p, root)).toBe(false);
    }
  });

  it('consistency proofs verify for sizes beyond 2^32', async () => {
    for (const [m, n] of [
      [2 ** 33 + 7, 2 ** 40 + 5],
      [2 ** 32, 2 ** 32 + 1],
      [2 ** 32 + 1, 2 ** 33],
      [2 ** 32 - 1, 2 ** 32],
      [5, Number.MAX_SAFE_INTEGER],
      [2 ** 52 + 1, Number.MAX_SAFE_INTEGER],
    ] as const) {
      const t = sparseTree([around(0), around(m - 1), around(n - 1), around(2 ** 32)]);
      const reader: HashReader = { readHashes: async (refs) => t.lookup(refs) };
      const p = await proveConsistency(m, n, reader);
      const r1 = treeHashSync(m, t.lookup);
      const r2 = treeHashSync(n, t.lookup);
      expect(verifyConsistency(m, n, p, r1, r2)).toBe(true);
      expect(verifyConsistency(m, n, p, r1, flipped(r2, 0))).toBe(false);
      expect(verifyConsistency(m - 1, n, p, treeHashSync(m - 1, t.lookup), r2)).toBe(false);
    }
  });

  it('nodeHash is SHA-256(0x01 ‖ left ‖ right) and leafHash SHA-256(0x00 ‖ input)', () => {
    const a = sha256(utf8.encode('a'));
    const b = sha256(utf8.encode('b'));
    expect(hex(nodeHash(a, b))).toBe(hex(sha256(Uint8Array.of(1), a, b)));
    expect(hex(leafHash(a))).toBe(hex(naiveLeafHash(a)));
    expect(hex(leafHash(new Uint8Array(0)))).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
  });

  it('the native digest keeps every byte value (it travels as a byte string)', () => {
    // Digests are read back from a latin1 string: any other decoding mangles bytes ≥ 0x80.
    let high = 0;
    for (let n = 0; n < 300; n++) {
      const input = Uint8Array.from({ length: n }, (_, i) => (i * 131 + n * 7) & 0xff);
      const got = coreSha256(input);
      expect(got).toBeInstanceOf(Uint8Array);
      expect(hex(got)).toBe(hex(sha256(input)));
      high += got.filter((b) => b >= 0x80).length;
    }
    expect(high).toBeGreaterThan(1000);
  });
});

// ---------------------------------------------------------------------------------------
// Edges of verification: hashes of the wrong length, and consistency from size 0.
// ---------------------------------------------------------------------------------------

describe('proof verification edges', () => {
  const b64 = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'base64'));
  // transparency-dev/merkle testdata/inclusion/single-entry/*.json (index 0, size 1, no proof).
  const single = b64('DTrtAjFI/9KiWfvQzcf7PPl1ZYdg03dbgq9vkKrMLfw=');
  const empty = new Uint8Array(0);

  it('follows the transparency-dev single-entry inclusion vectors (a 0-byte leaf or root never verifies)', () => {
    expect(verifyInclusion(0, 1, single, [], single)).toBe(true); // matching-root-and-leaf
    expect(verifyInclusion(0, 1, empty, [], empty)).toBe(false); // empty-root-and-leaf
    expect(rootFromInclusionProof(0, 1, empty, [])).toBeNull();
    expect(verifyInclusion(0, 1, empty, [], single)).toBe(false); // empty-leaf
    expect(verifyInclusion(0, 1, single, [], empty)).toBe(false); // empty-root
  });

  it('rejects inclusion hashes of any length but 32, even when the bytes would fold to the root', () => {
    const p = naive.path(3, 10);
    expect(verifyInclusion(3, 10, leaves[3]!, p, roots[10]!)).toBe(true);
    // Same length mismatch on both sides of a one-leaf tree: equal bytes, still malformed.
    for (const n of [0, 1, 31, 33, 64]) {
      const h = new Uint8Array(n).fill(7);
      expect(verifyInclusion(0, 1, h, [], h), `leaf = root of ${n} bytes`).toBe(false);
    }
    const short = p.map((h, i) => (i === 1 ? h.subarray(0, 31) : h));
    expect(rootFromInclusionProof(3, 10, leaves[3]!, short)).toBeNull();
    expect(rootFromInclusionProof(3, 10, leaves[3]!, [...p.slice(0, 1), empty, ...p.slice(1)])).toBeNull();
  });

  it('rejects consistency hashes of any length but 32', () => {
    const p = naive.proof(4, 10); // 4 is a power of two: the first root is part of the path
    expect(verifyConsistency(4, 10, p, roots[4]!, roots[10]!)).toBe(true);
    expect(rootsFromConsistencyProof(4, 10, p, roots[4]!.subarray(0, 31))).toBeNull();
    expect(
      rootsFromConsistencyProof(4, 10, [...p.slice(0, -1), Uint8Array.of(...p[p.length - 1]!, 0)], roots[4]!),
    ).toBeNull();
    expect(verifyConsistency(4, 10, p, roots[4]!, Uint8Array.of(...roots[10]!, 0))).toBe(false);
    // Equal sizes, empty proof: equal roots of a wrong length are still not a proof.
    expect(verifyConsistency(1, 1, [], roots[1]!, roots[1]!)).toBe(true);
    expect(verifyConsistency(1, 1, [], empty, empty)).toBe(false);
    expect(verifyConsistency(1, 1, [], new Uint8Array(40), new Uint8Array(40))).toBe(false);
  });

  it('never verifies a consistency proof from size 0 (RFC 9162 §2.1.4.1: 0 < m), whatever the roots', () => {
    const arbitrary = [EMPTY_ROOT, roots[10]!, flipped(roots[10]!, 3), new Uint8Array(32)];
    for (const a of arbitrary) {
      for (const b of arbitrary) {
        expect(verifyConsistency(0, 10, [], a, b)).toBe(false);
        expect(verifyConsistency(0, 0, [], a, b)).toBe(false);
      }
    }
    expect(rootsFromConsistencyProof(0, 10, [], EMPTY_ROOT)).toBeNull();
  });
});
