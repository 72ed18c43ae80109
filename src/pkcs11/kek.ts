// The control plane's KEKs inside an HSM: each key epoch is an AES-256 key generated in the
// token, sensitive and never extractable, so it never exists outside the HSM. Lease DEKs are
// wrapped with CKM_AES_GCM (a fresh 96-bit IV each, the lease binding as associated data,
// exactly as the local provider binds it), the token doing the cipher. Retiring an epoch
// destroys its key object (crypto-shredding): nothing wrapped under it unwraps afterwards.
//
//   kek id  = pkcs11:object=stele-kek_<ULID>   (the object's CKA_LABEL, within the configured token)
//   wrapped = IV (12) ‖ ciphertext ‖ tag (16)
import { randomBytes } from 'node:crypto';
import { newUlid as ulid } from '../store/ids.js';
import { KekError, type KekProvider, type WrapBinding, localAad } from '../keys/kek.js';
import { Pkcs11KeyError } from './errors.js';
import { type Session, Token, bounded } from './token.js';
import { keyUri } from './signer.js';

const KEK_ID = /^pkcs11:object=(stele-kek_[0-9A-Z]{26})$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface Pkcs11KekOptions {
  /** PKCS#11 URI of the token (module, token, PIN source); an object in it is ignored. */
  readonly uri: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Bound on one wrap or unwrap, in ms (default 5,000). */
  readonly timeoutMs?: number;
}

export class Pkcs11KekProvider implements KekProvider {
  readonly kind = 'pkcs11' as const;

  private constructor(
    readonly token: Token,
    private readonly timeoutMs: number,
  ) {}

  /** Opens the token (a wrong PIN, missing module or token fails here, at start). */
  static open(o: Pkcs11KekOptions): Pkcs11KekProvider {
    return new Pkcs11KekProvider(
      Token.open({ uri: keyUri(o.uri), ...(o.env ? { env: o.env } : {}) }),
      o.timeoutMs ?? 5_000,
    );
  }

  private label(kekId: string): string {
    const m = KEK_ID.exec(kekId);
    if (!m) throw new KekError('kek_unavailable', `${kekId} is not a PKCS#11 KEK id`);
    return m[1]!;
  }

  private key(s: Session, label: string) {
    const p = this.token.p;
    const found = this.token.findAll(
      s,
      [
        { type: p.CKA_CLASS, value: p.CKO_SECRET_KEY },
        { type: p.CKA_LABEL, value: label },
      ],
      2,
    );
    if (found.length === 0)
      throw new KekError('kek_retired', `KEK ${label} is not in token "${this.token.label}" (its epoch was retired)`);
    if (found.length > 1)
      throw new KekError('kek_unavailable', `token "${this.token.label}" has two objects labelled ${label}`);
    return found[0]!;
  }

  /** Runs a token operation; token failures become KekErrors the API answers as 503s. */
  private async run<T>(what: string, fn: (s: Session) => Promise<T> | T): Promise<T> {
    let kekError: KekError | undefined;
    try {
      return await this.token.withSession(async (s) => {
        try {
          return await fn(s);
        } catch (e) {
          if (e instanceof KekError) kekError = e;
          throw e;
        }
      });
    } catch (e) {
      if (kekError) throw kekError;
      const msg = (e as Error).message;
      // A tag that does not verify: CKR_ENCRYPTED_DATA_INVALID by the standard, but SoftHSM2
      // (and some HSMs) answer CKR_GENERAL_ERROR; a token that still answers refused the data.
      if (
        what === 'unwrap' &&
        /CKR_(ENCRYPTED_DATA_INVALID|ENCRYPTED_DATA_LEN_RANGE|GENERAL_ERROR|FUNCTION_FAILED)\b/.test(msg) &&
        this.token.healthy()
      ) {
        throw new KekError('unwrap_failed', 'the wrapped key does not authenticate under this KEK and lease');
      }
      throw new KekError('kms_error', `HSM ${what} failed: ${e instanceof Pkcs11KeyError ? msg : String(e)}`);
    }
  }

  async create(_epoch: number): Promise<string> {
    const label = `stele-kek_${ulid()}`;
    await this.run('key generation', (s) => {
      const p = this.token.p;
      this.token.lib.C_GenerateKey(s.handle, { mechanism: p.CKM_AES_KEY_GEN }, [
        { type: p.CKA_CLASS, value: p.CKO_SECRET_KEY },
        { type: p.CKA_KEY_TYPE, value: p.CKK_AES },
        { type: p.CKA_VALUE_LEN, value: 32 },
        { type: p.CKA_TOKEN, value: true },
        { type: p.CKA_LABEL, value: label },
        { type: p.CKA_PRIVATE, value: true },
        // Never leaves the token: not readable, not wrappable by another key.
        { type: p.CKA_SENSITIVE, value: true },
        { type: p.CKA_EXTRACTABLE, value: false },
        { type: p.CKA_ENCRYPT, value: true },
        { type: p.CKA_DECRYPT, value: true },
        { type: p.CKA_WRAP, value: false },
        { type: p.CKA_UNWRAP, value: false },
      ]);
    });
    return `pkcs11:object=${label}`;
  }

  private gcm(iv: Buffer, binding: WrapBinding) {
    const p = this.token.p;
    return {
      mechanism: p.CKM_AES_GCM,
      parameter: {
        type: p.CK_PARAMS_AES_GCM,
        iv,
        aad: localAad(binding),
        ivBits: IV_BYTES * 8,
        tagBits: TAG_BYTES * 8,
      },
    };
  }

  async wrap(kekId: string, dek: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const label = this.label(kekId);
    const iv = randomBytes(IV_BYTES);
    const ct = await this.run('wrap', (s) => {
      this.token.lib.C_EncryptInit(s.handle, this.gcm(iv, binding), this.key(s, label));
      return bounded(
        this.token.lib.C_EncryptAsync(s.handle, Buffer.from(dek), Buffer.alloc(dek.length + TAG_BYTES + 16)),
        this.timeoutMs,
        `token "${this.token.label}" (wrap)`,
      );
    });
    return new Uint8Array(Buffer.concat([iv, ct]));
  }

  async unwrap(kekId: string, wrapped: Uint8Array, binding: WrapBinding): Promise<Uint8Array> {
    const label = this.label(kekId);
    if (wrapped.length < IV_BYTES + TAG_BYTES + 1) throw new KekError('unwrap_failed', 'wrapped key is too short');
    const b = Buffer.from(wrapped);
    const pt = await this.run('unwrap', (s) => {
      this.token.lib.C_DecryptInit(s.handle, this.gcm(b.subarray(0, IV_BYTES), binding), this.key(s, label));
      return bounded(
        this.token.lib.C_DecryptAsync(s.handle, b.subarray(IV_BYTES), Buffer.alloc(b.length)),
        this.timeoutMs,
        `token "${this.token.label}" (unwrap)`,
      );
    });
    return new Uint8Array(pt);
  }

  async retire(kekId: string): Promise<void> {
    const label = this.label(kekId);
    await this.run('destroy', (s) => {
      const p = this.token.p;
      for (const h of this.token.findAll(s, [
        { type: p.CKA_CLASS, value: p.CKO_SECRET_KEY },
        { type: p.CKA_LABEL, value: label },
      ]))
        this.token.lib.C_DestroyObject(s.handle, h);
    });
  }

  close(): void {
    this.token.close();
  }
}
