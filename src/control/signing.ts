// The control plane's own Ed25519 key: it signs key-epoch records and audit events (never
// checkpoints: the log key stays the log's). The key file is the same mode-0600
// PRIVATE+KEY form as the log's (src/signer.ts); signing goes through node:crypto, which
// is several times faster than the pure-JS signer and matters at one signature per request.
// Audit events are signed in groups on a worker thread (signCanonicals; src/control/signing-thread.ts).
//
// A signed object is JSON: its signature is `ed25519:<base64>` over
//   <domain> ‖ 0x0A ‖ RFC 8785 canonical JSON of the object without `signature`
// and the object names the key by `key_id` (hex SHA-256 of the raw public key, as for the log).
import { type KeyObject, createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import canonicalizeCjs from 'canonicalize';
import { keyIdOf } from '../core/note.js';
import { loadOrCreateKey } from '../signer.js';
import { SigningThread } from './signing-thread.js';

const canonicalize = canonicalizeCjs as unknown as (value: unknown) => string | undefined;

export const EPOCH_DOMAIN = 'stele/control/key-epoch/v1';
export const AUDIT_DOMAIN = 'stele/control/audit-event/v1';

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** RFC 8785 JSON of `value`. */
export function canonicalJson(value: unknown): string {
  const s = canonicalize(value);
  if (s === undefined) throw new TypeError('value cannot be canonicalised');
  return s;
}

/** Hex SHA-256 of the canonical JSON of `value`: the digest anchored for a record. */
export function recordDigest(value: unknown): string {
  return jsonDigest(canonicalJson(value));
}

/** Hex SHA-256 of canonical JSON already serialised (so a record is canonicalised once). */
export function jsonDigest(canonical: string): string {
  return createHash('sha256').update(canonical).digest('hex');
}

/** The RFC 8785 JSON a signature covers: the object without its `signature`. */
function unsignedCanonical(obj: Record<string, unknown>): string {
  const { signature: _s, ...rest } = obj;
  return canonicalJson(rest);
}

function signedMessage(domain: string, obj: Record<string, unknown>): Buffer {
  return messageOf(domain, unsignedCanonical(obj));
}

const messageText = (domain: string, canonical: string): string => `${domain}\n${canonical}`;
const SIG_PREFIX = 'ed25519:';
const messageOf = (domain: string, canonical: string): Buffer => Buffer.from(messageText(domain, canonical), 'utf8');

export class ControlSigner {
  readonly keyId: string;
  readonly publicKeyB64: string;
  private readonly thread: SigningThread;

  private constructor(
    readonly name: string,
    readonly publicKey: Uint8Array,
    private readonly key: KeyObject,
  ) {
    this.thread = new SigningThread(key);
    this.keyId = keyIdOf(publicKey);
    this.publicKeyB64 = Buffer.from(publicKey).toString('base64');
  }

  /** Loads (or creates, mode 0600) the control plane's key file. */
  static async open(path: string, name: string): Promise<ControlSigner> {
    // loadOrCreateKey checks the file's mode, form, key hash and name; node:crypto then
    // needs the seed itself, as PKCS#8.
    const { signer } = await loadOrCreateKey(path, name);
    const m = /^PRIVATE\+KEY\+[^+\s]+\+[0-9a-f]{8}\+([A-Za-z0-9+/=]+)$/.exec((await readFile(path, 'utf8')).trim());
    const raw = m ? Buffer.from(m[1]!, 'base64') : Buffer.alloc(0);
    if (raw.length !== 33) throw new Error(`${path} is not an Ed25519 private key`);
    const seed = raw.subarray(1);
    const key = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(seed)]), format: 'der', type: 'pkcs8' });
    const publicKey = new Uint8Array(createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(SPKI_ED25519_PREFIX.length));
    if (Buffer.compare(Buffer.from(publicKey), Buffer.from(signer.publicKey)) !== 0) throw new Error(`${path}: key does not match its public half`);
    return new ControlSigner(name, publicKey, key);
  }

  /** Returns `obj` with `signature` set (over everything else in it, `key_id` included). */
  sign<T extends Record<string, unknown>>(domain: string, obj: T): T & { signature: string } {
    return { ...obj, signature: SIG_PREFIX + sign(null, messageOf(domain, unsignedCanonical(obj)), this.key).toString('base64') };
  }

  /**
   * The `signature` values for objects whose RFC 8785 JSON (without `signature`) the caller
   * has already composed: the audit log builds it from the record's canonical JSON, which it
   * has anyway, instead of canonicalising the whole event again. Made on the signing thread,
   * one group at a time, so the event loop only hands the messages over.
   */
  async signCanonicals(domain: string, canonicals: readonly string[]): Promise<string[]> {
    const signatures = await this.thread.sign(canonicals.map((c) => messageText(domain, c)));
    return signatures.map((b64) => SIG_PREFIX + b64);
  }

  /** Stops the signing thread (sign() keeps working; a later signCanonicals starts it again). */
  close(): Promise<void> {
    return this.thread.close();
  }

  /** The public identity clients pin: name, key id, base64 public key. */
  describe(): { name: string; key_id: string; public_key: string; algorithm: 'Ed25519' } {
    return { name: this.name, key_id: this.keyId, public_key: this.publicKeyB64, algorithm: 'Ed25519' };
  }
}

/** Verifies `obj.signature` against a raw 32-byte Ed25519 public key. */
export function verifySigned(domain: string, obj: Record<string, unknown>, publicKey: Uint8Array): boolean {
  const sig = obj.signature;
  if (typeof sig !== 'string' || !sig.startsWith(SIG_PREFIX)) return false;
  const raw = Buffer.from(sig.slice(SIG_PREFIX.length), 'base64');
  if (raw.length !== 64) return false;
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, Buffer.from(publicKey)]), format: 'der', type: 'spki' });
  return verify(null, signedMessage(domain, obj), key, raw);
}
