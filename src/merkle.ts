// RFC 6962 / RFC 9162 §2.1 Merkle tree math: tree hashes, inclusion and consistency
// proofs (generation and verification). Generation works over a HashReader that
// returns hashes of perfect subtrees, so proofs can be computed from tiles read lazily.
// Sizes and indexes are plain numbers (exact up to 2^53); no 32-bit bit operations.
import { EMPTY_ROOT, bytesEqual, nodeHash } from './hash.js';

/** A perfect subtree: the 2^level leaves starting at index × 2^level. */
export interface SubtreeRef {
  readonly level: number;
  readonly index: number;
}

/** Supplies hashes of perfect subtrees, in the order asked. */
export interface HashReader {
  readHashes(refs: readonly SubtreeRef[]): Promise<Uint8Array[]>;
  /**
   * Optional memo of range hashes for this reader's tree: the right-edge ranges recur in
   * nearly every proof of one tree size, so folding them once saves most node hashing.
   */
  readonly rangeMemo?: Map<string, Uint8Array>;
}

/** A half-open leaf range [lo, hi) whose RFC 6962 hash a proof needs. */
type Range = readonly [lo: number, hi: number];

const half = (x: number): number => Math.floor(x / 2);
const odd = (x: number): boolean => x % 2 === 1;

/** The largest power of two strictly below n (n ≥ 2): RFC 6962's split point k. */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function isPowerOfTwo(n: number): boolean {
  return n >= 1 && 2 ** Math.round(Math.log2(n)) === n;
}

/**
 * Splits [lo, hi) into perfect subtrees, largest first. For the ranges proofs use
 * (lo a multiple of a power of two ≥ hi − lo) this is RFC 6962's recursive split.
 */
export function perfectSubtrees(lo: number, hi: number): SubtreeRef[] {
  const out: SubtreeRef[] = [];
  while (lo < hi) {
    let size = 1;
    let level = 0;
    while (size * 2 <= hi - lo && lo % (size * 2) === 0) {
      size *= 2;
      level++;
    }
    out.push({ level, index: lo / size });
    lo += size;
  }
  return out;
}

/** Combines perfect-subtree hashes (left to right) into the RFC 6962 hash of their range. */
export function foldSubtrees(hashes: readonly Uint8Array[]): Uint8Array {
  if (hashes.length === 0) return EMPTY_ROOT;
  let h = hashes[hashes.length - 1]!;
  for (let i = hashes.length - 2; i >= 0; i--) h = nodeHash(hashes[i]!, h);
  return h;
}

/** Looks up perfect-subtree hashes synchronously (in-memory tiles). */
export type SyncHashLookup = (refs: readonly SubtreeRef[]) => Uint8Array[];

/** The perfect subtrees several ranges need, and how to fold their hashes back per range. */
function planRanges(ranges: readonly Range[]): { refs: SubtreeRef[]; combine: (hashes: Uint8Array[]) => Uint8Array[] } {
  const parts = ranges.map(([lo, hi]) => perfectSubtrees(lo, hi));
  return {
    refs: parts.flat(),
    combine(hashes) {
      let at = 0;
      return parts.map((p) => {
        const h = foldSubtrees(hashes.slice(at, at + p.length));
        at += p.length;
        return h;
      });
    },
  };
}

const MAX_RANGE_MEMO = 4096;

/** Reads and combines the hashes of several ranges with a single reader call. */
async function rangeHashes(ranges: readonly Range[], reader: HashReader): Promise<Uint8Array[]> {
  const memo = reader.rangeMemo;
  if (!memo) {
    const plan = planRanges(ranges);
    return plan.combine(await reader.readHashes(plan.refs));
  }
  const keys = ranges.map(([lo, hi]) => `${lo}:${hi}`);
  const missing = ranges.filter((_, i) => !memo.has(keys[i]!));
  const plan = planRanges(missing);
  const computed = plan.combine(await reader.readHashes(plan.refs));
  let m = 0;
  return ranges.map(([lo, hi], i) => {
    const known = memo.get(keys[i]!);
    if (known) return known;
    const h = computed[m++]!;
    // Only ranges that needed folding are worth keeping; a perfect subtree is one lookup.
    if (perfectSubtrees(lo, hi).length > 1 && memo.size < MAX_RANGE_MEMO) memo.set(keys[i]!, h);
    return h;
  });
}

function rangeHashesSync(ranges: readonly Range[], lookup: SyncHashLookup): Uint8Array[] {
  const plan = planRanges(ranges);
  return plan.combine(lookup(plan.refs));
}

