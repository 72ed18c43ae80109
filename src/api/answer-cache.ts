// Answers of the hot reads kept for their repeats: a verifier polling its entry until it is
// witnessed, many clients proving consistency from the same checkpoint to the latest. A
// repeat is sent the bytes computed the first time, skipping the tiles and the JSON writer.
import { LRUCache } from 'lru-cache';

/**
 * Values by key, each valid for one generation (an object whose identity changes when the
 * answer would: for an entry, the JSON of the checkpoint it is proved against). Bounded by
 * count: an answer is a few KiB.
 */
export class AnswerCache<K extends {}, V extends {}> {
  private readonly lru: LRUCache<K, { readonly generation: object; readonly value: V }>;

  constructor(max: number) {
    this.lru = new LRUCache({ max });
  }

  get(key: K, generation: object): V | undefined {
    const hit = this.lru.get(key);
    return hit?.generation === generation ? hit.value : undefined;
  }

  /** Keeps `value` for `key` in `generation`; returns it. */
  set(key: K, generation: object, value: V): V {
    this.lru.set(key, { generation, value });
    return value;
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
