// Ed25519 keys in a token (CKK_EC_EDWARDS, CKM_EDDSA) as a NoteSigner: the log's checkpoint
// key, a witness's cosigning key, the control plane's signing key. The public key is read
// from the token's public-key object (CKA_EC_POINT), so the key id and vkey are exactly those
// of the same key held locally. Every signature is checked against that public key before
// it is used, and every sign is bounded by a timeout: a failing or slow token throws, so
// the sequencer's batch fails before anything is staged or written (as with KMS).
import { type KeyObject, createPublicKey, verify } from 'node:crypto';
import type { Handle } from 'pkcs11js';
import { type NoteSigner, isValidKeyName, keyIdOf } from '../core/note.js';
import { Pkcs11KeyError } from './errors.js';
import { CKK_EC_EDWARDS, CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_EDDSA, type Session, Token, bounded } from './token.js';
import { type Pkcs11Uri, describeUri, parsePkcs11Uri, Pkcs11UriError } from './uri.js';

/** CKA_EC_PARAMS naming Ed25519: the PrintableString "edwards25519" (what SoftHSM2 and most tokens take). */
export const EDWARDS25519_PARAMS = Buffer.from('130c656477617264733235353139', 'hex');
/** The same curve named by its OID 1.3.101.112, which PKCS#11 3.0 also allows. */
const ED25519_OID_PARAMS = Buffer.from('06032b6570', 'hex');
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** The raw 32-byte key in a CKA_EC_POINT: a DER OCTET STRING around it, or (some tokens) the bare bytes. */
export function ed25519FromEcPoint(point: Uint8Array): Uint8Array {
  if (point.length === 34 && point[0] === 0x04 && point[1] === 0x20) return point.slice(2);
  if (point.length === 32) return point.slice();
  throw new Pkcs11KeyError('object', `CKA_EC_POINT of ${point.length} bytes is not an Ed25519 public key`);
}

export const ed25519Spki = (publicKey: Uint8Array): KeyObject =>
  createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, Buffer.from(publicKey)]), format: 'der', type: 'spki' });

/** Parses a `pkcs11:` URI into the error type the CLI reports as a configuration error. */
export function keyUri(text: string): Pkcs11Uri {
  try {
    return parsePkcs11Uri(text);
  } catch (e) {
    if (e instanceof Pkcs11UriError) throw new Pkcs11KeyError('config', `PKCS#11 URI: ${e.message}`);
    throw e;
  }
}

/** Search template of the URI's object of `cls`: label, id, and the Ed25519 key type. */
function keyTemplate(token: Token, uri: Pkcs11Uri, cls: number) {
  const p = token.p;
  if (uri.object === undefined && uri.id === undefined)
    throw new Pkcs11KeyError('config', 'the PKCS#11 URI names no key: add object=<label> (or id=)');
  return [
    { type: p.CKA_CLASS, value: cls },
    { type: p.CKA_KEY_TYPE, value: CKK_EC_EDWARDS },
    ...(uri.object !== undefined ? [{ type: p.CKA_LABEL, value: uri.object }] : []),
    ...(uri.id !== undefined ? [{ type: p.CKA_ID, value: Buffer.from(uri.id) }] : []),
  ];
}

function objectName(uri: Pkcs11Uri, what: string): string {
  return `${what} ${uri.object !== undefined ? JSON.stringify(uri.object) : ''}${uri.id !== undefined ? ` id=${Buffer.from(uri.id).toString('hex')}` : ''}`
    .replace(/ +/g, ' ')
    .trim();
}

/** The Ed25519 public key of the URI's key pair, read from its public-key object. */
export function readPublicKey(token: Token, s: Session, uri: Pkcs11Uri): Uint8Array {
  const p = token.p;
  const h = token.findOne(
    s,
    'public',
    keyTemplate(token, uri, p.CKO_PUBLIC_KEY),
    objectName(uri, 'Ed25519 public key'),
  );
  const [params, point] = token.lib.C_GetAttributeValue(s.handle, h, [
    { type: p.CKA_EC_PARAMS },
    { type: p.CKA_EC_POINT },
  ]);
  const curve = Buffer.from(params!.value);
  if (!curve.equals(EDWARDS25519_PARAMS) && !curve.equals(ED25519_OID_PARAMS))
    throw new Pkcs11KeyError(
      'object',
      `${objectName(uri, 'key')} is not on edwards25519 (Ed448 and others are not note keys)`,
    );
  return ed25519FromEcPoint(point!.value);
}

