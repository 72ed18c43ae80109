// An audit path laid out step by step, so the page can draw it: each step names the
// sibling's leaf range and side and the node it produces. Drawing only: whether the path
// proves the leaf is rule 4's (src/core/verify/inclusion.ts), which the page reports.
import { nodeHash } from '../core/hash.js';
import { splitPoint } from '../core/merkle.js';

export interface Step {
  /** The sibling subtree's leaf range [lo, hi) and hash (from the tiles). */
  readonly sibling: { readonly lo: number; readonly hi: number; readonly hash: Uint8Array };
  /** Which side of the node being computed the sibling sits on. */
  readonly side: 'left' | 'right';
  /** The node computed at this step: its leaf range and hash. */
  readonly node: { readonly lo: number; readonly hi: number; readonly hash: Uint8Array };
}

export interface FoldedProof {
  readonly leaf: { readonly index: number; readonly hash: Uint8Array };
  /** Empty when the path has the wrong length for (index, size). */
  readonly steps: Step[];
}

/** Sibling ranges of PATH(m, D[lo:hi]), leaf side first (RFC 9162 §2.1.3.1). */
export function siblingRanges(m: number, size: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const walk = (lo: number, hi: number): void => {
    if (hi - lo <= 1) return;
    const k = splitPoint(hi - lo);
    if (m < lo + k) {
      walk(lo, lo + k);
      out.push([lo + k, hi]);
    } else {
      walk(lo + k, hi);
      out.push([lo, lo + k]);
    }
  };
  walk(0, size);
  return out;
}

/** The steps of `path` from leaf `index` (its leaf hash `leaf`) of a tree of `size`. */
export function foldInclusion(index: number, size: number, leaf: Uint8Array, path: readonly Uint8Array[]): FoldedProof {
  const ranges = index >= 0 && index < size ? siblingRanges(index, size) : null;
  if (!ranges || ranges.length !== path.length) return { leaf: { index, hash: leaf }, steps: [] };
  const steps: Step[] = [];
  let lo = index;
  let hi = index + 1;
  let h = leaf;
  path.forEach((sib, i) => {
    const [slo, shi] = ranges[i]!;
    const side = slo < lo ? 'left' : 'right';
    h = side === 'left' ? nodeHash(sib, h) : nodeHash(h, sib);
    lo = Math.min(lo, slo);
    hi = Math.max(hi, shi);
    steps.push({ sibling: { lo: slo, hi: shi, hash: sib }, side, node: { lo, hi, hash: h } });
  });
  return { leaf: { index, hash: leaf }, steps };
}
