// An independent, deliberately naive RFC 6962 §2.1 implementation for cross-checking
// src/core/merkle.ts. It does not import anything from src/: hashing uses node:crypto directly.
//
//   MTH({})        = SHA-256()
//   MTH({d(0)})    = SHA-256(0x00 || d(0))
//   MTH(D[n])      = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])),  k = largest power of 2 < n
//
//   PATH(m, {d(0)}) = {}
//   PATH(m, D[n])   = PATH(m, D[0:k]) : MTH(D[k:n])        if m < k
//                   = PATH(m - k, D[k:n]) : MTH(D[0:k])    if m >= k
//
//   PROOF(m, D[n])            = SUBPROOF(m, D[n], true)
//   SUBPROOF(m, D[m], true)   = {}
//   SUBPROOF(m, D[m], false)  = {MTH(D[m])}
//   SUBPROOF(m, D[n], b)      = SUBPROOF(m, D[0:k], b) : MTH(D[k:n])           if m <= k
//                             = SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k])   if m > k
import { createHash } from 'node:crypto';

export function sha256(...parts: Uint8Array[]): Uint8Array {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
}

export function naiveLeafHash(input: Uint8Array): Uint8Array {
  return sha256(Uint8Array.of(0x00), input);
}

export function naiveNodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256(Uint8Array.of(0x01), left, right);
}

/** The largest power of two strictly less than n (n > 1). */
export function largestPowerOfTwoBelow(n: number): number {
  if (!(n > 1)) throw new RangeError(`k is defined only for n > 1, got ${n}`);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

// ---------------------------------------------------------------------------------------
// The literal definitions, over arrays of leaf inputs (slow: for small trees only).
// ---------------------------------------------------------------------------------------

/** MTH(D) over an array of leaf inputs. */
export function mth(D: readonly Uint8Array[]): Uint8Array {
  const n = D.length;
  if (n === 0) return sha256();
  if (n === 1) return naiveLeafHash(D[0]!);
  const k = largestPowerOfTwoBelow(n);
  return naiveNodeHash(mth(D.slice(0, k)), mth(D.slice(k, n)));
}

/** PATH(m, D): the audit path of leaf m. */
export function path(m: number, D: readonly Uint8Array[]): Uint8Array[] {
  const n = D.length;
  if (m < 0 || m >= n) throw new RangeError(`PATH(${m}, D[${n}]) is undefined`);
  if (n === 1) return [];
  const k = largestPowerOfTwoBelow(n);
  if (m < k) return [...path(m, D.slice(0, k)), mth(D.slice(k, n))];
  return [...path(m - k, D.slice(k, n)), mth(D.slice(0, k))];
}

/** PROOF(m, D): the consistency proof from the first m leaves to all of D. */
export function proof(m: number, D: readonly Uint8Array[]): Uint8Array[] {
  if (m < 1 || m > D.length) throw new RangeError(`PROOF(${m}, D[${D.length}]) is undefined`);
  return subproof(m, D, true);
}

function subproof(m: number, D: readonly Uint8Array[], b: boolean): Uint8Array[] {
  const n = D.length;
  if (m === n) return b ? [] : [mth(D)];
  const k = largestPowerOfTwoBelow(n);
  if (m <= k) return [...subproof(m, D.slice(0, k), b), mth(D.slice(k, n))];
  return [...subproof(m - k, D.slice(k, n), false), mth(D.slice(0, k))];
}

// ---------------------------------------------------------------------------------------
// The same recursions over index ranges D[lo:hi] of one fixed leaf list, with MTH memoised
// per range, so that every proof of every size of a few-hundred-leaf tree (or the roots of
// a 70,000-leaf tree) can be computed quickly. Same definitions, no cleverness.
// ---------------------------------------------------------------------------------------

export class NaiveTree {
  private readonly memo = new Map<number, Uint8Array>();

  /** `leafHashes[i]` = MTH({d(i)}). */
  constructor(readonly leafHashes: readonly Uint8Array[]) {}

  static fromInputs(inputs: readonly Uint8Array[]): NaiveTree {
    return new NaiveTree(inputs.map(naiveLeafHash));
  }

  get size(): number {
    return this.leafHashes.length;
  }

  private check(lo: number, hi: number): void {
    if (!(Number.isInteger(lo) && Number.isInteger(hi) && 0 <= lo && lo <= hi && hi <= this.size)) {
      throw new RangeError(`D[${lo}:${hi}] is not within the ${this.size} known leaves`);
    }
  }

  /** MTH(D[lo:hi]). */
  mth(lo: number, hi: number): Uint8Array {
    this.check(lo, hi);
    const n = hi - lo;
    if (n === 0) return sha256();
    if (n === 1) return this.leafHashes[lo]!;
    const key = lo * (this.size + 1) + hi;
    const hit = this.memo.get(key);
    if (hit) return hit;
    const k = largestPowerOfTwoBelow(n);
    const h = naiveNodeHash(this.mth(lo, lo + k), this.mth(lo + k, hi));
    this.memo.set(key, h);
    return h;
  }

  /** MTH(D[0:n]). */
  root(n: number): Uint8Array {
    return this.mth(0, n);
  }

  /** PATH(m, D[0:n]). */
  path(m: number, n: number): Uint8Array[] {
    if (!(Number.isInteger(m) && 0 <= m && m < n)) throw new RangeError(`PATH(${m}, D[${n}]) is undefined`);
    this.check(0, n);
    const out: Uint8Array[] = [];
    this.pathRange(m, 0, n, out);
    return out;
  }

  private pathRange(m: number, lo: number, hi: number, out: Uint8Array[]): void {
    const n = hi - lo;
    if (n === 1) return;
    const k = largestPowerOfTwoBelow(n);
    if (m < k) {
      this.pathRange(m, lo, lo + k, out);
      out.push(this.mth(lo + k, hi));
    } else {
      this.pathRange(m - k, lo + k, hi, out);
      out.push(this.mth(lo, lo + k));
    }
  }

  /** PROOF(m, D[0:n]). */
  proof(m: number, n: number): Uint8Array[] {
    if (!(Number.isInteger(m) && 1 <= m && m <= n)) throw new RangeError(`PROOF(${m}, D[${n}]) is undefined`);
    this.check(0, n);
    const out: Uint8Array[] = [];
    this.subproofRange(m, 0, n, true, out);
    return out;
  }

  private subproofRange(m: number, lo: number, hi: number, b: boolean, out: Uint8Array[]): void {
    const n = hi - lo;
    if (m === n) {
      if (!b) out.push(this.mth(lo, hi));
      return;
    }
    const k = largestPowerOfTwoBelow(n);
    if (m <= k) {
      this.subproofRange(m, lo, lo + k, b, out);
      out.push(this.mth(lo + k, hi));
    } else {
      this.subproofRange(m - k, lo + k, hi, false, out);
      out.push(this.mth(lo, lo + k));
    }
  }
}