function assertSize(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be a non-negative integer`);
}

/** MTH(D[0:size]). */
export async function treeHash(size: number, reader: HashReader): Promise<Uint8Array> {
  assertSize('size', size);
  if (size === 0) return EMPTY_ROOT;
  const [h] = await rangeHashes([[0, size]], reader);
  return h!;
}

export function treeHashSync(size: number, lookup: SyncHashLookup): Uint8Array {
  assertSize('size', size);
  if (size === 0) return EMPTY_ROOT;
  return rangeHashesSync([[0, size]], lookup)[0]!;
}

/** The ranges of PATH(m, D[lo:hi]) (RFC 9162 §2.1.3.1), leaf side first. */
function inclusionRanges(m: number, lo: number, hi: number, out: Range[]): void {
  if (hi - lo <= 1) return;
  const k = splitPoint(hi - lo);
  if (m < lo + k) {
    inclusionRanges(m, lo, lo + k, out);
    out.push([lo + k, hi]);
  } else {
    inclusionRanges(m, lo + k, hi, out);
    out.push([lo, lo + k]);
  }
}

/** The ranges of SUBPROOF(m, D[lo:hi], b) (RFC 9162 §2.1.4.1). */
function consistencyRanges(m: number, lo: number, hi: number, b: boolean, out: Range[]): void {
  const n = hi - lo;
  if (m === n) {
    if (!b) out.push([lo, hi]);
    return;
  }
  const k = splitPoint(n);
  if (m <= k) {
    consistencyRanges(m, lo, lo + k, b, out);
    out.push([lo + k, hi]);
  } else {
    consistencyRanges(m - k, lo + k, hi, false, out);
    out.push([lo, lo + k]);
  }
}

function inclusionPlan(index: number, size: number): Range[] {
  assertSize('index', index);
  assertSize('size', size);
  if (index >= size) throw new RangeError(`leaf index ${index} is not below tree size ${size}`);
  const ranges: Range[] = [];
  inclusionRanges(index, 0, size, ranges);
  return ranges;
}

function consistencyPlan(first: number, second: number): Range[] {
  assertSize('first', first);
  assertSize('second', second);
  if (first > second) throw new RangeError(`first size ${first} exceeds second size ${second}`);
  const ranges: Range[] = [];
  if (first > 0 && first < second) consistencyRanges(first, 0, second, true, ranges);
  return ranges;
}

/** The audit path of leaf `index` in the tree of `size` leaves. */
export async function proveInclusion(index: number, size: number, reader: HashReader): Promise<Uint8Array[]> {
  return rangeHashes(inclusionPlan(index, size), reader);
}

export function proveInclusionSync(index: number, size: number, lookup: SyncHashLookup): Uint8Array[] {
  return rangeHashesSync(inclusionPlan(index, size), lookup);
}

/** The consistency proof from tree size `first` to `second` (empty when equal or first is 0). */
export async function proveConsistency(first: number, second: number, reader: HashReader): Promise<Uint8Array[]> {
  return rangeHashes(consistencyPlan(first, second), reader);
}

/** Recomputes the root from a leaf hash and its audit path (RFC 9162 §2.1.3.2); null if malformed. */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  path: readonly Uint8Array[],
): Uint8Array | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (odd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 ? r : null;
}

export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  path: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  const r = rootFromInclusionProof(index, size, leaf, path);
  return r !== null && bytesEqual(r, root);
}

/**
 * Recomputes both roots from a consistency proof (RFC 9162 §2.1.4.2). `firstRoot` is
 * needed only when `first` is a power of two (the proof then omits it). Null if malformed.
 */
export function rootsFromConsistencyProof(
  first: number,
  second: number,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
): { first: Uint8Array; second: Uint8Array } | null {
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second) || first < 1 || first > second) return null;
  if (first === second) return proof.length === 0 ? { first: firstRoot, second: firstRoot } : null;
  const path = isPowerOfTwo(first) ? [firstRoot, ...proof] : [...proof];
  if (path.length === 0) return null;
  let fn = first - 1;
  let sn = second - 1;
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return null;
    if (odd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 ? { first: fr, second: sr } : null;
}

export function verifyConsistency(
  first: number,
  second: number,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
): boolean {
  if (first === 0) return proof.length === 0;
  const roots = rootsFromConsistencyProof(first, second, proof, firstRoot);
  return roots !== null && bytesEqual(roots.first, firstRoot) && bytesEqual(roots.second, secondRoot);
}

/** A HashReader over an in-memory list of leaf hashes (tests, small trees). */
export class MemoryHashReader implements HashReader {
  constructor(private readonly leaves: readonly Uint8Array[]) {}

  async readHashes(refs: readonly SubtreeRef[]): Promise<Uint8Array[]> {
    return this.lookup(refs);
  }

  readonly lookup: SyncHashLookup = (refs) => refs.map((r) => this.hash(r.level, r.index));

  private hash(level: number, index: number): Uint8Array {
    if (level === 0) {
      const leaf = this.leaves[index];
      if (!leaf) throw new RangeError(`no leaf ${index}`);
      return leaf;
    }
    return nodeHash(this.hash(level - 1, 2 * index), this.hash(level - 1, 2 * index + 1));
  }
}
