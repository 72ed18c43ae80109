// KmsSigner against the KMS stand-in (test/helpers/kms-standin.ts): a small loopback
// endpoint speaking the KMS JSON 1.1 protocol for GetPublicKey and Sign — a stand-in,
// because AWS KMS itself cannot run here. What is proven: the signer sends
// ED25519_SHA_512 / RAW requests, turns the DER SubjectPublicKeyInfo into the raw key and
// validates it, and a KMS-signed checkpoint is an ordinary Ed25519 signed note.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsSigner, KmsSignerError, ed25519FromSpki } from '../../src/aws/kms.js';
import { openCheckpoint, signCheckpoint } from '../../src/core/checkpoint.js';
import { EMPTY_ROOT, sha256 } from '../../src/core/hash.js';
import { SIG_ED25519, SeedSigner, formatVkey, keyIdOf, makeVerifier, parseVkey } from '../../src/core/note.js';
import { type KmsStandIn, startKmsStandIn } from '../helpers/kms-standin.js';

const ORIGIN = 'kms.example/log';
let kms: KmsStandIn;

beforeAll(async () => {
  kms = await startKmsStandIn(new Uint8Array(32).fill(42));
});
afterAll(async () => {
  await kms?.close();
});

const creds = { accessKeyId: 'local', secretAccessKey: 'local' };
const create = (o: { timeoutMs?: number; expectKeyId?: string; keyId?: string } = {}) =>
  KmsSigner.create({
    keyId: o.keyId ?? kms.keyId,
    name: ORIGIN,
    endpoint: kms.endpoint,
    credentials: creds,
    timeoutMs: o.timeoutMs,
    expectKeyId: o.expectKeyId,
    maxAttempts: 1,
  });

describe('KmsSigner (KMS stand-in on loopback)', () => {
  it('takes the raw public key from GetPublicKey and signs with ED25519_SHA_512 / RAW; its checkpoints verify as ordinary signed notes', async () => {
    const signer = await create();
    const local = new SeedSigner(ORIGIN, kms.seed);
    expect(signer.publicKey).toEqual(local.publicKey);
    expect(signer.keyId).toBe(kms.keyArn);

    const body = { origin: ORIGIN, size: 7, root: sha256(new Uint8Array([1])) };
    const signed = await signCheckpoint(body, signer);
    // Verified with nothing but the KMS public key, through the vkey form a client pins.
    const verifier = parseVkey(formatVkey(makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey)));
    const opened = openCheckpoint(signed.note, verifier);
    expect(opened.size).toBe(7);
    // Ed25519 is deterministic: KMS and a local key over the same seed write the same note.
    expect(signed.note).toBe((await signCheckpoint(body, local)).note);
    expect(kms.calls.Sign).toBeGreaterThanOrEqual(1);
    signer.close();
  });

  it('refuses keys that are not ECC_NIST_EDWARDS25519 / SIGN_VERIFY / ED25519_SHA_512, bad DER, and a key other than the pinned one', async () => {
    const cases: KmsStandIn['publicKeyOverride'][] = [
      { KeySpec: 'ECC_NIST_P256' },
      { KeyUsage: 'ENCRYPT_DECRYPT' },
      { SigningAlgorithms: ['ED25519_PH_SHA_512'] },
      // A P-256 SubjectPublicKeyInfo in place of the Ed25519 one.
      {
        PublicKey: Buffer.from(
          '3059301306072a8648ce3d020106082a8648ce3d03010703420004' + '11'.repeat(64),
          'hex',
        ).toString('base64'),
      },
      { PublicKey: Buffer.from('302a300506032b6570032100' + '00'.repeat(31), 'hex').toString('base64') },
    ];
    for (const override of cases) {
      kms.publicKeyOverride = override;
      await expect(create(), JSON.stringify(override)).rejects.toBeInstanceOf(KmsSignerError);
    }
    kms.publicKeyOverride = undefined;
    await expect(create({ expectKeyId: keyIdOf(EMPTY_ROOT) })).rejects.toThrow(/pinned/);
    expect((await create({ expectKeyId: keyIdOf(new SeedSigner(ORIGIN, kms.seed).publicKey) })).publicKey).toHaveLength(
      32,
    );
    await expect(create({ keyId: 'no-such-key' })).rejects.toThrow(/NotFoundException/);
    expect(() => ed25519FromSpki(new Uint8Array(44))).toThrow(KmsSignerError);
  });

  it('a failing (500) or hanging KMS makes sign() throw within the timeout', async () => {
    const signer = await create({ timeoutMs: 300 });
    const msg = new TextEncoder().encode('body\n');
    kms.fault = 'error';
    await expect(signer.sign(msg)).rejects.toThrow(/KMS Sign failed.*KMSInternalException/);
    kms.fault = 'hang';
    const t0 = Date.now();
    await expect(signer.sign(msg)).rejects.toBeInstanceOf(KmsSignerError);
    expect(Date.now() - t0).toBeLessThan(2_000);
    kms.fault = 'none';
    expect(await signer.sign(msg)).toHaveLength(64);
    expect(signer.stats).toEqual({ signs: 3, failures: 2 });
    signer.close();
  });
});
