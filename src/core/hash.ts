// SHA-256 and the RFC 6962 hashing rules (docs/design.md §1.1).
//
// On Node the digests come from its native OpenSSL binding: the sequencer's hot path is
// three small hashes per entry, where @noble/hashes' per-call setup costs ~3× the work.
// In the browser (the explorer bundles this module) @noble/hashes does it. Both paths are
// checked against the same Go-computed vectors (test/core/merkle.test.ts; without
// node:crypto, test/core/noble-fallback.test.ts, test/explorer, test/packages/verify.test.ts).

export const HASH_SIZE = 32;

// Found at run time, never imported: this module must load in a browser, where there is no
// `process`. Only the one function used is typed, so nothing here depends on Node's types.
interface HostCrypto {
  hash?(algorithm: 'sha256', data: Uint8Array, outputEncoding: 'latin1'): string;
  hash?(algorithm: 'sha256', text: string, outputEncoding: 'hex'): string;
}
const hostCrypto = (
  globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
).process?.getBuiltinModule?.('node:crypto') as HostCrypto | undefined;
const nativeHash = typeof hostCrypto?.hash === 'function' ? hostCrypto.hash.bind(hostCrypto) : undefined;

// @noble/hashes is imported only where there is no native hash: Node never loads it (its
// SHA-512 constants alone cost a CLI start about 2 ms). A top-level await, so the module's
// exports are ready when it has loaded, as with a static import; bundlers put the library in
// a chunk of its own, fetched by a browser only.
type NobleSha256 = typeof import('@noble/hashes/sha2.js')['sha256'];
const nobleSha256: NobleSha256 | undefined = nativeHash ? undefined : (await import('@noble/hashes/sha2.js')).sha256;

/**
 * The native digest as a string of byte values, copied into a new 32-byte array: a digest
 * asked for as a Buffer costs about three times as much (its memory is allocated outside
 * the JS heap and tracked by the collector), and proofs at arbitrary tree sizes fold ~20
 * node hashes per request.
 */
function nativeSha256(data: Uint8Array): Uint8Array {
  const digest = nativeHash!('sha256', data, 'latin1');
  const out = new Uint8Array(HASH_SIZE);
  for (let i = 0; i < HASH_SIZE; i++) out[i] = digest.charCodeAt(i);
  return out;
}

/** SHA-256 of `data`. */
export const sha256: (data: Uint8Array) => Uint8Array = nativeHash ? nativeSha256 : (data) => nobleSha256!(data);

/**
 * The first `count` bytes of SHA-256(data), written into `out` at `at`: a lookup key needs a
 * few bytes of a digest, and on Node they are read from the native digest with no array made.
 */
export function sha256PrefixInto(data: Uint8Array, count: number, out: Uint8Array, at: number): void {
  if (!nativeHash) {
    out.set(nobleSha256!(data).subarray(0, count), at);
    return;
  }
  const digest = nativeHash('sha256', data, 'latin1');
  for (let i = 0; i < count; i++) out[at + i] = digest.charCodeAt(i);
}

/** SHA-256 of a string's UTF-8 bytes, in lowercase hex (on Node without encoding it first). */
export const sha256HexOfText: (text: string) => string = nativeHash
  ? (text) => nativeHash('sha256', text, 'hex')
  : (text) => toHex(nobleSha256!(new TextEncoder().encode(text)));

/** SHA-256 of the concatenation of `parts`. */
export function sha256Parts(...parts: Uint8Array[]): Uint8Array {
  if (nativeHash) return nativeSha256(parts.length === 1 ? parts[0]! : concatBytes(...parts));
  const h = nobleSha256!.create();
  for (const p of parts) h.update(p);
  return h.digest();
}

// Hashing is synchronous, so one scratch buffer per rule assembles each input without an
// allocation: leaf and node hashes are the hot path of the sequencer and of log audits.
let leafInput = new Uint8Array(1 + HASH_SIZE); // [0] stays 0x00
const nodeInput = Uint8Array.of(0x01, ...new Uint8Array(2 * HASH_SIZE));

/** leaf = SHA-256(0x00 ‖ leaf input). */
export function leafHash(input: Uint8Array): Uint8Array {
  if (leafInput.length !== 1 + input.length) leafInput = new Uint8Array(1 + input.length);
  leafInput.set(input, 1);
  return sha256(leafInput);
}

/** parent = SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  if (left.length !== HASH_SIZE || right.length !== HASH_SIZE)
    return sha256Parts(nodeInput.subarray(0, 1), left, right);
  nodeInput.set(left, 1);
  nodeInput.set(right, 1 + HASH_SIZE);
  return sha256(nodeInput);
}

/** Root of the empty tree: SHA-256 of the empty string (RFC 6962 §2.1). */
export const EMPTY_ROOT = sha256(new Uint8Array(0));

// Hex and base64 through Node's Buffer where there is one, plain code in the browser (the
// explorer bundles this module and src/core/note.ts, src/core/checkpoint.ts, which use these).
interface HostBytes {
  from(data: ArrayBufferLike, byteOffset: number, length: number): { toString(encoding: 'hex' | 'base64'): string };
  from(text: string, encoding: 'hex' | 'base64'): Uint8Array;
}
const NodeBuffer = (globalThis as { Buffer?: HostBytes }).Buffer;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function toHex(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]!];
  return s;
}

/** Parses an even-length hex string (either case); null if it is not one. */
export function fromHex(hex: string): Uint8Array | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  return hexBytes(hex);
}

/** Bytes of hex already checked to be even-length hex digits. */
function hexBytes(hex: string): Uint8Array {
  if (NodeBuffer) return new Uint8Array(NodeBuffer.from(hex, 'hex'));
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** True for a 64-character hex SHA-256 (either case). */
export function isHash64(s: unknown): s is string {
  return typeof s === 'string' && HEX64.test(s);
}

/** Parses 64 hex characters into 32 bytes; throws on anything else. */
export function hashFromHex(s: string): Uint8Array {
  if (!isHash64(s)) throw new Error('expected 64 hexadecimal characters');
  return hexBytes(s);
}

export function toBase64(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Strict standard base64 (padded, canonical); null on anything else. */
export function fromBase64(s: string): Uint8Array | null {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  let out: Uint8Array;
  if (NodeBuffer) out = new Uint8Array(NodeBuffer.from(s, 'base64'));
  else {
    let bin: string;
    try {
      bin = atob(s);
    } catch {
      return null;
    }
    out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  }
  return toBase64(out) === s ? out : null;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** `n` as an unsigned 64-bit big-endian integer (exact up to 2^53), as notes and proofs encode it. */
export function u64be(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
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
