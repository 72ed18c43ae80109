// Rule 4: the audit path rebuilds the signed root from the leaf (RFC 9162 §2.1.3.2).
import { bytesEqual, toHex } from '../hash.js';
import { rootFromInclusionProof } from '../merkle.js';
import { type Outcome, short } from './rules.js';

/** Rule 4: the `path` for leaf `leafIndex` of the tree of `treeSize` must rebuild the checkpoint's root. */
export function checkInclusion(
  leafIndex: number,
  treeSize: number,
  leaf: Uint8Array,
  path: readonly Uint8Array[],
  checkpoint: { size: number; root: Uint8Array },
): Outcome {
  const where = `leaf index ${leafIndex}, tree size ${treeSize}`;
  if (treeSize !== checkpoint.size)
    return {
      ok: false,
      detail: `${where}: the proof is for tree size ${treeSize}, the checkpoint has ${checkpoint.size}`,
    };
  if (!Number.isSafeInteger(leafIndex) || leafIndex < 0 || leafIndex >= treeSize)
    return { ok: false, detail: `${where}: the leaf is not in the tree` };
  const root = rootFromInclusionProof(leafIndex, treeSize, leaf, path);
  if (!root) return { ok: false, detail: `${where}: malformed audit path (${path.length} hashes is the wrong length)` };
  if (!bytesEqual(root, checkpoint.root)) {
    return {
      ok: false,
      detail: `${where}: the ${path.length}-hash audit path rebuilds root ${short(toHex(root))}, not the checkpoint root ${short(toHex(checkpoint.root))}`,
    };
  }
  return {
    ok: true,
    detail: `${where}: the ${path.length}-hash audit path rebuilds the checkpoint root ${short(toHex(checkpoint.root))}`,
  };
}
