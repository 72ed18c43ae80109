// Hash plans (src/core/merkle.ts): what a proof reads and how it folds, checked against the
// naive RFC 6962 definitions, including plans that share folds and the right-edge memo.
import { describe, expect, it } from 'vitest';
import {
  EDGE_NODE,
  MemoryHashReader,
  RightEdgeMemo,
  planAll,
  planConsistency,
  planConsistencyWithRoots,
  planInclusion,
  planLeafHash,
  planTreeHash,
  auditPathNodes,
  treeHashSync,
} from '../../src/core/merkle.js';
import { toHex } from '../../src/core/hash.js';
import * as naive from '../helpers/naive.js';

const N = 300;
const inputs = Array.from({ length: N }, (_, i) => Uint8Array.of(i & 0xff, i >> 8, 7));
const leaves = inputs.map((d) => naive.naiveLeafHash(d));
const mem = new MemoryHashReader(leaves);
const hexes = (xs: readonly Uint8Array[]) => xs.map(toHex);

describe('hash plans', () => {
  it('planConsistencyWithRoots gives MTH of both trees and PROOF(first, second), for every pair up to 130', () => {
    for (let second = 1; second <= 130; second++) {
      for (let first = 0; first <= second; first++) {
        const plan = planConsistencyWithRoots(first, second);
        const got = plan.finish(mem.lookup(plan.refs));
        expect(toHex(got.firstRoot)).toBe(toHex(naive.mth(inputs.slice(0, first))));
        expect(toHex(got.secondRoot)).toBe(toHex(naive.mth(inputs.slice(0, second))));
        expect(hexes(got.proof)).toEqual(first === 0 ? [] : hexes(naive.proof(first, inputs.slice(0, second))));
      }
    }
  });

  it('shares the second tree’s fold with the proof’s right edge, so it reads fewer subtrees than three plans', () => {
    let fewer = 0;
    for (let second = 2; second <= N; second++) {
      for (const first of [1, 3, 100, second - 1]) {
        if (first >= second) continue;
        const together = planConsistencyWithRoots(first, second).refs.length;
        const apart = planAll(planTreeHash(first), planTreeHash(second), planConsistency(first, second)).refs.length;
        expect(together).toBeLessThanOrEqual(apart);
        if (together < apart) fewer++;
      }
    }
    expect(fewer).toBeGreaterThan(N);
  });

  it('auditPathNodes names the nodes of PATH(m, D[n]), the right edge as its range, for every pair up to 130', () => {
    const nodes: number[] = [];
    for (let n = 1; n <= 130; n++) {
      for (let m = 0; m < n; m++) {
        const count = auditPathNodes(m, n, nodes);
        const path = Array.from({ length: count }, (_, k) => {
          const [level, node] = [nodes[2 * k]!, nodes[2 * k + 1]!];
          if (level !== EDGE_NODE) return toHex(mem.lookup([{ level, index: node }])[0]!);
          return toHex(treeHashSync(n - node, new MemoryHashReader(leaves.slice(node, n)).lookup));
        });
        expect(path).toEqual(hexes(naive.path(m, inputs.slice(0, n))));
      }
    }
  });

  it('planAll finishes each plan with its own hashes', () => {
    const plan = planAll(planLeafHash(77), planInclusion(77, 250), planTreeHash(250));
    const [leaf, path, root] = plan.finish(mem.lookup(plan.refs));
    expect(toHex(leaf)).toBe(toHex(leaves[77]!));
    expect(hexes(path)).toEqual(hexes(naive.path(77, inputs.slice(0, 250))));
    expect(toHex(root)).toBe(toHex(naive.mth(inputs.slice(0, 250))));
  });

  it('the right-edge memo keeps only ranges ending at its size, and plans that hit it read less', () => {
    const memo = new RightEdgeMemo(250);
    const cold = planInclusion(3, 250, memo);
    expect(hexes(cold.finish(mem.lookup(cold.refs)))).toEqual(hexes(naive.path(3, inputs.slice(0, 250))));
    const warm = planInclusion(5, 250, memo);
    expect(warm.refs.length).toBeLessThan(cold.refs.length);
    expect(hexes(warm.finish(mem.lookup(warm.refs)))).toEqual(hexes(naive.path(5, inputs.slice(0, 250))));
    expect(memo.get(0, 249)).toBeUndefined();
    const other = planTreeHash(249, memo);
    other.finish(mem.lookup(other.refs));
    expect(memo.get(0, 249)).toBeUndefined();
    const mine = planTreeHash(250, memo);
    expect(toHex(mine.finish(mem.lookup(mine.refs)))).toBe(toHex(naive.mth(inputs.slice(0, 250))));
    expect(planTreeHash(250, memo).refs).toEqual([]);
  });
});
