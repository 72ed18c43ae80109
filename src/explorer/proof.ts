// An inclusion proof folded step by step, so the page can both check it and draw it:
// each step names the sibling's leaf range and side and the hash it produces. The result
// is cross-checked against src/core/merkle.ts's RFC 9162 verifier.
import { leafHash, nodeHash } from '../core/hash.js';
import { rootFromInclusionProof, splitPoint } from '../core/merkle.js';
import { bytesEqual } from './bytes.js';

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
  readonly steps: Step[];
  /** The root the path rebuilds; null if the path has the wrong length for (index, size). */
  readonly root: Uint8Array | null;
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

export function foldInclusion(
  index: number,
  size: number,
  entryHash: Uint8Array,
  path: readonly Uint8Array[],
): FoldedProof {
  const leaf = leafHash(entryHash);
  const ranges = index >= 0 && index < size ? siblingRanges(index, size) : null;
  if (!ranges || ranges.length !== path.length) return { leaf: { index, hash: leaf }, steps: [], root: null };
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
  // Independent check with the RFC 9162 algorithm of src/core/merkle.ts.
  const rfc = rootFromInclusionProof(index, size, leaf, path);
  const root = rfc && bytesEqual(rfc, h) ? h : null;
  return { leaf: { index, hash: leaf }, steps, root };
}
