// The control plane's own Ed25519 key: it signs key-epoch records and audit events (never
// checkpoints: the log key stays the log's). The key file is the same mode-0600
// PRIVATE+KEY form as the log's (src/keys/local-signer.ts); signing goes through node:crypto, which
// is several times faster than the pure-JS signer and matters at one signature per request.
// Audit events are signed in groups on a worker thread (signCanonicals; src/control/signing-thread.ts).
// The key may instead be an Ed25519 key in an HSM (ControlSigner.fromHsm; src/pkcs11/).
//
// A signed object is JSON: its signature is `ed25519:<base64>` over
//   <domain> ‖ 0x0A ‖ RFC 8785 canonical JSON of the object without `signature`
// and the object names the key by `key_id` (hex SHA-256 of the raw public key, as for the log).
import { type KeyObject, createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import canonicalizeCjs from 'canonicalize';
import { keyIdOf } from '../core/note.js';
import { loadOrCreateKey } from '../keys/local-signer.js';
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

/** How a ControlSigner makes its signatures: node:crypto over a key file, or a key in an HSM. */
interface SigningKey {
  signSync(message: Buffer): Uint8Array;
  /** Base64 signatures of UTF-8 messages, in order. */
  signMany(messages: readonly string[]): Promise<string[]>;
  close(): Promise<void>;
}

/** An Ed25519 key held elsewhere that signs both ways (src/pkcs11/signer.ts's Pkcs11Signer). */
export interface ExternalEd25519Key {
  readonly name: string;
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Promise<Uint8Array>;
  signSync(message: Uint8Array): Uint8Array;
  close(): void;
}

function fileKey(key: KeyObject): SigningKey {
  const thread = new SigningThread(key);
  return {
    signSync: (m) => sign(null, m, key),
    signMany: (ms) => thread.sign(ms),
    close: () => thread.close(),
  };
}

export class ControlSigner {
  readonly keyId: string;
  readonly publicKeyB64: string;

  private constructor(
    readonly name: string,
    readonly publicKey: Uint8Array,
    private readonly key: SigningKey,
  ) {
    this.keyId = keyIdOf(publicKey);
    this.publicKeyB64 = Buffer.from(publicKey).toString('base64');
  }

  /**
   * Signs with a key in an HSM. Records are signed on the calling thread (one C_Sign each);
   * audit groups go through the token's session pool, off the event loop.
   */
  static fromHsm(key: ExternalEd25519Key): ControlSigner {
    return new ControlSigner(key.name, key.publicKey, {
      signSync: (m) => key.signSync(m),
      signMany: async (ms) => {
        const out: string[] = [];
        for (const m of ms) out.push(Buffer.from(await key.sign(Buffer.from(m, 'utf8'))).toString('base64'));
        return out;
      },
      close: async () => key.close(),
    });
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
    const key = createPrivateKey({
      key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(seed)]),
      format: 'der',
      type: 'pkcs8',
    });
    const publicKey = new Uint8Array(
      createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(SPKI_ED25519_PREFIX.length),
    );
    if (Buffer.compare(Buffer.from(publicKey), Buffer.from(signer.publicKey)) !== 0)
      throw new Error(`${path}: key does not match its public half`);
    return new ControlSigner(name, publicKey, fileKey(key));
  }

  /** Returns `obj` with `signature` set (over everything else in it, `key_id` included). */
  sign<T extends Record<string, unknown>>(domain: string, obj: T): T & { signature: string } {
    return {
      ...obj,
      signature:
        SIG_PREFIX + Buffer.from(this.key.signSync(messageOf(domain, unsignedCanonical(obj)))).toString('base64'),
    };
  }

  /**
   * The `signature` values for objects whose RFC 8785 JSON (without `signature`) the caller
   * has already composed: the audit log builds it from the record's canonical JSON, which it
   * has anyway, instead of canonicalising the whole event again. Made on the signing thread,
   * one group at a time, so the event loop only hands the messages over.
   */
  async signCanonicals(domain: string, canonicals: readonly string[]): Promise<string[]> {
    const signatures = await this.key.signMany(canonicals.map((c) => messageText(domain, c)));
    return signatures.map((b64) => SIG_PREFIX + b64);
  }

  /** Stops the signing thread (sign() keeps working; a later signCanonicals starts it again) or lets the HSM go. */
  close(): Promise<void> {
    return this.key.close();
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
  const key = createPublicKey({
    key: Buffer.concat([SPKI_ED25519_PREFIX, Buffer.from(publicKey)]),
    format: 'der',
    type: 'spki',
  });
  return verify(null, signedMessage(domain, obj), key, raw);
}
