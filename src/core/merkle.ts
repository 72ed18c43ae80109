// RFC 6962 / RFC 9162 §2.1 Merkle tree math: tree hashes, inclusion and consistency
// proofs (generation and verification). Generation works over a HashReader that
// returns hashes of perfect subtrees, so proofs can be computed from tiles read lazily.
// Sizes and indexes are plain numbers (exact up to 2^53); no 32-bit bit operations.
import { EMPTY_ROOT, HASH_SIZE, bytesEqual, nodeHash } from './hash.js';

/** A perfect subtree: the 2^level leaves starting at index × 2^level. */
export interface SubtreeRef {
  readonly level: number;
  readonly index: number;
}

/** Supplies hashes of perfect subtrees, in the order asked. */
export interface HashReader {
  readHashes(refs: readonly SubtreeRef[]): Promise<Uint8Array[]>;
  /** Optional memo of this reader's tree's right-edge range hashes (see RightEdgeMemo). */
  readonly rangeMemo?: RightEdgeMemo;
}

/**
 * Half-open leaf ranges [lo, hi) whose RFC 6962 hashes a proof needs, as flat pairs
 * (lo₀, hi₀, lo₁, hi₁, …): a proof is the read path's hot loop, and a tuple per range was
 * most of what planning one allocated.
 */
type Ranges = number[];

const half = (x: number): number => Math.floor(x / 2);
const odd = (x: number): boolean => x % 2 === 1;

/** 2^level for every level a tree of safe-integer size has: looked up, as `2 ** level` calls pow. */
const POW2: readonly number[] = Array.from({ length: 64 }, (_, level) => 2 ** level);

/** Leaves under a perfect subtree of `level` (2^level). */
export function subtreeWidth(level: number): number {
  return POW2[level] ?? 2 ** level;
}

/** The largest power of two strictly below n (n ≥ 2): RFC 6962's split point k. */
export function splitPoint(n: number): number {
  // 32-bit operations where they are exact: every proof splits about 2 × log2(size) times.
  if (n <= 2 ** 31) return n <= 2 ? 1 : 2 ** (31 - Math.clz32(n - 1));
  let k = 2 ** 31;
  while (k * 2 < n) k *= 2;
  return k;
}

function isPowerOfTwo(n: number): boolean {
  // 32-bit operations only where they are exact.
  return n >= 1 && (n < 2 ** 31 ? (n & (n - 1)) === 0 : 2 ** Math.round(Math.log2(n)) === n);
}

/** log2 of a power of two. */
function exactLog2(n: number): number {
  return n < 2 ** 31 ? 31 - Math.clz32(n) : Math.round(Math.log2(n));
}

/** True when [lo, hi) is a single perfect subtree. */
function isSubtree(lo: number, hi: number): boolean {
  return lo % (hi - lo) === 0 && isPowerOfTwo(hi - lo);
}

/**
 * Splits [lo, hi) into perfect subtrees, largest first. For the ranges proofs use (lo a
 * multiple of a power of two ≥ hi − lo) this is RFC 6962's recursive split.
 */
export function perfectSubtrees(lo: number, hi: number): SubtreeRef[] {
  const out: SubtreeRef[] = [];
  for (let at = lo; at < hi; at += subtreeWidth(out[out.length - 1]!.level)) out.push(firstSubtree(at, hi));
  return out;
}

/**
 * Folds hashes[from, to) (perfect subtrees, left to right) into the hash of their range;
 * `tail`, when given, is the hash of the rest of the range, right of them.
 */
function foldRange(hashes: readonly Uint8Array[], from: number, to: number, tail?: Uint8Array): Uint8Array {
  let h = tail;
  for (let i = to - 1; i >= from; i--) h = h ? nodeHash(hashes[i]!, h) : hashes[i]!;
  return h ?? EMPTY_ROOT;
}

/** Combines perfect-subtree hashes (left to right) into the RFC 6962 hash of their range. */
export function foldSubtrees(hashes: readonly Uint8Array[]): Uint8Array {
  return foldRange(hashes, 0, hashes.length);
}

/** Looks up perfect-subtree hashes synchronously (in-memory tiles). */
export type SyncHashLookup = (refs: readonly SubtreeRef[]) => Uint8Array[];

/**
 * The hashes of the ranges [lo, size) of one tree of `size` leaves. They recur in nearly
 * every proof of that size and each needs folding, so they are worth keeping; there are at
 * most 53 of them (one per set bit of the size's prefix sums), so the memo stays small.
 */
