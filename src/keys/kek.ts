// Key-encryption keys (KEKs), one per key epoch, held by a KMS:
//   - LocalKekProvider: the demo. Each KEK is 32 random bytes in its own mode-0600 file;
//     DEKs are wrapped with AES-256-GCM (node:crypto), the lease binding as associated data.
//     Retiring an epoch overwrites and deletes its file (crypto-shredding).
//   - AwsKmsKekProvider: production. Each epoch is a customer-managed symmetric KMS key
//     (created per epoch, or an existing one for the first); DEKs are wrapped with KMS
//     Encrypt/Decrypt, the lease binding as the encryption context, so the KEK never
//     leaves KMS. Retiring an epoch disables its key. This adapter is deliberately thin:
//     AWS KMS cannot run on the development machine, so it is exercised only against a
//     wire-protocol stand-in in the tests, never against AWS itself.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import {
  CreateKeyCommand,
  DecryptCommand,
  DescribeKeyCommand,
  DisableKeyCommand,
  EncryptCommand,
  type KMSClient,
} from '@aws-sdk/client-kms';
import { createSecretFile } from '../store/files.js';
import { newUlid as ulid } from '../store/ids.js';

/** What a wrapped DEK is bound to; unwrapping with any other binding fails. */
export interface WrapBinding {
  readonly leaseId: string;
  readonly epoch: number;
  /** Lease expiry, unix seconds. */
  readonly expires: number;
}

/** Where the KEKs are: key files, AWS KMS, or an HSM through PKCS#11 (src/pkcs11/kek.ts). */
export type KekKind = 'local' | 'aws-kms' | 'pkcs11';

export interface KekProvider {
  readonly kind: KekKind;
  /** Creates the KEK of a new epoch; returns its id (recorded in the signed epoch record). */
  create(epoch: number): Promise<string>;
  wrap(kekId: string, dek: Uint8Array, binding: WrapBinding): Promise<Uint8Array>;
  unwrap(kekId: string, wrapped: Uint8Array, binding: WrapBinding): Promise<Uint8Array>;
  /** Destroys (local) or disables (KMS) the KEK: nothing wrapped under it unwraps afterwards. */
  retire(kekId: string): Promise<void>;
  /** Lets go of what the provider holds open (an HSM session pool). */
  close?(): void;
}

export class KekError extends Error {
  override name = 'KekError';
  constructor(
    readonly code: 'unwrap_failed' | 'kek_unavailable' | 'kek_retired' | 'kms_error',
    message: string,
  ) {
    super(message);
  }
}

const utf8 = new TextEncoder();

/** Associated data of a locally wrapped DEK: domain, lease id, epoch and expiry. */
export function localAad(b: WrapBinding): Buffer {
  return Buffer.from(utf8.encode(`stele/lease-dek/v1\n${b.leaseId}\n${b.epoch}\n${b.expires}\n`));
}

/** KMS encryption context of a wrapped DEK (logged by CloudTrail with every Decrypt). */
export function kmsContext(b: WrapBinding): Record<string, string> {
  return {
    'stele:purpose': 'lease-dek',
    'stele:lease_id': b.leaseId,
    'stele:epoch': String(b.epoch),
    'stele:expires': String(b.expires),
  };
}

const LOCAL_PREFIX = 'local:';

export class LocalKekProvider implements KekProvider {
  readonly kind = 'local' as const;
  private readonly keys = new Map<string, Buffer>();

  constructor(readonly dir: string) {}

  private file(kekId: string): string {
    const name = kekId.startsWith(LOCAL_PREFIX) ? kekId.slice(LOCAL_PREFIX.length) : '';
    if (!/^kek_[0-9A-Z]{26}$/.test(name)) throw new KekError('kek_unavailable', `${kekId} is not a local KEK id`);
    return join(this.dir, `${name}.key`);
  }

