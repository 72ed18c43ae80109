// Answers of the hot reads kept for their repeats: a verifier polling its entry until it is
// witnessed, many clients proving consistency from the same checkpoint to the latest. A
// repeat is sent the bytes computed the first time, skipping the tiles and the JSON writer.
import { LRUCache } from 'lru-cache';

/**
 * Values by key, each valid for one generation (an object whose identity changes when the
 * answer would: for an entry, the JSON of the checkpoint it is proved against). Bounded by
 * count: an answer is a few KiB. Only a key asked for before is kept: keeping every answer
 * of a stream that never repeats (a crawler, random proofs) would cost each of them a copy
 * that outlives the young generation, which the collector pays for more than the work saved.
 */
export class AnswerCache<K extends number | string, V extends { readonly body: Buffer }> {
  private readonly lru: LRUCache<K, { readonly generation: object; readonly value: V }>;
  /**
   * Sightings: per slot, the key last answered there, its slot a hash of the key (about
   * `4 × max` slots). A fixed table, not sets that grow and are dropped: a stream that never
   * repeats (a crawler, random proofs) allocates nothing here, where the rebuilt sets were
   * garbage of the old generation and their string keys rehashed. A key crowded out of its
   * slot by another just waits for one more sighting; one sharing a slot and equal is itself.
   */
  private readonly sightings: (K | undefined)[];
  private readonly slotMask: number;

  constructor(
    max: number,
    /** A value in memory of its own, to keep: by default its body copied (see ownedBody). */
    private readonly keep: (value: V) => V = (value) => ({ ...value, body: ownedBody(value.body) }),
  ) {
    this.lru = new LRUCache({ max });
    const slots = 2 ** Math.ceil(Math.log2(4 * max));
    this.sightings = new Array<K | undefined>(slots).fill(undefined);
    this.slotMask = slots - 1;
  }

  get(key: K, generation: object): V | undefined {
    const hit = this.lru.get(key);
    return hit?.generation === generation ? hit.value : undefined;
  }

  /** Keeps `value` for `key` in `generation` if `key` was asked for before; returns it. */
  answer(key: K, generation: object, value: V): V {
    if (!this.seenBefore(key) && !this.lru.has(key)) return value;
    this.lru.set(key, { generation, value: this.keep(value) });
    return value;
  }

  /** Whether `key` was answered recently; remembers it. */
  private seenBefore(key: K): boolean {
    const slot = slotOf(key) & this.slotMask;
    if (this.sightings[slot] === key) return true;
    this.sightings[slot] = key;
    return false;
  }
}

/** A 32-bit hash of a key: a number's two 32-bit halves, or a string's UTF-16 units (FNV-1a), mixed. */
function slotOf(key: number | string): number {
  let h: number;
  if (typeof key === 'number') {
    h = Math.imul(key | 0, 0x9e3779b1) ^ Math.imul((key / 0x1_0000_0000) | 0, 0x85ebca6b);
  } else {
    h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  }
  return (h ^ (h >>> 16)) >>> 0;
}

/** The generation of an answer that never changes (a consistency proof between two sizes of one log). */
export const FOREVER: object = Object.freeze({});

/**
 * `body` in a buffer of its own: a body from Buffer.allocUnsafe may share an 8 KiB pool slab,
 * which a cached slice would keep alive whole.
 */
export function ownedBody(body: Buffer): Buffer {
  const own = Buffer.allocUnsafeSlow(body.length);
  body.copy(own);
  return own;
}