export class RightEdgeMemo {
  private readonly byStart = new Map<number, Uint8Array>();

  constructor(readonly size: number) {}

  get(lo: number, hi: number): Uint8Array | undefined {
    return hi === this.size ? this.byStart.get(lo) : undefined;
  }

  set(lo: number, hi: number, hash: Uint8Array): void {
    if (hi === this.size) this.byStart.set(lo, hash);
  }
}

/**
 * What a computation reads, as perfect-subtree refs, and how it turns their hashes (in the
 * order of `refs`) into its result. Plans let a caller gather every tile a request needs
 * first, then read them once, synchronously when they are all cached.
 */
export interface HashPlan<T> {
  readonly refs: readonly SubtreeRef[];
  finish(hashes: readonly Uint8Array[]): T;
}

/** The first perfect subtree of [lo, hi): the largest one starting at lo that fits. */
function firstSubtree(lo: number, hi: number): SubtreeRef {
  if (hi < 2 ** 31) {
    // The lowest set bit of lo (any power of two divides 0), and the highest of hi − lo.
    const level = Math.min(lo === 0 ? 31 : 31 - Math.clz32(lo & -lo), 31 - Math.clz32(hi - lo));
    return { level, index: lo >>> level };
  }
  let size = 1;
  let level = 0;
  while (size * 2 <= hi - lo && lo % (size * 2) === 0) {
    size *= 2;
    level++;
  }
  return { level, index: lo / size };
}

/**
 * The hashes of several ranges: memoised ones as they are, the others folded from their
 * perfect subtrees. Ranges that end together share the tail of their split (a consistency
 * proof's right edge is the tail of the second tree's), so such a tail is folded once.
 */
function planRanges(ranges: Readonly<Ranges>, memo?: RightEdgeMemo): HashPlan<Uint8Array[]> {
  const count = ranges.length / 2;
  const refs: SubtreeRef[] = [];
  // Per range: its hash once known, where its refs are in `refs`, and the range that is its tail.
  const done = new Array<Uint8Array | undefined>(count);
  const starts = new Array<number>(count);
  const ends = new Array<number>(count);
  const tails = new Array<number>(count);
  // Only a range that is not one perfect subtree needs folding (and may be memoised or
  // shared); a proof has at most one, its plan with the tree hashes a few. Each range is
  // tested once: the tail search below runs at every step of every split.
  const subtree = new Array<boolean>(count);
  const folded: number[] = [];
  for (let i = 0; i < count; i++) {
    subtree[i] = isSubtree(ranges[2 * i]!, ranges[2 * i + 1]!);
    if (!subtree[i]) folded.push(i);
  }
  const tailFor = (at: number, hi: number): number => {
    if (folded.length > 1) for (const j of folded) if (ranges[2 * j] === at && ranges[2 * j + 1] === hi) return j;
    return -1;
  };
  for (let i = 0; i < count; i++) {
    const lo = ranges[2 * i]!;
    const hi = ranges[2 * i + 1]!;
    starts[i] = refs.length;
    tails[i] = -1;
    if (subtree[i]) {
      const width = hi - lo;
      refs.push({ level: exactLog2(width), index: lo / width });
    } else {
      done[i] = memo?.get(lo, hi);
      for (let at = lo; !done[i] && at < hi; ) {
        if (at > lo && (tails[i] = tailFor(at, hi)) >= 0) break;
        const ref = firstSubtree(at, hi);
        refs.push(ref);
        at += subtreeWidth(ref.level);
      }
    }
    ends[i] = refs.length;
  }
  return {
    refs,
    finish(hashes) {
      const hashOf = (i: number): Uint8Array => {
        let h = done[i];
        if (!h) {
          // A tail starts right of its range's start, so this recursion ends.
          const tail = tails[i]! >= 0 ? hashOf(tails[i]!) : undefined;
          h = done[i] = foldRange(hashes, starts[i]!, ends[i]!, tail);
          if (!subtree[i]) memo?.set(ranges[2 * i]!, ranges[2 * i + 1]!, h);
        }
        return h;
      };
      const out = new Array<Uint8Array>(count);
      for (let i = 0; i < count; i++) out[i] = hashOf(i);
      return out;
    },
  };
}

type Plans<T extends readonly unknown[]> = { readonly [K in keyof T]: HashPlan<T[K]> };

