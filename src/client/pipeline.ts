// Bounded-concurrency helpers: loads run ahead in parallel (up to a window) while results are
// consumed strictly in order, so a verifier can stream a log bundle by bundle in constant memory.
import { hash as oneShot } from 'node:crypto';

/**
 * Calls `load(i)` for i in [from, to) with at most `window` loads in flight and
 * `consume(i, value)` in increasing i. Stops at the first error (from either side).
 */
export async function orderedPipeline<T>(
  from: number,
  to: number,
  window: number,
  load: (i: number) => Promise<T>,
  consume: (i: number, value: T) => void | Promise<void>,
): Promise<void> {
  const queue: Promise<T>[] = [];
  let next = from;
  const start = () => {
    const p = load(next++);
    p.catch(() => undefined); // awaited in order below; avoids unhandled-rejection noise
    queue.push(p);
  };
  while (next < to && queue.length < window) start();
  for (let i = from; i < to; i++) {
    const value = await queue.shift()!;
    if (next < to) start();
    await consume(i, value);
  }
}

/** Runs `fn` over [from, to) with at most `concurrency` calls at once (order not kept). */
export async function parallelRange(from: number, to: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = from;
  let failed: unknown;
  const worker = async () => {
    while (next < to && failed === undefined) {
      const i = next++;
      try {
        await fn(i);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, to - from)) }, worker));
  if (failed !== undefined) throw failed;
}

// ---- fast hashing (node:crypto one-shot; same results as src/core/hash.ts and src/core/entry.ts) ----

const DOMAIN = Buffer.from('stele/entry/v1\n');
const NODE = Buffer.alloc(65);
NODE[0] = 0x01;
const LEAF = Buffer.alloc(33);

export function sha256Fast(data: Uint8Array): Buffer {
  return oneShot('sha256', data, 'buffer');
}

/** entry_hash = SHA-256(domain ‖ u64be(seq) ‖ canonical ‖ prior). */
export function entryHashFast(seq: number, canonical: Uint8Array, prior: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(DOMAIN.length + 8 + canonical.length + 32);
  DOMAIN.copy(buf, 0);
  buf.writeBigUInt64BE(BigInt(seq), DOMAIN.length);
  buf.set(canonical, DOMAIN.length + 8);
  buf.set(prior, DOMAIN.length + 8 + canonical.length);
  return oneShot('sha256', buf, 'buffer');
}

/** SHA-256(0x00 ‖ input) for a 32-byte input. */
export function leafHashFast(input: Uint8Array): Buffer {
  LEAF.set(input, 1);
  return oneShot('sha256', LEAF, 'buffer');
}

/** SHA-256(0x01 ‖ left ‖ right). */
export function nodeHashFast(left: Uint8Array, right: Uint8Array): Buffer {
  NODE.set(left, 1);
  NODE.set(right, 33);
  return oneShot('sha256', NODE, 'buffer');
}

/** Root of a full tile (256 hashes → 1), i.e. the hash one tile level up. */
export function tileRootFast(row: Uint8Array): Buffer {
  if (row.length !== 256 * 32) throw new RangeError('tileRootFast needs a full tile');
  let cur = Buffer.from(row.buffer, row.byteOffset, row.byteLength);
  for (let n = 128; n >= 1; n /= 2) {
    const next = Buffer.allocUnsafe(n * 32);
    for (let j = 0; j < n; j++) nodeHashFast(cur.subarray(64 * j, 64 * j + 32), cur.subarray(64 * j + 32, 64 * j + 64)).copy(next, 32 * j);
    cur = next;
  }
  return cur;
}
