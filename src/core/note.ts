// C2SP signed-note: Ed25519 signatures (type 0x01), tlog-cosignature cosignatures
// (cosignature/v1 Ed25519, type 0x04; subtree/v1 ML-DSA-44, type 0x06), key hashes, and
// verifier keys in vkey form (docs/design.md §1.3).
import { parseExtendedCheckpointBody } from './checkpoint-body.js';
import { bytesEqual, concatBytes, fromBase64, sha256, toBase64, toHex, u64be } from './hash.js';
import { NoteError } from './note-error.js';

export { NoteError } from './note-error.js';

// Ed25519 through Node's native binding (about 30× faster than pure JS: it is what bounds a
// witness's and the control plane's request rate), with @noble/ed25519 where Node's crypto
// is absent. Same keys, same deterministic signatures (RFC 8032), same test vectors.
// Found at run time, never imported (this module loads in a browser); only what is used is typed.
interface HostKey {
  export(options: { format: 'der'; type: 'spki' }): Uint8Array;
}
interface HostCrypto {
  createPublicKey(key: { key: { kty: 'OKP'; crv: 'Ed25519'; x: string }; format: 'jwk' } | HostKey): HostKey;
  createPrivateKey(key: { key: Uint8Array; format: 'der'; type: 'pkcs8' }): HostKey;
  verify(algorithm: null, data: Uint8Array, key: HostKey, signature: Uint8Array): boolean;
  sign(algorithm: null, data: Uint8Array, key: HostKey): Uint8Array;
}
const host = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
const nodeCrypto = host?.getBuiltinModule?.('node:crypto') as HostCrypto | undefined;

// @noble/ed25519 (and the SHA-512 it needs) is imported only where Node's crypto is absent,
// as src/core/hash.ts does @noble/hashes: Node never loads it (about 3 ms of a CLI start).
type NobleEd25519 = typeof import('@noble/ed25519');
const ed: NobleEd25519 | undefined = nodeCrypto ? undefined : await loadNobleEd25519();

async function loadNobleEd25519(): Promise<NobleEd25519> {
  const [noble, { sha512 }] = await Promise.all([import('@noble/ed25519'), import('@noble/hashes/sha2.js')]);
  noble.hashes.sha512 = sha512;
  return noble;
}

// ML-DSA-44 (@noble/post-quantum) costs a CLI run about 7 ms to load and is used only by a
// key or cosignature of type 0x06, so it is loaded at its first use: synchronously in Node
// (require of an ES module, Node ≥ 22.12), and in a browser by `loadMlDsa44()`, which this
// module starts at once there (the page fetches a checkpoint before it can verify one).
type MlDsa44 = typeof import('@noble/post-quantum/ml-dsa.js')['ml_dsa44'];
let mlDsa: MlDsa44 | undefined;
type NodeModule = { createRequire(from: string): (id: string) => { ml_dsa44: MlDsa44 } };
const nodeModule = host?.getBuiltinModule?.('node:module') as NodeModule | undefined;

/** Loads ML-DSA-44 ahead of its first use (needed only where Node's require is absent). */
export async function loadMlDsa44(): Promise<void> {
  mlDsa ??= (await import('@noble/post-quantum/ml-dsa.js')).ml_dsa44;
}
if (!nodeModule) void loadMlDsa44();

function mlDsa44(): MlDsa44 {
  if (mlDsa) return mlDsa;
  if (!nodeModule) throw new NoteError('ML-DSA-44 is still loading: await loadMlDsa44() first');
  mlDsa = nodeModule.createRequire(import.meta.url)('@noble/post-quantum/ml-dsa.js').ml_dsa44;
  return mlDsa;
}

// DER prefixes of a raw Ed25519 public key (SPKI) and seed (PKCS#8), for Node's KeyObjects.
const SPKI_ED25519 = Uint8Array.of(0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00);
const PKCS8_ED25519 = Uint8Array.of(
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x04,
  0x22,
  0x04,
  0x20,
);

export function ed25519Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  if (!nodeCrypto) return ed!.verify(signature, message, publicKey);
  try {
    const bytes = toBase64(publicKey);
    let key = verifyingKeys.get(bytes);
    if (!key) {
      // As a JWK, the raw key goes to OpenSSL as it is; as DER (SPKI) it would go through
      // OpenSSL's decoders, whose first use costs a CLI run about 0.5 ms more.
      const x = bytes.replace(/=+$/, '').replaceAll('+', '-').replaceAll('/', '_');
      key = nodeCrypto.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
      if (verifyingKeys.size >= MAX_VERIFYING_KEYS) verifyingKeys.clear();
      verifyingKeys.set(bytes, key);
    }
    return nodeCrypto.verify(null, message, key, signature);
  } catch {
    return false; // not a valid curve point
  }
}