/** One plan reading the refs of several, each finished with its own share of the hashes. */
export function planAll<T extends readonly unknown[]>(...plans: Plans<T>): HashPlan<T> {
  const refs: SubtreeRef[] = [];
  for (const p of plans as readonly HashPlan<unknown>[]) refs.push(...p.refs);
  return {
    refs,
    finish(hashes) {
      let at = 0;
      return (plans as readonly HashPlan<unknown>[]).map((p) =>
        p.finish(hashes.slice(at, (at += p.refs.length))),
      ) as unknown as T;
    },
  };
}

function assertSize(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be a non-negative integer`);
}

/** The ranges of PATH(m, D[lo:hi]) (RFC 9162 §2.1.3.1), leaf side first. */
function inclusionRanges(m: number, lo: number, hi: number, out: Ranges): void {
  if (hi - lo <= 1) return;
  const k = splitPoint(hi - lo);
  if (m < lo + k) {
    inclusionRanges(m, lo, lo + k, out);
    out.push(lo + k, hi);
  } else {
    inclusionRanges(m, lo + k, hi, out);
    out.push(lo, lo + k);
  }
}

/** The ranges of SUBPROOF(m, D[lo:hi], b) (RFC 9162 §2.1.4.1). */
function consistencyRanges(m: number, lo: number, hi: number, b: boolean, out: Ranges): void {
  const n = hi - lo;
  if (m === n) {
    if (!b) out.push(lo, hi);
    return;
  }
  const k = splitPoint(n);
  if (m <= k) {
    consistencyRanges(m, lo, lo + k, b, out);
    out.push(lo + k, hi);
  } else {
    consistencyRanges(m - k, lo + k, hi, false, out);
    out.push(lo, lo + k);
  }
}

/** MTH(D[0:size]) as a plan. */
export function planTreeHash(size: number, memo?: RightEdgeMemo): HashPlan<Uint8Array> {
  assertSize('size', size);
  const plan = planRanges(size === 0 ? [] : [0, size], memo);
  return { refs: plan.refs, finish: (hashes) => plan.finish(hashes)[0] ?? EMPTY_ROOT };
}

/** The leaf hash of `index`, as the tree stores it. */
export function planLeafHash(index: number): HashPlan<Uint8Array> {
  assertSize('index', index);
  return { refs: [{ level: 0, index }], finish: (hashes) => hashes[0]! };
}

/** The audit path of leaf `index` in the tree of `size` leaves, as a plan. */
export function planInclusion(index: number, size: number, memo?: RightEdgeMemo): HashPlan<Uint8Array[]> {
  assertSize('index', index);
  assertSize('size', size);
  if (index >= size) throw new RangeError(`leaf index ${index} is not below tree size ${size}`);
  const ranges: Ranges = [];
  inclusionRanges(index, 0, size, ranges);
  return planRanges(ranges, memo);
}

/** What auditPathNodes writes for the one sibling the right edge cuts short: a range, not a subtree. */
export const EDGE_NODE = -1;

/**
 * The nodes of leaf `index`'s audit path in the tree of `size` leaves, leaf side first, as
 * planInclusion's ranges without planning them: at each level below the root, the sibling
 * of the leaf's ancestor when it exists. Written into `out` as pairs (level, node index)
 * for a perfect subtree, or (EDGE_NODE, lo) for the range [lo, size) that the tree's right
 * edge cuts short (at most one: above it the ancestor is itself on the edge). Returns the
 * number of nodes. The read path's entry proofs take this route, with no object per node.
 */
export function auditPathNodes(index: number, size: number, out: number[]): number {
  assertSize('index', index);
  if (index >= size) throw new RangeError(`leaf index ${index} is not below tree size ${size}`);
  let count = 0;
  for (let level = 0, width = 1; width < size; level++, width *= 2) {
    const self = Math.floor(index / width);
    const sibling = odd(self) ? self - 1 : self + 1;
    const lo = sibling * width;
    if (lo >= size) continue;
    const edge = lo + width > size;
    out[2 * count] = edge ? EDGE_NODE : level;
    out[2 * count + 1] = edge ? lo : sibling;
    count++;
  }
  return count;
}

/** The consistency proof from tree size `first` to `second`, as a plan. */
export function planConsistency(first: number, second: number, memo?: RightEdgeMemo): HashPlan<Uint8Array[]> {
  return planRanges(consistencyPlanRanges(first, second), memo);
}

function consistencyPlanRanges(first: number, second: number, out: Ranges = []): Ranges {
  assertSize('first', first);
  assertSize('second', second);
  if (first > second) throw new RangeError(`first size ${first} exceeds second size ${second}`);
  if (first > 0 && first < second) consistencyRanges(first, 0, second, true, out);
  return out;
}

/**
 * MTH of both trees and the consistency proof between them, as one plan: the second tree's
 * split ends in the proof's right edge, so that part is read and folded once.
 */
export function planConsistencyWithRoots(
  first: number,
  second: number,
  memo?: RightEdgeMemo,
): HashPlan<{ firstRoot: Uint8Array; secondRoot: Uint8Array; proof: Uint8Array[] }> {
  // The two roots first, then the proof's ranges.
  const plan = planRanges(consistencyPlanRanges(first, second, [0, first, 0, second]), memo);
  return {
    refs: plan.refs,
    finish(hashes) {
      const all = plan.finish(hashes);
      return { firstRoot: all[0]!, secondRoot: all[1]!, proof: all.slice(2) };
    },
  };
}

async function readPlan<T>(plan: HashPlan<T>, reader: HashReader): Promise<T> {
  return plan.finish(plan.refs.length === 0 ? [] : await reader.readHashes(plan.refs));
}

const runSync = <T>(plan: HashPlan<T>, lookup: SyncHashLookup): T =>
  plan.finish(plan.refs.length === 0 ? [] : lookup(plan.refs));

/** MTH(D[0:size]). */
export async function treeHash(size: number, reader: HashReader): Promise<Uint8Array> {
  return readPlan(planTreeHash(size, reader.rangeMemo), reader);
}

export function treeHashSync(size: number, lookup: SyncHashLookup): Uint8Array {
  return runSync(planTreeHash(size), lookup);
}

/** The audit path of leaf `index` in the tree of `size` leaves. */
export async function proveInclusion(index: number, size: number, reader: HashReader): Promise<Uint8Array[]> {
  return readPlan(planInclusion(index, size, reader.rangeMemo), reader);
}

export function proveInclusionSync(index: number, size: number, lookup: SyncHashLookup): Uint8Array[] {
  return runSync(planInclusion(index, size), lookup);
}

/** The consistency proof from tree size `first` to `second` (empty when equal or first is 0). */
export async function proveConsistency(first: number, second: number, reader: HashReader): Promise<Uint8Array[]> {
  return readPlan(planConsistency(first, second, reader.rangeMemo), reader);
}

/**
 * Verification works on hashes of the tree's hash size only. Any other length is malformed:
 * a 0-byte leaf of a one-leaf tree would otherwise "rebuild" a 0-byte root (the
 * transparency-dev/merkle vector inclusion/single-entry/empty-root-and-leaf wants an error).
 */
const isHash = (h: Uint8Array): boolean => h.length === HASH_SIZE;

/** Recomputes the root from a leaf hash and its audit path (RFC 9162 §2.1.3.2); null if malformed. */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  path: readonly Uint8Array[],
): Uint8Array | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return null;
  if (!isHash(leaf) || !path.every(isHash)) return null;
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
  return r !== null && isHash(root) && bytesEqual(r, root);
}

/**
 * Recomputes both roots from a consistency proof (RFC 9162 §2.1.4.2). `firstRoot` is
 * needed only when `first` is a power of two (the proof then omits it). Null if malformed,
 * which includes a first size of 0: RFC 9162 §2.1.4.1 defines PROOF(m, D_n) for 0 < m only
 * (the empty tree is a prefix of every tree, so callers decide that case without a proof).
 */
export function rootsFromConsistencyProof(
  first: number,
  second: number,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
): { first: Uint8Array; second: Uint8Array } | null {
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second) || first < 1 || first > second) return null;
  if (!isHash(firstRoot) || !proof.every(isHash)) return null;
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

/**
 * True only for a well-formed proof that rebuilds both roots. A first size of 0 is not a
 * valid input (RFC 9162 §2.1.4.1), so it is false whatever the roots: a caller holding the
 * empty tree needs no proof and must not ask this function to bless arbitrary roots.
 */
export function verifyConsistency(
  first: number,
  second: number,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
): boolean {
  const roots = rootsFromConsistencyProof(first, second, proof, firstRoot);
  return (
    roots !== null && isHash(secondRoot) && bytesEqual(roots.first, firstRoot) && bytesEqual(roots.second, secondRoot)
  );
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
