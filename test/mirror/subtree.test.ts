// Subtree consistency proofs (src/mirror/subtree.ts): every valid subtree of small trees
// proves and verifies; [0, m) is RFC 6962's consistency proof; any change to the proof, the
// subtree hash, the root or the positions fails.
import { describe, expect, it } from 'vitest';
import { leafHash } from '../../src/core/hash.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../../src/core/merkle.js';
import { isValidSubtree, proveSubtree, rangeHash, verifySubtree } from '../../src/core/subtree.js';

const leaves = Array.from({ length: 1100 }, (_, i) => leafHash(new TextEncoder().encode(`leaf ${i}`)));
const hex = (hs: readonly Uint8Array[]) => hs.map((h) => Buffer.from(h).toString('hex'));

describe('subtree consistency proofs', () => {
  it('knows which intervals are subtrees', () => {
    expect(isValidSubtree(0, 5)).toBe(true);
    expect(isValidSubtree(8, 13)).toBe(true);
    expect(isValidSubtree(4, 9)).toBe(false); // BIT_CEIL(5) = 8 does not divide 4
    expect(isValidSubtree(3, 3)).toBe(false);
    expect(isValidSubtree(256, 300)).toBe(true);
    expect(isValidSubtree(256, 512)).toBe(true);
  });

  it('proves and verifies every valid subtree of trees up to 33 leaves, and nothing else', async () => {
    for (let n = 1; n <= 33; n++) {
      const reader = new MemoryHashReader(leaves.slice(0, n));
      const root = await treeHash(n, reader);
      for (let start = 0; start < n; start++) {
        for (let end = start + 1; end <= n; end++) {
          if (!isValidSubtree(start, end)) continue;
          const proof = await proveSubtree(start, end, n, reader);
          const sub = rangeHash(leaves.slice(start, end));
          expect(verifySubtree(start, end, n, proof, sub, root), `[${start},${end}) of ${n}`).toBe(true);
          if (start === 0) expect(hex(proof)).toEqual(hex(await proveConsistency(end, n, reader)));
          // Breaking anything breaks the proof.
          const other = leafHash(new Uint8Array([1]));
          expect(verifySubtree(start, end, n, proof, other, root)).toBe(false);
          expect(verifySubtree(start, end, n, proof, sub, other)).toBe(false);
          expect(verifySubtree(start, end, n, [...proof, other], sub, root)).toBe(false);
          if (proof.length > 0) {
            expect(verifySubtree(start, end, n, proof.slice(1), sub, root)).toBe(false);
            const bent = proof.map((h, i) => (i === proof.length - 1 ? other : h));
            expect(verifySubtree(start, end, n, bent, sub, root)).toBe(false);
          }
          if (end < n && isValidSubtree(start, end + 1))
            expect(verifySubtree(start, end + 1, n, proof, sub, root)).toBe(false);
        }
      }
    }
  });

  it('proves the 256-aligned packages of tlog-mirror in a larger tree', async () => {
    const n = 1100;
    const reader = new MemoryHashReader(leaves);
    const root = await treeHash(n, reader);
    for (const [s, e] of [
      [0, 256],
      [256, 512],
      [768, 1024],
      [1024, 1100],
      [1024, 1030],
    ] as const) {
      const proof = await proveSubtree(s, e, n, reader);
      expect(verifySubtree(s, e, n, proof, rangeHash(leaves.slice(s, e)), root)).toBe(true);
      expect(verifySubtree(s, e, n, proof, rangeHash(leaves.slice(s, e - 1)), root)).toBe(false);
    }
    await expect(proveSubtree(300, 400, n, reader)).rejects.toThrow(RangeError);
  });
});
