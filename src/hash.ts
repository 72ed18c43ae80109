// SHA-256 and the RFC 6962 hashing rules (DESIGN.md §1.1).
//
// On Node the digests come from its native OpenSSL binding: the sequencer's hot path is
// three small hashes per entry, where @noble/hashes' per-call setup costs ~3× the work.
// In the browser (the explorer bundles this module) @noble/hashes does it. Both paths are
// checked against the same Go-computed vectors (test/merkle.test.ts, test/explorer).
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

export const HASH_SIZE = 32;

type NodeCrypto = typeof import('node:crypto');
const nodeCrypto = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process?.getBuiltinModule?.(
  'node:crypto',
) as NodeCrypto | undefined;
const nativeHash = typeof nodeCrypto?.hash === 'function' ? nodeCrypto.hash : undefined;

/** SHA-256 of the concatenation of `parts`. */
export const sha256Parts: (...parts: Uint8Array[]) => Uint8Array = nativeHash
  ? (...parts) => nativeHash('sha256', parts.length === 1 ? parts[0]! : Buffer.concat(parts), 'buffer')
  : (...parts) => {
      const h = nobleSha256.create();
      for (const p of parts) h.update(p);
      return h.digest();
    };

export function sha256(data: Uint8Array): Uint8Array {
  return sha256Parts(data);
}

const LEAF_PREFIX = new Uint8Array([0x00]);
const NODE_PREFIX = new Uint8Array([0x01]);

/** leaf = SHA-256(0x00 ‖ leaf input). */
export function leafHash(input: Uint8Array): Uint8Array {
  return sha256Parts(LEAF_PREFIX, input);
}

/** parent = SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256Parts(NODE_PREFIX, left, right);
}

/** Root of the empty tree: SHA-256 of the empty string (RFC 6962 §2.1). */
export const EMPTY_ROOT = sha256(new Uint8Array(0));

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** True for a 64-character hex SHA-256 (either case). */
export function isHash64(s: unknown): s is string {
  return typeof s === 'string' && HEX64.test(s);
}

/** Parses 64 hex characters into 32 bytes; throws on anything else. */
export function hashFromHex(s: string): Uint8Array {
  if (!isHash64(s)) throw new Error('expected 64 hexadecimal characters');
  return new Uint8Array(Buffer.from(s, 'hex'));
}

export function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
