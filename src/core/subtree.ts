// Subtree consistency proofs (draft-ietf-plants-merkle-tree-certs §4.4, used by C2SP
// tlog-mirror's add-entries): a proof that the subtree [start, end) of the leaves, with a
// given hash, sits at those positions in the tree of size n with a given root. A subtree is
// valid when start < end and start is a multiple of BIT_CEIL(end − start). For [0, m) the
// proof is exactly RFC 6962's consistency proof from m to n. Pure: no node:*, no Buffer.
import { EMPTY_ROOT, HASH_SIZE, bytesEqual, nodeHash } from './hash.js';
import { type HashReader, foldSubtrees, perfectSubtrees, splitPoint } from './merkle.js';

/** A half-open leaf range [lo, hi) whose RFC 6962 hash a proof carries. */
type Range = readonly [lo: number, hi: number];

const bitCeil = (x: number): number => {
  let p = 1;
  while (p < x) p *= 2;
  return p;
};

export function isValidSubtree(start: number, end: number): boolean {
  return (
    Number.isSafeInteger(start) &&
    Number.isSafeInteger(end) &&
    start >= 0 &&
    start < end &&
    start % bitCeil(end - start) === 0
  );
}

/**
 * The ranges whose hashes make SUBTREE_PROOF(start, end, D_n), in proof order: the
 * recursion's own hashes first, then the sibling of the node it went into.
 */
function subproofRanges(start: number, end: number, base: number, n: number, known: boolean, out: Range[]): void {
  if (start === 0 && end === n) {
    if (!known) out.push([base, base + n]);
    return;
  }
  const k = splitPoint(n);
  if (end <= k) {
    subproofRanges(start, end, base, k, known, out);
    out.push([base + k, base + n]);
  } else if (k <= start) {
    subproofRanges(start - k, end - k, base + k, n - k, known, out);
    out.push([base, base + k]);
  } else {
    // Straddling the split happens only for start = 0: the part right of k is no node the
    // verifier knows.
    subproofRanges(0, end - k, base + k, n - k, false, out);
    out.push([base, base + k]);
  }
}

function assertSubtree(start: number, end: number, n: number): void {
  if (!isValidSubtree(start, end) || !Number.isSafeInteger(n) || end > n)
    throw new RangeError(`[${start}, ${end}) is not a valid subtree of a tree of size ${n}`);
}

/** SUBTREE_PROOF(start, end, D_n) read through `reader` (perfect-subtree hashes of the size-n tree). */
export async function proveSubtree(start: number, end: number, n: number, reader: HashReader): Promise<Uint8Array[]> {
  assertSubtree(start, end, n);
  const ranges: Range[] = [];
  subproofRanges(start, end, 0, n, true, ranges);
  const parts = ranges.map(([lo, hi]) => perfectSubtrees(lo, hi));
  const flat = parts.flat();
  const hashes = flat.length === 0 ? [] : await reader.readHashes(flat);
  let at = 0;
  return parts.map((p) => {
    const h = foldSubtrees(hashes.slice(at, at + p.length));
    at += p.length;
    return h;
  });
}

/** MTH of a list of leaf hashes (RFC 6962 §2.1), the hash of a subtree given its leaves. */
export function rangeHash(leaves: readonly Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return EMPTY_ROOT;
  if (leaves.length === 1) return leaves[0]!;
  const k = splitPoint(leaves.length);
  return nodeHash(rangeHash(leaves.slice(0, k)), rangeHash(leaves.slice(k)));
}

/**
 * Whether `proof` shows that the subtree [start, end) with hash `subtreeHash` is part of
 * the tree of size n with root `root`. It replays the proof's own recursion, rebuilding the
 * root and (where the subtree straddles a split, so it is not one node) the subtree's hash
 * from the proof, and requires every hash to be used exactly once.
 */
export function verifySubtree(
  start: number,
  end: number,
  n: number,
  proof: readonly Uint8Array[],
  subtreeHash: Uint8Array,
  root: Uint8Array,
): boolean {
  if (!isValidSubtree(start, end) || !Number.isSafeInteger(n) || end > n) return false;
  if (subtreeHash.length !== HASH_SIZE || root.length !== HASH_SIZE || proof.some((h) => h.length !== HASH_SIZE))
    return false;
  let at = 0;
  const next = (): Uint8Array | null => proof[at++] ?? null;
  /** [root of D_n, hash of the subtree part inside it] or null when the proof runs out. */
  const walk = (s: number, e: number, size: number, known: boolean): [Uint8Array, Uint8Array] | null => {
    if (s === 0 && e === size) {
      if (known) return [subtreeHash, subtreeHash];
      const h = next();
      return h ? [h, h] : null;
    }
    const k = splitPoint(size);
    if (e <= k) {
      const inner = walk(s, e, k, known);
      const sib = inner && next();
      return inner && sib ? [nodeHash(inner[0], sib), inner[1]] : null;
    }
    if (k <= s) {
      const inner = walk(s - k, e - k, size - k, known);
      const sib = inner && next();
      return inner && sib ? [nodeHash(sib, inner[0]), inner[1]] : null;
    }
    const inner = walk(0, e - k, size - k, false);
    const sib = inner && next();
    return inner && sib ? [nodeHash(sib, inner[0]), nodeHash(sib, inner[1])] : null;
  };
  const got = walk(start, end, n, true);
  return got !== null && at === proof.length && bytesEqual(got[0], root) && bytesEqual(got[1], subtreeHash);
}
