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
export class AnswerCache<K extends {}, V extends { readonly body: Buffer }> {
  private readonly lru: LRUCache<K, { readonly generation: object; readonly value: V }>;
  /**
   * Keys answered recently, in two generations of up to `4 × max` each: the older is dropped
   * when the newer fills, which is all the recency a second sighting needs, at the cost of
   * two set lookups (an LRU's bookkeeping would cost every answer of a non-repeating stream).
   */
  private recent = new Set<K>();
  private older = new Set<K>();

  constructor(
    private readonly max: number,
    /** A value in memory of its own, to keep: by default its body copied (see ownedBody). */
    private readonly keep: (value: V) => V = (value) => ({ ...value, body: ownedBody(value.body) }),
  ) {
    this.lru = new LRUCache({ max });
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
    if (this.recent.has(key) || this.older.has(key)) return true;
    if (this.recent.size >= 4 * this.max) {
      this.older = this.recent;
      this.recent = new Set();
    }
    this.recent.add(key);
    return false;
  }
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
