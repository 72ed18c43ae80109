// The digest rows' short keys in memory, for an index small enough to afford them: a lookup
// by digest then starts at the leaf its short key names, with no LMDB seek (a B-tree descent
// to a random page, about 5 % of an entry?hash answer's CPU in the server, issue 36). Only a
// hint: the leaf is a candidate the caller's Confirm checks, as every index row is, and a
// short key not here is looked up in LMDB as before. Above its budget (a log of some
// millions of entries) the index keeps no table.

/** The table's budget unless the operator sets one (`--digest-hints-mib`): a log of about 2 M entries. */
export const DIGEST_HINTS_DEFAULT_MIB = 64;

/** Bytes per slot: the short key (48 bits, plus one so that 0 marks a free slot) and the leaf, as doubles. */
const SLOT_BYTES = 16;
/** Rows per slot at most: linear probing stays short (about 1.5 probes for a hit) below half full. */
const MAX_LOAD = 0.5;
const FIRST_SLOTS = 64;

/** The short key at `at` in `bytes`, its low 32 bits given, as a number below 2^48 plus one. */
function keyOf(bytes: Uint8Array, at: number, low: number): number {
  return ((bytes[at]! << 8) | bytes[at + 1]!) * 2 ** 32 + low + 1;
}

/** The low 32 bits of the short key at `at` in `bytes`: they pick its slot. */
function lowOf(bytes: Uint8Array, at: number): number {
  return ((bytes[at + 2]! << 24) | (bytes[at + 3]! << 16) | (bytes[at + 4]! << 8) | bytes[at + 5]!) >>> 0;
}

/** Slots a table holding `rows` short keys has: a power of two (slots are picked by masking), at most half full. */
function slotsFor(rows: number): number {
  let slots = FIRST_SLOTS;
  while (slots * MAX_LOAD < rows) slots *= 2;
  return slots;
}

export class DigestHints {
  private keys: Float64Array;
  private leaves: Float64Array;
  /** Short keys held. */
  rows = 0;

  /**
   * `maxBytes`: what the table may take; a table that would need more is given up (see add).
   * Sized for `expectedRows` from the start: growing rehashes every row, a pause of tens of
   * milliseconds at a million.
   */
  constructor(
    private readonly maxBytes: number,
    expectedRows = 0,
  ) {
    let slots = slotsFor(expectedRows);
    while (slots > FIRST_SLOTS && slots * SLOT_BYTES > maxBytes) slots /= 2;
    this.keys = new Float64Array(slots);
    this.leaves = new Float64Array(slots);
  }

  /** Bytes the table holds. */
  get bytes(): number {
    return this.keys.length * SLOT_BYTES;
  }

  /** Whether `rows` short keys fit a budget of `maxBytes`. */
  static fit(maxBytes: number, rows: number): boolean {
    return slotsFor(rows) * SLOT_BYTES <= maxBytes;
  }

  /** Whether `rows` short keys fit this table's budget. */
  fits(rows: number): boolean {
    return DigestHints.fit(this.maxBytes, rows);
  }

  /**
   * Notes that `leaf` holds a value whose short key is at `at` in `bytes`; a short key keeps
   * its earliest leaf, as its first index row does (rows may come in any order). False when
   * the table would outgrow its budget: the caller then drops it.
   */
  add(bytes: Uint8Array, at: number, leaf: number): boolean {
    if (this.rows + 1 > this.keys.length * MAX_LOAD) {
      if (!this.fits(this.keys.length * 2 * MAX_LOAD)) return false;
      this.grow();
    }
    const low = lowOf(bytes, at);
    this.place(keyOf(bytes, at, low), low, leaf);
    return true;
  }

  /** The earliest leaf noted for the short key at `at` in `bytes`, if any. */
  leafOf(bytes: Uint8Array, at = 0): number | undefined {
    const low = lowOf(bytes, at);
    const key = keyOf(bytes, at, low);
    const mask = this.keys.length - 1;
    for (let slot = low & mask; ; slot = (slot + 1) & mask) {
      const k = this.keys[slot]!;
      if (k === key) return this.leaves[slot]!;
      if (k === 0) return undefined;
    }
  }

  private place(key: number, low: number, leaf: number): void {
    const mask = this.keys.length - 1;
    for (let slot = low & mask; ; slot = (slot + 1) & mask) {
      const k = this.keys[slot]!;
      if (k === 0) {
        this.keys[slot] = key;
        this.leaves[slot] = leaf;
        this.rows++;
        return;
      }
      if (k === key) {
        if (leaf < this.leaves[slot]!) this.leaves[slot] = leaf;
        return;
      }
    }
  }

  private grow(): void {
    const { keys, leaves } = this;
    this.keys = new Float64Array(keys.length * 2);
    this.leaves = new Float64Array(keys.length * 2);
    this.rows = 0;
    for (let slot = 0; slot < keys.length; slot++) {
      const key = keys[slot]!;
      if (key !== 0) this.place(key, (key - 1) % 2 ** 32, leaves[slot]!);
    }
  }
}
