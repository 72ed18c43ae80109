// The control plane's keys in SoftHSM2: key-epoch records and audit events signed by an
// Ed25519 key in the token verify under the key read from the token; lease DEKs wrapped by
// AES KEKs generated in the token unwrap after a restart and after rotations (an older epoch
// until it is retired, when its key object is destroyed); the KEK cannot be read or wrapped
// out of the token; and a session the token drops is replaced, after failing one operation.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/control/audit.js';
import { type EpochRecord, KeyEpochs, verifyEpochChain } from '../../src/control/epochs.js';
import { KekError } from '../../src/keys/kek.js';
import { decodeEnvelope, issueLease, newLeaseId, unwrapLease } from '../../src/control/leases.js';
import { AUDIT_DOMAIN, ControlSigner, EPOCH_DOMAIN, verifySigned } from '../../src/control/signing.js';
import { Pkcs11KekProvider } from '../../src/pkcs11/kek.js';
import { Pkcs11Signer, generateEd25519, keyUri, readPublicKey } from '../../src/pkcs11/signer.js';
import { Token } from '../../src/pkcs11/token.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { scratchDir } from '../helpers/tmp.js';
import { type TestToken, softHsm } from './softhsm.js';

const silent = pino({ level: 'silent' });

describe('control-plane keys and KEKs in SoftHSM2', () => {
  let tok: TestToken;
  let publicKey: Uint8Array;
  const dir = scratchDir('stele-hsm-control-');
  const store = new FsObjectStore(join(dir, 'state'), { fsync: false });
  const anchored: number[] = [];
  const anchor = async (r: EpochRecord) => {
    anchored.push(r.epoch);
    return `led_${anchored.length}_000000000000`;
  };
  const open = async () => {
    const signer = ControlSigner.fromHsm(await Pkcs11Signer.open({ uri: tok.uri('control'), name: 'stele-control' }));
    const kek = Pkcs11KekProvider.open({ uri: tok.uri('any') });
    return { signer, kek, epochs: await KeyEpochs.open(store, signer, kek, anchor, silent) };
  };

  beforeAll(async () => {
    tok = softHsm().token('control');
    const token = Token.open({ uri: keyUri(tok.uri('control')) });
    try {
      publicKey = (await generateEd25519(token, keyUri(tok.uri('control')))).publicKey;
    } finally {
      token.close();
    }
  });

  it('signs epoch records and audit events with the token key; they verify under the key read from the token', async () => {
    const { signer, kek, epochs } = await open();
    try {
      expect(Buffer.from(signer.publicKey)).toEqual(Buffer.from(publicKey));
      const records = epochs.list();
      expect(records.map((r) => [r.epoch, r.kek_provider])).toEqual([[1, 'pkcs11']]);
      expect(records[0]!.kek_id).toMatch(/^pkcs11:object=stele-kek_[0-9A-Z]{26}$/);
      expect(verifyEpochChain(records, publicKey)).toEqual([]);
      // Another key does not verify them (the check is live).
      expect(verifyEpochChain(records, new Uint8Array(32).fill(5))).not.toEqual([]);
      const one = signer.sign(EPOCH_DOMAIN, { a: 1 });
      expect(verifySigned(EPOCH_DOMAIN, one, publicKey)).toBe(true);
      expect(verifySigned(EPOCH_DOMAIN, { ...one, a: 2 }, publicKey)).toBe(false);

      const audit = await AuditLog.open(join(dir, 'audit'), signer, { fsync: false, logger: silent });
      try {
        const events = await Promise.all(
          [1, 2, 3].map((i) => audit.append('lease', { i }, 'ab'.repeat(32), `led_${i}_000000000000`)),
        );
        for (const e of events) {
          expect(e.key_id).toBe(signer.keyId);
          expect(verifySigned(AUDIT_DOMAIN, e as unknown as Record<string, unknown>, publicKey)).toBe(true);
          expect(
            verifySigned(AUDIT_DOMAIN, { ...e, type: 'forged' } as unknown as Record<string, unknown>, publicKey),
          ).toBe(false);
        }
      } finally {
        await audit.close();
      }
    } finally {
      await signer.close();
      kek.close();
    }
  });

  it('wraps lease DEKs in the HSM: they unwrap after a restart and after a rotation, until their epoch is retired', async () => {
    let { signer, kek, epochs } = await open();
    const dek = new Uint8Array(randomBytes(32));
    const leaseId = newLeaseId();
    const lease = await issueLease(epochs, leaseId, new Date(Date.now() + 600_000), dek.slice());
    expect(decodeEnvelope(lease.wrappedDek)).toMatchObject({ provider: 'pkcs11', epoch: 1 });
    expect(Buffer.from(lease.wrappedDek, 'base64url').includes(Buffer.from(dek))).toBe(false);
    expect((await unwrapLease(epochs, leaseId, lease.wrappedDek)).dek).toEqual(dek);
    // Bound to its lease: another lease id, or any flipped bit, does not unwrap.
    await expect(unwrapLease(epochs, newLeaseId(), lease.wrappedDek)).rejects.toThrow(/does not authenticate/);
    const raw = Buffer.from(lease.wrappedDek, 'base64url');
    raw[raw.length - 3]! ^= 1;
    await expect(unwrapLease(epochs, leaseId, raw.toString('base64url'))).rejects.toMatchObject({
      code: 'unwrap_failed',
    });

    // Restart: a new process-worth of providers over the same state and token.
    await signer.close();
    kek.close();
    ({ signer, kek, epochs } = await open());
    try {
      expect((await unwrapLease(epochs, leaseId, lease.wrappedDek)).dek).toEqual(dek);

      const e2 = await epochs.rotate('admin');
      expect(e2).toMatchObject({ epoch: 2, kek_provider: 'pkcs11', status: 'current' });
      expect(e2.kek_id).not.toBe(epochs.get(1)!.kek_id);
      expect((await unwrapLease(epochs, leaseId, lease.wrappedDek)).dek).toEqual(dek); // epoch 1 still active
      const dek2 = new Uint8Array(randomBytes(32));
      const id2 = newLeaseId();
      const lease2 = await issueLease(epochs, id2, new Date(Date.now() + 600_000), dek2.slice());
      expect(lease2.epoch).toBe(2);

      // Retiring epoch 1 destroys its key in the token: its leases are gone, epoch 2's are not.
      const kek1 = epochs.get(1)!.kek_id;
      await epochs.rotate('admin', 2);
      await expect(unwrapLease(epochs, leaseId, lease.wrappedDek)).rejects.toThrow(/retired/);
      await expect(
        kek.unwrap(kek1, Buffer.from(lease.wrappedDek, 'base64url').subarray(14), { leaseId, epoch: 1, expires: 0 }),
      ).rejects.toMatchObject({ code: 'kek_retired' });
      expect((await unwrapLease(epochs, id2, lease2.wrappedDek)).dek).toEqual(dek2);
      expect(verifyEpochChain(epochs.list(), publicKey)).toEqual([]);
      expect(anchored).toEqual([1, 2, 3]);
    } finally {
      await signer.close();
      kek.close();
    }
  });

  it('the KEK never leaves the token: its value cannot be read nor wrapped out', async () => {
    const kek = Pkcs11KekProvider.open({ uri: tok.uri('any') });
    try {
      const kekId = await kek.create(99);
      const label = kekId.slice('pkcs11:object='.length);
      const { token } = kek;
      const p = token.p;
      await token.withSession((s) => {
        const [h] = token.findAll(s, [{ type: p.CKA_LABEL, value: label }]);
        expect(h).toBeDefined();
        const attrs = token.lib.C_GetAttributeValue(s.handle, h!, [
          { type: p.CKA_EXTRACTABLE },
          { type: p.CKA_SENSITIVE },
          { type: p.CKA_NEVER_EXTRACTABLE },
        ]);
        expect(attrs.map((a) => a.value[0])).toEqual([0, 1, 1]);
        expect(() => token.lib.C_GetAttributeValue(s.handle, h!, [{ type: p.CKA_VALUE }])).toThrow(
          /CKR_ATTRIBUTE_SENSITIVE/,
        );
        // A wrapping key of our own, allowed to wrap: the token still refuses to export the KEK.
        const wrapper = token.lib.C_GenerateKey(s.handle, { mechanism: p.CKM_AES_KEY_GEN }, [
          { type: p.CKA_VALUE_LEN, value: 32 },
          { type: p.CKA_WRAP, value: true },
          { type: p.CKA_TOKEN, value: false },
        ]);
        expect(() =>
          token.lib.C_WrapKey(s.handle, { mechanism: p.CKM_AES_KEY_WRAP_PAD }, wrapper, h!, Buffer.alloc(128)),
        ).toThrow(/CKR_KEY_UNEXTRACTABLE/);
        // …while a key that is extractable does wrap (the refusal is the KEK's attributes, not the mechanism).
        const loose = token.lib.C_GenerateKey(s.handle, { mechanism: p.CKM_AES_KEY_GEN }, [
          { type: p.CKA_VALUE_LEN, value: 32 },
          { type: p.CKA_EXTRACTABLE, value: true },
          { type: p.CKA_TOKEN, value: false },
        ]);
        expect(
          token.lib.C_WrapKey(s.handle, { mechanism: p.CKM_AES_KEY_WRAP_PAD }, wrapper, loose, Buffer.alloc(128))
            .length,
        ).toBe(40);
      });
      await kek.retire(kekId);
      await expect(
        kek.wrap(kekId, new Uint8Array(32), { leaseId: newLeaseId(), epoch: 99, expires: 1 }),
      ).rejects.toBeInstanceOf(KekError);
    } finally {
      kek.close();
    }
  });

  it('a session the token drops fails one sign, then a fresh session signs', async () => {
    const signer = await Pkcs11Signer.open({ uri: tok.uri('control'), name: 'stele-control' });
    try {
      const msg = new TextEncoder().encode('hello');
      await signer.sign(msg);
      // Close the pooled session behind the pool's back, as a token reset would.
      await signer.token.withSession((s) => signer.token.lib.C_CloseSession(s.handle));
      await expect(signer.sign(msg)).rejects.toThrow(/CKR_SESSION_HANDLE_INVALID/);
      const opened = signer.token.stats.sessionsOpened;
      const sig = await signer.sign(msg);
      expect(sig).toHaveLength(64);
      expect(signer.token.stats.sessionsOpened).toBe(opened + 1);
      expect(Buffer.from(readPublicKeyNow(signer))).toEqual(Buffer.from(signer.publicKey));
    } finally {
      signer.close();
    }
  });
});

function readPublicKeyNow(signer: Pkcs11Signer): Uint8Array {
  return signer.token.withSessionSync((s) => readPublicKey(signer.token, s, signer.uri));
}