function privateKey(token: Token, s: Session, uri: Pkcs11Uri): Handle {
  return token.findOne(
    s,
    'private',
    keyTemplate(token, uri, token.p.CKO_PRIVATE_KEY),
    objectName(uri, 'Ed25519 private key'),
  );
}

export interface Pkcs11SignerOptions {
  /** The key's PKCS#11 URI (module, token, object; the PIN by pin-source or STELE_PKCS11_PIN). */
  readonly uri: string;
  /** Key name in signatures: the log's origin, the witness's name. */
  readonly name: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Bound on one sign, in ms (default 5,000). */
  readonly timeoutMs?: number;
  /** Refuse a key whose key id differs: pins the key. */
  readonly expectKeyId?: string;
}

export class Pkcs11Signer implements NoteSigner {
  readonly stats = { signs: 0, failures: 0 };
  readonly keyId: string;

  private constructor(
    readonly name: string,
    readonly publicKey: Uint8Array,
    readonly uri: Pkcs11Uri,
    readonly token: Token,
    private readonly verifyKey: KeyObject,
    private readonly timeoutMs: number,
  ) {
    this.keyId = keyIdOf(publicKey);
  }

  /**
   * Opens the token, reads the public key and makes one signature: a wrong PIN, a missing
   * token or key, or a key that cannot sign fails here, at start, not at the first batch.
   */
  static async open(o: Pkcs11SignerOptions): Promise<Pkcs11Signer> {
    if (!isValidKeyName(o.name)) throw new Pkcs11KeyError('config', `invalid key name ${JSON.stringify(o.name)}`);
    const uri = keyUri(o.uri);
    const token = Token.open({ uri, ...(o.env ? { env: o.env } : {}) });
    try {
      const publicKey = await token.withSession((s) => {
        const pub = readPublicKey(token, s, uri);
        privateKey(token, s, uri);
        return pub;
      });
      if (o.expectKeyId !== undefined && keyIdOf(publicKey) !== o.expectKeyId.toLowerCase()) {
        throw new Pkcs11KeyError(
          'object',
          `${describeUri(uri)} has key id ${keyIdOf(publicKey)}, not the pinned ${o.expectKeyId}`,
        );
      }
      const signer = new Pkcs11Signer(o.name, publicKey, uri, token, ed25519Spki(publicKey), o.timeoutMs ?? 5_000);
      await signer.sign(new TextEncoder().encode('stele/pkcs11/self-test\n'));
      return signer;
    } catch (e) {
      token.close();
      throw e;
    }
  }

  async sign(message: Uint8Array): Promise<Uint8Array> {
    this.stats.signs++;
    let sig: Buffer;
    try {
      sig = await this.token.withSession((s) => {
        this.token.lib.C_SignInit(s.handle, { mechanism: CKM_EDDSA }, privateKey(this.token, s, this.uri));
        // On libuv's pool: a slow token does not hold up the event loop.
        return bounded(
          this.token.lib.C_SignAsync(s.handle, Buffer.from(message), Buffer.alloc(64)),
          this.timeoutMs,
          `token "${this.token.label}" (sign)`,
        );
      });
    } catch (e) {
      this.stats.failures++;
      throw e;
    }
    if (sig.length !== 64 || !verify(null, message, this.verifyKey, sig)) {
      this.stats.failures++;
      throw new Pkcs11KeyError(
        'device',
        `token "${this.token.label}" returned a signature that does not verify under its public key`,
      );
    }
    return new Uint8Array(sig);
  }

  /** The same, on the calling thread (for the control plane's synchronous record signing). */
  signSync(message: Uint8Array): Uint8Array {
    this.stats.signs++;
    const sig = this.token.withSessionSync((s) => {
      this.token.lib.C_SignInit(s.handle, { mechanism: CKM_EDDSA }, privateKey(this.token, s, this.uri));
      return this.token.lib.C_Sign(s.handle, Buffer.from(message), Buffer.alloc(64));
    });
    if (sig.length !== 64 || !verify(null, message, this.verifyKey, sig)) {
      this.stats.failures++;
      throw new Pkcs11KeyError(
        'device',
        `token "${this.token.label}" returned a signature that does not verify under its public key`,
      );
    }
    return new Uint8Array(sig);
  }

