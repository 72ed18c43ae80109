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
  /** Keys answered once and not kept (yet). */
  private readonly seen: LRUCache<K, true>;

  constructor(max: number) {
    this.lru = new LRUCache({ max });
    this.seen = new LRUCache({ max: 4 * max });
  }

  get(key: K, generation: object): V | undefined {
    const hit = this.lru.get(key);
    return hit?.generation === generation ? hit.value : undefined;
  }

  /** Keeps `value` for `key` in `generation` if `key` was asked for before; returns it. */
  answer(key: K, generation: object, value: V): V {
    if (!this.seen.has(key) && !this.lru.has(key)) {
      this.seen.set(key, true);
      return value;
    }
    this.lru.set(key, { generation, value: { ...value, body: ownedBody(value.body) } });
    return value;
  }
}

/** The generation of an answer that never changes (a consistency proof between two sizes of one log). */
export const FOREVER: object = Object.freeze({});

/**
 * `body` in a buffer of its own: a body from Buffer.allocUnsafe may share an 8 KiB pool slab,
 * which a cached slice would keep alive whole.
 */
function ownedBody(body: Buffer): Buffer {
  const own = Buffer.allocUnsafeSlow(body.length);
  body.copy(own);
  return own;
}
