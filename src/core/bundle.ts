// Stele's entry and record bundles (docs/design.md §1.2): the tlog-tiles data tiles hold one
// bundle per 256 entries, each item framed by a 2-byte big-endian length.
import { TILE_WIDTH, TileFormatError } from './tiles.js';

/** Entry/record bundle framing: per item a 2-byte big-endian length, then the bytes. */
export function encodeBundle(items: readonly Uint8Array[]): Uint8Array {
  return frame(items, []);
}

/** Items [from, to) of a packed buffer: item j is bytes[j === 0 ? 0 : ends[j - 1], ends[j]). */
export interface Packed {
  readonly bytes: Uint8Array;
  readonly ends: Uint32Array;
  readonly from: number;
  readonly to: number;
}

/** Item j of a packed piece (a view of its bytes). */
export const packedItem = (p: Packed, j: number): Uint8Array =>
  p.bytes.subarray(j === 0 ? 0 : p.ends[j - 1]!, p.ends[j]!);

/** Items (canonical entries) packed back to back as one piece. */
export function packCanonicals(canonicals: readonly Uint8Array[]): Packed {
  const ends = new Uint32Array(canonicals.length);
  let at = 0;
  canonicals.forEach((c, i) => (ends[i] = at += c.length));
  const bytes = new Uint8Array(at);
  canonicals.forEach((c, i) => bytes.set(c, i === 0 ? 0 : ends[i - 1]!));
  return { bytes, ends, from: 0, to: canonicals.length };
}

/** Bytes of the bundle framing of `old` then the pieces' items. */
export function framedSize(old: readonly Uint8Array[], pieces: readonly Packed[]): number {
  let size = 0;
  for (const o of old) size += 2 + o.length;
  for (const p of pieces) {
    if (p.to > p.from) size += 2 * (p.to - p.from) + p.ends[p.to - 1]! - (p.from === 0 ? 0 : p.ends[p.from - 1]!);
  }
  return size;
}

/**
 * Bundle framing (a 2-byte big-endian length, then the bytes) of `old`
 * then every piece's items, written at the start of `into` (a new buffer if not given).
 */
export function frame(old: readonly Uint8Array[], pieces: readonly Packed[], into?: Uint8Array): Uint8Array {
  const size = framedSize(old, pieces);
  const bytes = into ? into.subarray(0, size) : new Uint8Array(size);
  let at = 0;
  const put = (src: Uint8Array, start: number, end: number) => {
    const len = end - start;
    if (len > 0xffff) throw new RangeError(`bundle item of ${len} bytes exceeds 65,535`);
    bytes[at] = len >>> 8;
    bytes[at + 1] = len & 0xff;
    bytes.set(src.subarray(start, end), at + 2);
    at += 2 + len;
  };
  for (const o of old) put(o, 0, o.length);
  for (const p of pieces) for (let j = p.from; j < p.to; j++) put(p.bytes, j === 0 ? 0 : p.ends[j - 1]!, p.ends[j]!);
  return bytes;
}

/** The bytes of the first `count` items of an encoded bundle (each item is a 2-byte length and its bytes). */
export function bundlePrefix(data: Uint8Array, count: number): Uint8Array {
  let at = 0;
  for (let i = 0; i < count && at + 2 <= data.length; i++) at += 2 + ((data[at]! << 8) | data[at + 1]!);
  return data.subarray(0, Math.min(at, data.length));
}

/**
 * A decoded bundle kept compact: its bytes and the end offset of each item, so a cache
 * holds one buffer and one small table per bundle instead of an object per item.
 */
export class Bundle {
  /**
   * Per item, a bit set once a reader has checked it (see checked/markChecked). Bits, not a
   * byte per item: 32 bytes stay in the JS heap, where 256 would take a buffer of their own,
   * one more for every collection to sweep (a cache of a million entries' bundles holds 8,000).
   */
  private readonly checks: Uint32Array;

  private constructor(
    readonly data: Uint8Array,
    /** ends[i] is the offset just past item i; item i starts 2 bytes after ends[i - 1] (or 0). */
    private readonly ends: Uint32Array,
  ) {
    this.checks = new Uint32Array(Math.ceil(ends.length / 32));
  }

  /** Parses the framing; throws TileFormatError if it is broken or holds more than `maxItems`. */
  static decode(data: Uint8Array, path = 'bundle', maxItems = TILE_WIDTH): Bundle {
    const ends: number[] = [];
    let off = 0;
    while (off < data.length) {
      if (off + 2 > data.length) throw new TileFormatError(`${path}: truncated length at byte ${off}`);
      const end = off + 2 + ((data[off]! << 8) | data[off + 1]!);
      if (end > data.length) throw new TileFormatError(`${path}: item at byte ${off} runs past the end`);
      ends.push(end);
      off = end;
    }
    if (ends.length > maxItems) throw new TileFormatError(`${path}: ${ends.length} items, more than ${maxItems}`);
    return new Bundle(data, Uint32Array.from(ends));
  }

  get length(): number {
    return this.ends.length;
  }

  /** Item i (a view of the bundle's bytes). */
  item(i: number): Uint8Array {
    if (!Number.isInteger(i) || i < 0 || i >= this.ends.length) throw new RangeError(`bundle has no item ${i}`);
    const end = this.ends[i]!;
    const start = i === 0 ? 2 : this.ends[i - 1]! + 2;
    return this.data.subarray(start, end);
  }

  /** True once item i has passed its reader's check; the bytes are immutable, so it is done once. */
  checked(i: number): boolean {
    return ((this.checks[i >>> 5]! >>> (i & 31)) & 1) === 1;
  }

  markChecked(i: number): void {
    this.checks[i >>> 5] = this.checks[i >>> 5]! | (1 << (i & 31));
  }

  /** The first `count` items as separate views. */
  items(count = this.length): Uint8Array[] {
    return Array.from({ length: Math.min(count, this.length) }, (_, i) => this.item(i));
  }

  /** Bytes this bundle keeps alive: its buffer and its offset table. */
  get retainedBytes(): number {
    return this.data.buffer.byteLength + this.ends.byteLength + this.checks.byteLength;
  }
}

export function decodeBundle(data: Uint8Array, path = 'bundle', maxItems = TILE_WIDTH): Uint8Array[] {
  return Bundle.decode(data, path, maxItems).items();
}