  async create(_epoch: number): Promise<string> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const kekId = `${LOCAL_PREFIX}kek_${ulid()}`;
    const key = randomBytes(32);
    // Written whole or not at all (a crash never leaves an empty KEK file); ids are fresh ULIDs.
    if (!(await createSecretFile(this.file(kekId), `${key.toString('base64')}\n`)))
      throw new KekError('kek_unavailable', `${kekId} already exists`);
    this.keys.set(kekId, key);
    return kekId;
  }

  private async key(kekId: string): Promise<Buffer> {
    const cached = this.keys.get(kekId);
    if (cached) return cached;
    const path = this.file(kekId);
    let text: string;
    try {
      const st = await fs.stat(path);
      if ((st.mode & 0o077) !== 0)
        throw new KekError('kek_unavailable', `${path} is accessible by group or others; chmod 600 it`);
      text = await fs.readFile(path, 'utf8');
    } catch (e) {
      if (e instanceof KekError) throw e;
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new KekError('kek_retired', `KEK ${kekId} no longer exists (its epoch was retired)`);
      throw e;
    }
    const key = Buffer.from(text.trim(), 'base64');
    if (key.length !== 32) throw new KekError('kek_unavailable', `${path} does not hold a 256-bit key`);
    this.keys.set(kekId, key);
    return key;
  }

  async wrap(kekId: string, dek: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const key = await this.key(kekId);
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv);
    c.setAAD(localAad(binding));
    const ct = Buffer.concat([c.update(dek), c.final()]);
    return new Uint8Array(Buffer.concat([iv, ct, c.getAuthTag()]));
  }

  async unwrap(kekId: string, wrapped: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const key = await this.key(kekId);
    if (wrapped.length < 12 + 16 + 1) throw new KekError('unwrap_failed', 'wrapped key is too short');
    const b = Buffer.from(wrapped);
    const d = createDecipheriv('aes-256-gcm', key, b.subarray(0, 12));
    d.setAAD(localAad(binding));
    d.setAuthTag(b.subarray(b.length - 16));
    try {
      return new Uint8Array(Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]));
    } catch {
      throw new KekError('unwrap_failed', 'the wrapped key does not authenticate under this KEK and lease');
    }
  }

  async retire(kekId: string): Promise<void> {
    const path = this.file(kekId);
    this.keys.delete(kekId);
    try {
      const fh = await fs.open(path, 'r+');
      try {
        await fh.writeFile(Buffer.alloc(64));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fs.unlink(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

export interface AwsKmsKekOptions {
  readonly client: KMSClient;
  /** An existing customer-managed symmetric key to use as the first epoch's KEK. */
  readonly initialKeyId?: string;
  readonly timeoutMs?: number;
}

export class AwsKmsKekProvider implements KekProvider {
  readonly kind = 'aws-kms' as const;
  private readonly timeoutMs: number;

  constructor(private readonly o: AwsKmsKekOptions) {
    this.timeoutMs = o.timeoutMs ?? 5_000;
  }

  private async send<T>(what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    try {
      return await fn(AbortSignal.timeout(this.timeoutMs));
    } catch (e) {
      const name = (e as Error).name;
      if (name === 'InvalidCiphertextException' || name === 'IncorrectKeyException')
        throw new KekError(
          'unwrap_failed',
          `KMS ${what}: the wrapped key does not authenticate under this KEK and lease`,
        );
      if (name === 'DisabledException' || name === 'KMSInvalidStateException')
        throw new KekError('kek_retired', `KMS ${what}: the KEK is disabled (its epoch was retired)`);
      throw new KekError('kms_error', `KMS ${what} failed: ${name}: ${(e as Error).message}`);
    }
  }

  async create(epoch: number): Promise<string> {
    if (epoch === 1 && this.o.initialKeyId) {
      const d = await this.send('DescribeKey', (abortSignal) =>
        this.o.client.send(new DescribeKeyCommand({ KeyId: this.o.initialKeyId }), { abortSignal }),
      );
      const m = d.KeyMetadata;
      if (
        !m?.Arn ||
        m.KeySpec !== 'SYMMETRIC_DEFAULT' ||
        m.KeyUsage !== 'ENCRYPT_DECRYPT' ||
        m.KeyState !== 'Enabled'
      ) {
        throw new KekError(
          'kms_error',
          `KMS key ${this.o.initialKeyId} must be an enabled SYMMETRIC_DEFAULT key with usage ENCRYPT_DECRYPT`,
        );
      }
      return m.Arn;
    }
    const res = await this.send('CreateKey', (abortSignal) =>
      this.o.client.send(
        new CreateKeyCommand({
          KeySpec: 'SYMMETRIC_DEFAULT',
          KeyUsage: 'ENCRYPT_DECRYPT',
          Description: `Stele control-plane KEK, epoch ${epoch}`,
          Tags: [{ TagKey: 'stele:epoch', TagValue: String(epoch) }],
        }),
        { abortSignal },
      ),
    );
    if (!res.KeyMetadata?.Arn) throw new KekError('kms_error', 'KMS CreateKey returned no key ARN');
    return res.KeyMetadata.Arn;
  }

  async wrap(kekId: string, dek: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const res = await this.send('Encrypt', (abortSignal) =>
      this.o.client.send(new EncryptCommand({ KeyId: kekId, Plaintext: dek, EncryptionContext: kmsContext(binding) }), {
        abortSignal,
      }),
    );
    if (!res.CiphertextBlob) throw new KekError('kms_error', 'KMS Encrypt returned no ciphertext');
    return res.CiphertextBlob;
  }

  async unwrap(kekId: string, wrapped: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const res = await this.send('Decrypt', (abortSignal) =>
      this.o.client.send(
        new DecryptCommand({ KeyId: kekId, CiphertextBlob: wrapped, EncryptionContext: kmsContext(binding) }),
        { abortSignal },
      ),
    );
    if (!res.Plaintext) throw new KekError('kms_error', 'KMS Decrypt returned no plaintext');
    return res.Plaintext;
  }

  async retire(kekId: string): Promise<void> {
    await this.send('DisableKey', (abortSignal) =>
      this.o.client.send(new DisableKeyCommand({ KeyId: kekId }), { abortSignal }),
    );
  }
}
