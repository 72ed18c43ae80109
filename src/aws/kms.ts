// NoteSigner on AWS KMS: an asymmetric key of spec ECC_NIST_EDWARDS25519 (usage
// SIGN_VERIFY) signs checkpoint bodies with SigningAlgorithm ED25519_SHA_512 and
// MessageType RAW — pure Ed25519 (RFC 8032) over the message itself, so a KMS-signed
// checkpoint is an ordinary signed note (type 0x01) any Ed25519 verifier accepts.
// (ED25519_PH_SHA_512 would be the pre-hashed variant, which note verifiers reject.)
//
// The public key comes from GetPublicKey as a DER SubjectPublicKeyInfo; it is checked to
// be an Ed25519 key (OID 1.3.101.112) and reduced to the raw 32 bytes. Every signature is
// verified locally before it is used, and every KMS call is bounded by a timeout, so a
// failing, slow or misconfigured KMS throws: the sequencer's batch fails before anything
// is staged or written, and its anchors are retried.
import { type KeyObject, createPublicKey, verify } from 'node:crypto';
import { GetPublicKeyCommand, KMSClient, type KMSClientConfig, SignCommand } from '@aws-sdk/client-kms';
import { type NoteSigner, isValidKeyName, keyIdOf } from '../core/note.js';
import { UnreachableError, reportUnreachable } from '../store/unreachable.js';

export class KmsSignerError extends Error {
  override name = 'KmsSignerError';
}

export interface KmsSignerOptions {
  /** Key id, ARN or alias (alias/…) of the KMS key. */
  readonly keyId: string;
  /** Key name in signatures: the log's origin. */
  readonly name: string;
  /** Refuse a key whose keyId (hex SHA-256 of the raw public key) differs: pins the key. */
  readonly expectKeyId?: string;
  readonly client?: KMSClient;
  readonly region?: string;
  /** A KMS-compatible endpoint (default: AWS for the region). */
  readonly endpoint?: string;
  readonly credentials?: KMSClientConfig['credentials'];
  /** Bound on one sign() call, retries included, in ms (default 5,000). */
  readonly timeoutMs?: number;
  /** SDK attempts per call (default 3). */
  readonly maxAttempts?: number;
  readonly clientConfig?: KMSClientConfig;
}

/** DER prefix of an Ed25519 SubjectPublicKeyInfo: SEQ{ SEQ{ OID 1.3.101.112 }, BIT STRING(0 unused) }. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** KMS accepts at most 4,096 bytes in a RAW Sign request. */
export const KMS_MAX_RAW_MESSAGE = 4096;