/**
 * Node's key objects by the key's bytes in base64 (the JWK's base64url is made only for a
 * new key): making one costs about a fifth of a verify (~18 of ~110 µs), and a witness,
 * mirror or monitor verifies a few keys' signatures over and over. Keyed by content, never
 * by the array, so bytes changed under a caller's array can never verify against the key
 * they used to be. Cleared when full.
 */
const verifyingKeys = new Map<string, HostKey>();
const MAX_VERIFYING_KEYS = 1024;

export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;
/** tlog-cosignature's ML-DSA-44 type: a subtree/v1 cosignature, post-quantum. */
export const SIG_SUBTREE_MLDSA44 = 0x06;
/** Public key sizes by signature type (tlog-cosignature: 32-byte Ed25519, 1312-byte ML-DSA-44). */
const PUBLIC_KEY_BYTES: Record<NoteVerifier['type'], number> = {
  [SIG_ED25519]: 32,
  [SIG_COSIGNATURE_V1]: 32,
  [SIG_SUBTREE_MLDSA44]: 1312,
};
const MLDSA44_SIGNATURE_BYTES = 2420;
/** Notes larger than this are refused before parsing (signed-note suggests a small bound). */
export const MAX_NOTE_BYTES = 1 << 20;

const utf8 = new TextEncoder();
const EM_DASH_PREFIX = '\u2014 ';

/** A key name: non-empty, no whitespace, no '+'. */
export function isValidKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

/** First 4 bytes of SHA-256(name ‖ 0x0A ‖ type ‖ public key). */
export function keyHash(name: string, type: number, publicKey: Uint8Array): Uint8Array {
  return sha256(concatBytes(utf8.encode(`${name}\n`), new Uint8Array([type]), publicKey)).subarray(0, 4);
}

