// Row names shared by the LMDB and DynamoDB indexes for keys that are not already short.
import { sha256, sha256HexOfText } from '../core/hash.js';

/** A label's row name: 128 bits of its SHA-256 (a label may be 1,024 bytes; a key must stay small). */
export function labelKey(label: string): string {
  return sha256HexOfText(label).slice(0, 32);
}

/** Bytes of a short key: 48 bits, so at a billion rows a lookup meets another value's row once in ~280,000. */
export const SHORT_KEY_BYTES = 6;

/** The hash input of shortKey for values up to a label's 1,024 bytes (and a salt). */
const scratch = Buffer.allocUnsafeSlow(1024 + 64);

/**
 * The short key of a value: the first SHORT_KEY_BYTES of SHA-256(salt ‖ value), written into
 * `into` at `at`. The salt is the index's own (random when it is created): a digest is
 * chosen by whoever submits it, and without the salt nobody can aim rows at another's key.
 */
export function shortKey(salt: Uint8Array, value: string, into: Buffer, at = 0): void {
  // salt ‖ value in one buffer (reused: hashing is synchronous), hashed once: a Hash object
  // and its updates, or a digest asked for as a Buffer, cost a lookup 2–3 times as much.
  const size = salt.length + Buffer.byteLength(value);
  const input = size <= scratch.length ? scratch : Buffer.allocUnsafe(size);
  input.set(salt, 0);
  input.write(value, salt.length);
  into.set(sha256(input.subarray(0, size)).subarray(0, SHORT_KEY_BYTES), at);
}

/** The identity's tag kept beside its digest's row (1–255; 0 marks an entry that is no anchor). */
export function anchorTag(identity: string): number {
  return 1 + (Number.parseInt(identity.slice(0, 2), 16) % 255);
}
