// Row names shared by the LMDB and DynamoDB indexes for keys that are not already short.
import { sha256HexOfText, sha256PrefixInto } from '../core/hash.js';

/** A label's row name: 128 bits of its SHA-256 (a label may be 1,024 bytes; a key must stay small). */
export function labelKey(label: string): string {
  return sha256HexOfText(label).slice(0, 32);
}

/** Bytes of a short key: 48 bits, so at a billion rows a lookup meets another value's row once in ~280,000. */
export const SHORT_KEY_BYTES = 6;

/** The hash input of shortKey for values up to a label's 1,024 bytes (and a salt). */
const scratch = Buffer.allocUnsafeSlow(1024 + 64);
/** The last view of `scratch` made (lookups of one kind of value all hash inputs of one size). */
let scratchView: Uint8Array = scratch.subarray(0, 0);

/** salt ‖ value in one buffer, `scratch` when it fits (reused: hashing is synchronous). */
function hashInput(salt: Uint8Array, value: string): Uint8Array {
  const room = scratch.length - salt.length;
  // Up to 3 bytes per UTF-16 unit: counting the bytes is needed only for a long value.
  const fits = value.length * 3 <= room || Buffer.byteLength(value) <= room;
  const input = fits ? scratch : Buffer.allocUnsafe(salt.length + Buffer.byteLength(value));
  input.set(salt, 0);
  const size = salt.length + input.write(value, salt.length);
  if (input !== scratch) return input;
  if (scratchView.length !== size) scratchView = scratch.subarray(0, size);
  return scratchView;
}

/**
 * The short key of a value: the first SHORT_KEY_BYTES of SHA-256(salt ‖ value), written into
 * `into` at `at`. The salt is the index's own (random when it is created): a digest is
 * chosen by whoever submits it, and without the salt nobody can aim rows at another's key.
 * Hashed once, with no copy: a Hash object and its updates, or a digest asked for as a
 * Buffer, cost a lookup 2–3 times as much.
 */
export function shortKey(salt: Uint8Array, value: string, into: Uint8Array, at = 0): void {
  sha256PrefixInto(hashInput(salt, value), SHORT_KEY_BYTES, into, at);
}

/** The identity's tag kept beside its digest's row (1–255; 0 marks an entry that is no anchor). */
export function anchorTag(identity: string): number {
  return 1 + (Number.parseInt(identity.slice(0, 2), 16) % 255);
}