/** Signs note bodies: a local key, AWS KMS, … */
export interface NoteSigner {
  readonly name: string;
  readonly publicKey: Uint8Array;
  /** Ed25519 signature over `message`. */
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/** A verifier for one key: type 0x01 (log), 0x04 or 0x06 (witness cosignatures). */
export interface NoteVerifier {
  readonly name: string;
  readonly type: typeof SIG_ED25519 | typeof SIG_COSIGNATURE_V1 | typeof SIG_SUBTREE_MLDSA44;
  readonly publicKey: Uint8Array;
  readonly keyHash: Uint8Array;
}

export function makeVerifier(name: string, type: NoteVerifier['type'], publicKey: Uint8Array): NoteVerifier {
  if (!isValidKeyName(name)) throw new NoteError(`invalid key name ${JSON.stringify(name)}`);
  const size = PUBLIC_KEY_BYTES[type];
  if (publicKey.length !== size)
    throw new NoteError(`a type 0x${type.toString(16).padStart(2, '0')} public key is ${size} bytes`);
  return { name, type, publicKey, keyHash: keyHash(name, type, publicKey) };
}

/** `<name>+<8 hex key hash>+<base64(type ‖ public key)>`. */
export function formatVkey(v: NoteVerifier): string {
  return `${v.name}+${toHex(v.keyHash)}+${toBase64(concatBytes(new Uint8Array([v.type]), v.publicKey))}`;
}

export function parseVkey(vkey: string): NoteVerifier {
  // Split at the first two '+' only: names have none, but standard base64 may contain '+'.
  const text = vkey.trim();
  const a = text.indexOf('+');
  const b = a < 0 ? -1 : text.indexOf('+', a + 1);
  if (b < 0) throw new NoteError('a vkey has the form <name>+<hash>+<base64 key>');
  const [name, hashHex, keyB64] = [text.slice(0, a), text.slice(a + 1, b), text.slice(b + 1)];
  if (!/^[0-9a-f]{8}$/.test(hashHex)) throw new NoteError('vkey key hash must be 8 lowercase hex characters');
  const raw = fromBase64(keyB64);
  if (!raw || raw.length < 2) throw new NoteError('vkey key must be base64 of a type byte and a public key');
  const type = raw[0]!;
  if (!(type in PUBLIC_KEY_BYTES)) throw new NoteError(`unsupported vkey type 0x${type.toString(16)}`);
  if (raw.length !== 1 + PUBLIC_KEY_BYTES[type as NoteVerifier['type']]) {
    throw new NoteError(
      type === SIG_SUBTREE_MLDSA44
        ? 'vkey key must be base64 of a type byte and a 1312-byte ML-DSA-44 key'
        : 'vkey key must be base64 of a type byte and a 32-byte Ed25519 key',
    );
  }
  const v = makeVerifier(name, type as NoteVerifier['type'], raw.subarray(1));
  if (toHex(v.keyHash) !== hashHex) throw new NoteError('vkey key hash does not match its name and key');
  return v;
}

/** A cosigner's (witness's or mirror's) vkey: Ed25519 cosignature/v1 (type 0x04) or ML-DSA-44 subtree/v1 (type 0x06). */
export function parseCosignerVkey(vkey: string): NoteVerifier {
  const v = parseVkey(vkey);
  if (v.type !== SIG_COSIGNATURE_V1 && v.type !== SIG_SUBTREE_MLDSA44) {
    throw new NoteError('a witness key must be a cosignature vkey (type 0x04 Ed25519 or 0x06 ML-DSA-44)');
  }
  return v;
}

export function cosignatureMessage(body: string, timestamp: number): Uint8Array {
  return utf8.encode(`cosignature/v1\ntime ${timestamp}\n${body}`);
}

/**
 * The ML-DSA-44 signed message (tlog-cosignature "ML-DSA-44 signed message"): the label
 * "subtree/v1\n\0", the cosigner name and log origin each with a one-byte length, the
 * timestamp, and the subtree [start, end) with its root hash. A checkpoint is the subtree
 * [0, size); its extension lines are not covered.
 */
export function subtreeCosignatureMessage(m: {
  cosigner: string;
  timestamp: number;
  origin: string;
  start: number;
  end: number;
  hash: Uint8Array;
}): Uint8Array {
  const name = utf8.encode(m.cosigner);
  const origin = utf8.encode(m.origin);
  if (name.length < 1 || name.length > 255 || origin.length < 1 || origin.length > 255)
    throw new NoteError('cosigner name and origin must be 1..255 bytes');
  if (m.hash.length !== 32) throw new NoteError('a subtree hash is 32 bytes');
  if (m.start !== 0 && m.timestamp !== 0) throw new NoteError('a subtree that does not start at 0 has timestamp 0');
  return concatBytes(
    utf8.encode('subtree/v1\n\0'),
    Uint8Array.of(name.length),
    name,
    u64be(m.timestamp),
    Uint8Array.of(origin.length),
    origin,
    u64be(m.start),
    u64be(m.end),
    m.hash,
  );
}

/** The subtree/v1 message of a checkpoint note body: [0, size) with its root. */
function checkpointSubtreeMessage(cosigner: string, body: string, timestamp: number): Uint8Array | null {
  try {
    const c = parseExtendedCheckpointBody(body);
    return subtreeCosignatureMessage({ cosigner, timestamp, origin: c.origin, start: 0, end: c.size, hash: c.root });
  } catch {
    return null; // not a checkpoint: no ML-DSA cosignature can cover it
  }
}

/** An ML-DSA-44 (type 0x06) cosignature line over a checkpoint `body`, from a FIPS 204 secret key. */
export function cosignBodyMlDsa44(
  body: string,
  name: string,
  secretKey: Uint8Array,
  publicKey: Uint8Array,
  timestamp: number,
): string {
  const message = checkpointSubtreeMessage(name, body, timestamp);
  if (!message) throw new NoteError('an ML-DSA-44 cosignature covers a checkpoint body');
  const sig = mlDsa44().sign(message, secretKey);
  return signatureLine(name, keyHash(name, SIG_SUBTREE_MLDSA44, publicKey), concatBytes(u64be(timestamp), sig));
}

/** One signature line: `— <name> <base64(key hash ‖ signature)>`. */
export function signatureLine(name: string, hash: Uint8Array, sig: Uint8Array): string {
  return `${EM_DASH_PREFIX}${name} ${toBase64(concatBytes(hash, sig))}\n`;
}

/** Signs `body` with the log key (type 0x01) and returns the note line for it. */
export async function signBody(body: string, signer: NoteSigner): Promise<{ line: string; signature: Uint8Array }> {
  const sig = await signer.sign(utf8.encode(body));
  if (sig.length !== 64) throw new NoteError('signer returned a signature that is not 64 bytes');
  return { line: signatureLine(signer.name, keyHash(signer.name, SIG_ED25519, signer.publicKey), sig), signature: sig };
}

/** A witness cosignature (type 0x04) line over `body` at `timestamp` (unix seconds). */
export async function cosignBody(body: string, signer: NoteSigner, timestamp: number): Promise<string> {
  const sig = await signer.sign(cosignatureMessage(body, timestamp));
  return signatureLine(
    signer.name,
    keyHash(signer.name, SIG_COSIGNATURE_V1, signer.publicKey),
    concatBytes(u64be(timestamp), sig),
  );
}

/** A signature line as found in a note. */
export interface NoteSignature {
  readonly name: string;
  readonly keyHash: Uint8Array;
  /** The bytes after the key hash: 64 for type 0x01, 8 + 64 for type 0x04, 8 + 2420 for type 0x06. */
  readonly payload: Uint8Array;
  readonly line: string;
}

export interface VerifiedSignature {
  readonly verifier: NoteVerifier;
  readonly signature: Uint8Array;
  /** Cosignature time (unix seconds); absent for type 0x01. */
  readonly timestamp?: number;
}

export interface ParsedNote {
  readonly body: string;
  readonly signatures: NoteSignature[];
}

/** Splits a note into body and signature lines, refusing anything malformed. */
export function parseNote(text: string): ParsedNote {
  if (utf8.encode(text).length > MAX_NOTE_BYTES) throw new NoteError('note is too large');
  if (!text.endsWith('\n')) throw new NoteError('note does not end with a newline');
  const split = text.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('note has no blank line before its signatures');
  const body = text.slice(0, split + 1);
  if (/[\u0000-\u0009\u000b-\u001f\u007f]/u.test(text)) throw new NoteError('note contains control characters');
  const lines = text.slice(split + 2, -1).split('\n');
  const signatures = lines.map((line): NoteSignature => {
    if (!line.startsWith(EM_DASH_PREFIX)) throw new NoteError('malformed signature line (no em dash)');
    const rest = line.slice(EM_DASH_PREFIX.length);
    const sp = rest.indexOf(' ');
    const name = rest.slice(0, sp);
    const raw = sp > 0 ? fromBase64(rest.slice(sp + 1)) : null;
    if (!isValidKeyName(name) || !raw || raw.length < 5) throw new NoteError('malformed signature line');
    return { name, keyHash: raw.subarray(0, 4), payload: raw.subarray(4), line: `${line}\n` };
  });
  if (signatures.length === 0) throw new NoteError('note has no signatures');
  return { body, signatures };
}

/** Verifies one signature line against one verifier; null if it is not for that key or does not verify. */
export function verifySignature(body: string, sig: NoteSignature, v: NoteVerifier): VerifiedSignature | null {
  if (sig.name !== v.name || !bytesEqual(sig.keyHash, v.keyHash)) return null;
  if (v.type === SIG_ED25519) {
    if (sig.payload.length !== 64) return null;
    return ed25519Verify(sig.payload, utf8.encode(body), v.publicKey) ? { verifier: v, signature: sig.payload } : null;
  }
  // Both cosignature types are a timestamped_signature: u64 time, then the signature.
  const sigBytes = v.type === SIG_SUBTREE_MLDSA44 ? MLDSA44_SIGNATURE_BYTES : 64;
  if (sig.payload.length !== 8 + sigBytes) return null;
  const t = Number(new DataView(sig.payload.buffer, sig.payload.byteOffset, 8).getBigUint64(0));
  const s = sig.payload.subarray(8);
  if (!Number.isSafeInteger(t)) return null;
  if (v.type === SIG_COSIGNATURE_V1)
    return ed25519Verify(s, cosignatureMessage(body, t), v.publicKey)
      ? { verifier: v, signature: s, timestamp: t }
      : null;
  const message = checkpointSubtreeMessage(v.name, body, t);
  return message !== null && mlDsa44Verify(s, message, v.publicKey)
    ? { verifier: v, signature: s, timestamp: t }
    : null;
}

function mlDsa44Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  const impl = mlDsa44(); // outside the try: a verifier that cannot load is an error, not a bad signature
  try {
    return impl.verify(signature, message, publicKey);
  } catch {
    return false; // a malformed key or signature encoding
  }
}