/** The raw 32-byte Ed25519 public key of a DER SubjectPublicKeyInfo; throws on anything else. */
export function ed25519FromSpki(der: Uint8Array): Uint8Array {
  const b = Buffer.from(der);
  if (
    b.length !== ED25519_SPKI_PREFIX.length + 32 ||
    !b.subarray(0, ED25519_SPKI_PREFIX.length).equals(ED25519_SPKI_PREFIX)
  ) {
    throw new KmsSignerError('KMS public key is not a DER SubjectPublicKeyInfo of an Ed25519 key');
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: b, format: 'der', type: 'spki' });
  } catch (e) {
    throw new KmsSignerError(`KMS public key does not parse: ${(e as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new KmsSignerError(`KMS key is ${key.asymmetricKeyType}, not ed25519`);
  return new Uint8Array(b.subarray(ED25519_SPKI_PREFIX.length));
}

/**
 * `settings`: the settings that name the endpoint and the region, for the line a network
 * failure is told in (default the log signer's STELE_KMS_ENDPOINT and AWS_REGION).
 */
export function createKmsClient(
  o: Omit<KmsSignerOptions, 'keyId' | 'name'> = {},
  settings: { readonly endpoint: string; readonly region: string } = {
    endpoint: 'STELE_KMS_ENDPOINT',
    region: 'AWS_REGION',
  },
): KMSClient {
  const timeout = o.timeoutMs ?? 5_000;
  const region = o.region ?? process.env.AWS_REGION ?? 'us-east-1';
  const client = new KMSClient({
    region,
    ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    ...(o.credentials ? { credentials: o.credentials } : {}),
    maxAttempts: o.maxAttempts ?? 3,
    retryMode: 'standard',
    requestHandler: { connectionTimeout: Math.min(2_000, timeout), requestTimeout: timeout },
    ...o.clientConfig,
  });
  // A network failure names the endpoint and its setting (src/store/unreachable.ts).
  return o.endpoint
    ? reportUnreachable(client, `the KMS endpoint ${o.endpoint}`, settings.endpoint)
    : reportUnreachable(client, `AWS KMS in ${region}`, settings.region);
}

export class KmsSigner implements NoteSigner {
  /** Sign calls made (each is a billed KMS request). */
  readonly stats = { signs: 0, failures: 0 };

  private constructor(
    readonly name: string,
    readonly publicKey: Uint8Array,
    readonly keyId: string,
    private readonly client: KMSClient,
    private readonly verifyKey: KeyObject,
    private readonly timeoutMs: number,
    private readonly ownsClient: boolean,
  ) {}

  /** Fetches and checks the key's public half; the signer is ready to sign afterwards. */
  static async create(o: KmsSignerOptions): Promise<KmsSigner> {
    if (!isValidKeyName(o.name)) throw new KmsSignerError(`invalid key name ${JSON.stringify(o.name)}`);
    const client = o.client ?? createKmsClient(o);
    const timeoutMs = o.timeoutMs ?? 5_000;
    let res;
    try {
      res = await client.send(new GetPublicKeyCommand({ KeyId: o.keyId }), {
        abortSignal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      // Not reached at all: which endpoint, for which key, and its setting (src/store/unreachable.ts).
      if (e instanceof UnreachableError)
        throw new UnreachableError(`${e.what} for the key ${o.keyId}`, e.setting, e.reason, { cause: e });
      throw new KmsSignerError(`KMS GetPublicKey for ${o.keyId} failed: ${(e as Error).name}: ${(e as Error).message}`);
    }
    if (res.KeySpec !== 'ECC_NIST_EDWARDS25519')
      throw new KmsSignerError(`KMS key ${o.keyId} has spec ${res.KeySpec}, not ECC_NIST_EDWARDS25519`);
    if (res.KeyUsage !== 'SIGN_VERIFY')
      throw new KmsSignerError(`KMS key ${o.keyId} has usage ${res.KeyUsage}, not SIGN_VERIFY`);
    if (!res.SigningAlgorithms?.includes('ED25519_SHA_512'))
      throw new KmsSignerError(`KMS key ${o.keyId} does not offer ED25519_SHA_512`);
    if (!res.PublicKey) throw new KmsSignerError(`KMS returned no public key for ${o.keyId}`);
    const publicKey = ed25519FromSpki(res.PublicKey);
    if (o.expectKeyId !== undefined && keyIdOf(publicKey) !== o.expectKeyId.toLowerCase()) {
      throw new KmsSignerError(`KMS key ${o.keyId} has key id ${keyIdOf(publicKey)}, not the pinned ${o.expectKeyId}`);
    }
    const verifyKey = createPublicKey({ key: Buffer.from(res.PublicKey), format: 'der', type: 'spki' });
    return new KmsSigner(o.name, publicKey, res.KeyId ?? o.keyId, client, verifyKey, timeoutMs, !o.client);
  }

  async sign(message: Uint8Array): Promise<Uint8Array> {
    if (message.length > KMS_MAX_RAW_MESSAGE)
      throw new KmsSignerError(`message of ${message.length} bytes exceeds KMS's ${KMS_MAX_RAW_MESSAGE}`);
    this.stats.signs++;
    let signature: Uint8Array | undefined;
    try {
      const res = await this.client.send(
        new SignCommand({
          KeyId: this.keyId,
          Message: message,
          MessageType: 'RAW',
          SigningAlgorithm: 'ED25519_SHA_512',
        }),
        { abortSignal: AbortSignal.timeout(this.timeoutMs) },
      );
      signature = res.Signature;
    } catch (e) {
      this.stats.failures++;
      throw new KmsSignerError(`KMS Sign failed: ${(e as Error).name}: ${(e as Error).message}`);
    }
    if (!signature || signature.length !== 64 || !verify(null, message, this.verifyKey, signature)) {
      this.stats.failures++;
      throw new KmsSignerError('KMS returned a signature that does not verify under the key it published');
    }
    return signature;
  }

  close(): void {
    if (this.ownsClient) this.client.destroy();
  }

  toJSON(): object {
    return { name: this.name, keyId: this.keyId, publicKey: Buffer.from(this.publicKey).toString('base64') };
  }
}