  close(): void {
    this.token.close();
  }

  toJSON(): object {
    return { name: this.name, keyId: this.keyId, uri: describeUri(this.uri) };
  }
}

/** What `stele key generate/import` leave in the token. */
export interface TokenKey {
  readonly publicKey: Uint8Array;
  readonly keyId: string;
}

function newKeyAttrs(token: Token, uri: Pkcs11Uri) {
  const p = token.p;
  if (uri.object === undefined)
    throw new Pkcs11KeyError('config', 'name the new key with object=<label> in the PKCS#11 URI');
  const id = uri.id !== undefined ? [{ type: p.CKA_ID, value: Buffer.from(uri.id) }] : [];
  return {
    common: [{ type: p.CKA_TOKEN, value: true }, { type: p.CKA_LABEL, value: uri.object }, ...id],
    // Never readable or exportable: signing is the only thing the token does with it.
    priv: [
      { type: p.CKA_PRIVATE, value: true },
      { type: p.CKA_SENSITIVE, value: true },
      { type: p.CKA_EXTRACTABLE, value: false },
      { type: p.CKA_SIGN, value: true },
    ],
  };
}

function refuseExisting(token: Token, s: Session, uri: Pkcs11Uri): void {
  const p = token.p;
  const template = [{ type: p.CKA_LABEL, value: uri.object! }];
  if (token.findAll(s, template, 1).length > 0)
    throw new Pkcs11KeyError(
      'object',
      `token "${token.label}" already has an object labelled ${JSON.stringify(uri.object)}`,
    );
}

/** Generates an Ed25519 key pair inside the token; the private half never leaves it. */
export function generateEd25519(token: Token, uri: Pkcs11Uri): Promise<TokenKey> {
  return token.withSession((s) => {
    refuseExisting(token, s, uri);
    const p = token.p;
    const { common, priv } = newKeyAttrs(token, uri);
    token.lib.C_GenerateKeyPair(
      s.handle,
      { mechanism: CKM_EC_EDWARDS_KEY_PAIR_GEN },
      [...common, { type: p.CKA_EC_PARAMS, value: EDWARDS25519_PARAMS }, { type: p.CKA_VERIFY, value: true }],
      [...common, ...priv],
    );
    const publicKey = readPublicKey(token, s, uri);
    return { publicKey, keyId: keyIdOf(publicKey) };
  });
}

/** Imports an Ed25519 key (its 32-byte seed) into the token, with its public half. */
export function importEd25519(
  token: Token,
  uri: Pkcs11Uri,
  seed: Uint8Array,
  publicKey: Uint8Array,
): Promise<TokenKey> {
  return token.withSession((s) => {
    refuseExisting(token, s, uri);
    const p = token.p;
    const { common, priv } = newKeyAttrs(token, uri);
    const curve = { type: p.CKA_EC_PARAMS, value: EDWARDS25519_PARAMS };
    const kind = { type: p.CKA_KEY_TYPE, value: CKK_EC_EDWARDS };
    const pub = token.lib.C_CreateObject(s.handle, [
      { type: p.CKA_CLASS, value: p.CKO_PUBLIC_KEY },
      kind,
      ...common,
      curve,
      { type: p.CKA_EC_POINT, value: Buffer.concat([Buffer.from([0x04, 0x20]), Buffer.from(publicKey)]) },
      { type: p.CKA_VERIFY, value: true },
    ]);
    try {
      token.lib.C_CreateObject(s.handle, [
        { type: p.CKA_CLASS, value: p.CKO_PRIVATE_KEY },
        kind,
        ...common,
        ...priv,
        curve,
        { type: p.CKA_VALUE, value: Buffer.from(seed) },
      ]);
    } catch (e) {
      token.lib.C_DestroyObject(s.handle, pub);
      throw e;
    }
    const read = readPublicKey(token, s, uri);
    return { publicKey: read, keyId: keyIdOf(read) };
  });
}