/** The signature lines of a note sorted by what a verifier knows of them. */
export interface SortedSignatures {
  /** Lines by a known key that verify (at most one per key: the latest cosignature time). */
  readonly valid: VerifiedSignature[];
  /** Lines that name a known key (name and key hash) but do not verify. */
  readonly invalid: NoteSignature[];
  /** Lines by keys the verifier does not know: never counted, never a reason to refuse. */
  readonly unknown: NoteSignature[];
}

/**
 * Sorts each signature line of a note by the verifiers that know it. signed-note: "If a
 * signature from a known key fails to verify, clients SHOULD reject the whole note" — every
 * caller that opens or checks a note reads `invalid` from here (one home for the rule).
 */
export function sortSignatures(
  body: string,
  signatures: readonly NoteSignature[],
  known: readonly NoteVerifier[],
): SortedSignatures {
  const valid = new Map<NoteVerifier, VerifiedSignature>();
  const invalid: NoteSignature[] = [];
  const unknown: NoteSignature[] = [];
  for (const sig of signatures) {
    const candidates = known.filter((v) => v.name === sig.name && bytesEqual(v.keyHash, sig.keyHash));
    if (candidates.length === 0) {
      unknown.push(sig);
      continue;
    }
    const ok = candidates.map((v) => verifySignature(body, sig, v)).find((r) => r !== null);
    if (!ok) {
      invalid.push(sig);
      continue;
    }
    const before = valid.get(ok.verifier);
    if (!before || (ok.timestamp ?? 0) > (before.timestamp ?? 0)) valid.set(ok.verifier, ok);
  }
  return { valid: [...valid.values()], invalid, unknown };
}

/**
 * Opens a note: the signature by `logKey` (type 0x01) must be present and valid; each
 * witness key's cosignature is checked if present. A line that names a known key but
 * fails to verify is an error (never silently skipped).
 */
export function openNote(
  text: string,
  logKey: NoteVerifier,
  witnesses: readonly NoteVerifier[] = [],
): { body: string; log: VerifiedSignature; cosignatures: VerifiedSignature[]; unknown: NoteSignature[] } {
  const note = parseNote(text);
  const sorted = sortSignatures(note.body, note.signatures, [logKey, ...witnesses]);
  const bad = sorted.invalid[0];
  if (bad) throw new NoteError(`invalid signature by ${bad.name}`);
  const log = sorted.valid.find((v) => v.verifier === logKey);
  if (!log) throw new NoteError(`note has no signature by the log key ${logKey.name}`);
  return {
    body: note.body,
    log,
    cosignatures: sorted.valid.filter((v) => v.verifier !== logKey),
    unknown: sorted.unknown,
  };
}

/** A signer over an Ed25519 private seed held in memory. */
export class SeedSigner implements NoteSigner {
  readonly publicKey: Uint8Array;
  private readonly nativeKey: HostKey | undefined;

  constructor(
    readonly name: string,
    private readonly seed: Uint8Array,
  ) {
    if (seed.length !== 32) throw new NoteError('an Ed25519 seed is 32 bytes');
    if (!isValidKeyName(name)) throw new NoteError(`invalid key name ${JSON.stringify(name)}`);
    this.nativeKey = nodeCrypto?.createPrivateKey({
      key: concatBytes(PKCS8_ED25519, seed),
      format: 'der',
      type: 'pkcs8',
    });
    // The raw key is the end of its SPKI form (the DER prefix above, then the 32 bytes).
    this.publicKey =
      this.nativeKey && nodeCrypto
        ? new Uint8Array(nodeCrypto.createPublicKey(this.nativeKey).export({ format: 'der', type: 'spki' })).slice(
            SPKI_ED25519.length,
          )
        : ed!.getPublicKey(seed);
  }

  async sign(message: Uint8Array): Promise<Uint8Array> {
    return this.nativeKey && nodeCrypto
      ? new Uint8Array(nodeCrypto.sign(null, message, this.nativeKey))
      : ed!.sign(message, this.seed);
  }

  /** Keeps the seed out of logs and JSON dumps. */
  toJSON(): object {
    return { name: this.name, publicKey: toBase64(this.publicKey) };
  }
}

/** keyId = lowercase hex SHA-256 of the raw 32-byte public key (docs/design.md §1.4). */
export function keyIdOf(publicKey: Uint8Array): string {
  return toHex(sha256(publicKey));
}
