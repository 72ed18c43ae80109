// Control-plane parts without HTTP: configuration checks, lease wrapping (a known DEK in,
// the same DEK out, before and after rotations), the epoch chain, the audit log's
// durability and replay, and the AWS KMS KEK adapter against a wire-protocol stand-in.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createKmsClient } from '../../src/aws/kms.js';
import { AuditLog } from '../../src/control/audit.js';
import { ControlConfigError, parseControlConfig } from '../../src/control/config.js';
import { type EpochRecord, KeyEpochs, verifyEpochChain } from '../../src/control/epochs.js';
import { AwsKmsKekProvider, type KekProvider, LocalKekProvider } from '../../src/keys/kek.js';
import { decodeEnvelope, encodeEnvelope, issueLease, newLeaseId, unwrapLease } from '../../src/control/leases.js';
import { AUDIT_DOMAIN, ControlSigner, canonicalJson, verifySigned } from '../../src/control/signing.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { scratchDir } from '../helpers/tmp.js';

const silent = pino({ level: 'silent' });
const tmp = (p: string) => scratchDir(`stele-${p}-`);
const OIDC = { issuer: 'https://idp.example.com', audience: 'https://stele.example.com/v1' };

describe('control configuration', () => {
  it('has safe defaults and refuses none, HS* and plain-http issuers', () => {
    const c = parseControlConfig({ oidc: OIDC }, '/data');
    expect(c.oidc.algorithms).toEqual(['RS256', 'PS256', 'ES256', 'EdDSA']);
    expect(c.oidc.tokenTypes).toEqual(['at+jwt', 'application/at+jwt']);
    expect(c.oidc.mfaRoles).toEqual(['admin', 'analyst']);
    expect(c.lease).toMatchObject({ ttlDefaultS: 300, ttlMinS: 30, ttlMaxS: 3600 });
    expect(c.policyDir).toBe('/data/policy');
    expect(c.roles.service).toEqual(['policy.evaluate', 'access.lease', 'keys.read']);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{}, /needs an OIDC issuer/],
      [{ oidc: { issuer: 'https://idp' } }, /audience is required/],
      [{ oidc: { ...OIDC, algorithms: ['none'] } }, /none is not allowed/],
      [{ oidc: { ...OIDC, algorithms: ['RS256', 'HS256'] } }, /HS256 is not allowed/],
      [{ oidc: { ...OIDC, issuer: 'http://idp.example.com' } }, /https/],
      [{ oidc: { ...OIDC, typo: 1 } }, /unknown setting typo/],
      [{ oidc: OIDC, lease: { ttl_min_s: 600, ttl_default_s: 300 } }, /ttl_min_s ≤ ttl_default_s/],
      [{ oidc: OIDC, roles: { admin: ['keys.destroy'] } }, /list of operations/],
      [{ oidc: OIDC, kek: { provider: 'vault' } }, /local or aws-kms/],
    ];
    for (const [raw, msg] of bad) expect(() => parseControlConfig(raw, '/data'), JSON.stringify(raw)).toThrow(msg);
    expect(() => parseControlConfig({}, '/data')).toThrow(ControlConfigError);
    expect(parseControlConfig({ oidc: { ...OIDC, issuer: 'http://127.0.0.1:9000' } }, '/d').oidc.issuer).toBe(
      'http://127.0.0.1:9000',
    );
  });
});

async function epochsOver(kek: KekProvider, dir = tmp('epochs')) {
  const anchored: { epoch: number; hash: string }[] = [];
  const signer = await ControlSigner.open(join(dir, 'control.key'), 'stele-control');
  const store = new FsObjectStore(join(dir, 'state'), { fsync: false });
  const anchor = async (r: EpochRecord, hash: string) => {
    anchored.push({ epoch: r.epoch, hash });
    return `led_${anchored.length}_000000000000`;
  };
  const epochs = await KeyEpochs.open(store, signer, kek, anchor, silent);
  return { epochs, signer, store, anchored, dir, anchor };
}

describe('leases (local demo KEK)', () => {
  it('unwraps to the very DEK that was wrapped, with its epoch KEK, before and after rotations', async () => {
    const dir = tmp('lease');
    const kek = new LocalKekProvider(join(dir, 'keks'));
    const { epochs } = await epochsOver(kek, dir);
    const dek = new Uint8Array(randomBytes(32));
    const leaseId = newLeaseId();
    const lease = await issueLease(epochs, leaseId, new Date(Date.now() + 600_000), dek.slice());
    expect(lease.epoch).toBe(1);
    expect(decodeEnvelope(lease.wrappedDek)).toMatchObject({ provider: 'local', epoch: 1 });
    expect(Buffer.from(lease.wrappedDek, 'base64url').includes(Buffer.from(dek))).toBe(false);
    expect((await unwrapLease(epochs, leaseId, lease.wrappedDek)).dek).toEqual(dek);

    await epochs.rotate('admin');
    await epochs.rotate('admin');
    expect(epochs.current().epoch).toBe(3);
    expect((await unwrapLease(epochs, leaseId, lease.wrappedDek)).dek).toEqual(dek);
    const dek3 = new Uint8Array(randomBytes(32));
    const id3 = newLeaseId();
    const lease3 = await issueLease(epochs, id3, new Date(Date.now() + 600_000), dek3.slice());
    expect(lease3.epoch).toBe(3);
    expect((await unwrapLease(epochs, id3, lease3.wrappedDek)).dek).toEqual(dek3);

    // Every bit of the envelope is bound: header (epoch, expiry) and ciphertext.
    const raw = Buffer.from(lease.wrappedDek, 'base64url');
    for (const i of [5, 13, 20, raw.length - 1]) {
      const t = Buffer.from(raw);
      t[i]! ^= 1;
      await expect(unwrapLease(epochs, leaseId, t.toString('base64url'))).rejects.toThrow();
    }
    await expect(unwrapLease(epochs, newLeaseId(), lease.wrappedDek)).rejects.toThrow(/does not authenticate/);
    // Expiry is enforced unless explicitly allowed (forensics).
    await expect(unwrapLease(epochs, leaseId, lease.wrappedDek, { now: Date.now() + 601_000 })).rejects.toThrow(
      /expired/,
    );
    expect(
      (await unwrapLease(epochs, leaseId, lease.wrappedDek, { now: Date.now() + 601_000, allowExpired: true })).dek,
    ).toEqual(dek);

    // Retiring epoch 1 destroys its KEK file; its leases no longer unwrap, epoch 3's still do.
    const files = readdirSync(join(dir, 'keks')).length;
    await epochs.rotate('admin', 2);
    expect(readdirSync(join(dir, 'keks')).length).toBe(files); // one destroyed, one created
    await expect(unwrapLease(epochs, leaseId, lease.wrappedDek)).rejects.toThrow(/retired/);
    expect((await unwrapLease(epochs, id3, lease3.wrappedDek)).dek).toEqual(dek3);
    for (const f of readdirSync(join(dir, 'keks'))) expect(statSync(join(dir, 'keks', f)).mode & 0o777).toBe(0o600);
  });

  it('keeps the epoch chain signed and linked across restarts; tampering is refused at start', async () => {
    const dir = tmp('chain');
    const kek = new LocalKekProvider(join(dir, 'keks'));
    const a = await epochsOver(kek, dir);
    await a.epochs.rotate('alice');
    await a.epochs.rotate('bob', 2);
    expect(a.anchored.map((x) => x.epoch)).toEqual([1, 2, 3]);
    const list = a.epochs.list();
    expect(verifyEpochChain(list, a.signer.publicKey)).toEqual([]);
    expect(list[1]!.previous_record_hash).toBe(list[0]!.record_hash);
    expect(list.map((e) => e.ledger_entry_id)).toEqual([
      'led_1_000000000000',
      'led_2_000000000000',
      'led_3_000000000000',
    ]);
    expect(a.anchored.map((x) => x.hash)).toEqual(list.map((e) => e.record_hash));

    // Restart: same chain, nothing re-anchored, no new epoch.
    const b = await KeyEpochs.open(a.store, a.signer, kek, a.anchor, silent);
    expect(b.list()).toEqual(list);
    expect(a.anchored.length).toBe(3);

    // Tamper with the stored chain: the next start refuses it.
    const path = join(dir, 'state', 'key-epochs.json');
    const stored = JSON.parse(readFileSync(path, 'utf8'));
    stored[1].record.created_by = 'mallory';
    writeFileSync(path, JSON.stringify(stored));
    await expect(
      KeyEpochs.open(new FsObjectStore(join(dir, 'state')), a.signer, kek, a.anchor, silent),
    ).rejects.toThrow(/epoch 2: signature does not verify/);
  });

  it('anchors at start a rotation that was stored but not yet anchored (crash in between)', async () => {
    const dir = tmp('crash');
    const kek = new LocalKekProvider(join(dir, 'keks'));
    const a = await epochsOver(kek, dir);
    const path = join(dir, 'state', 'key-epochs.json');
    const stored = JSON.parse(readFileSync(path, 'utf8'));
    stored[0].ledger_entry_id = null;
    writeFileSync(path, JSON.stringify(stored));
    const b = await KeyEpochs.open(new FsObjectStore(join(dir, 'state')), a.signer, kek, a.anchor, silent);
    expect(b.list()[0]!.ledger_entry_id).toBe('led_2_000000000000');
  });
});

describe('audit log', () => {
  it('numbers events without gaps across restarts, cuts a torn last line, and replays old events from disk', async () => {
    const dir = tmp('audit');
    const signer = await ControlSigner.open(join(dir, 'control.key'), 'stele-control');
    const o = { fsync: false, logger: silent, segmentEvents: 7, ringEvents: 3 };
    const log = await AuditLog.open(join(dir, 'audit'), signer, o);
    const events = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        log.append('policy_evaluation', { i }, 'aa'.repeat(32), `led_${i}_000000000000`),
      ),
    );
    expect(events.map((e) => e.id)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    for (const e of events)
      expect(verifySigned(AUDIT_DOMAIN, e as unknown as Record<string, unknown>, signer.publicKey)).toBe(true);
    expect(readdirSync(join(dir, 'audit')).sort()).toEqual([
      'seg-000000000001.jsonl',
      'seg-000000000008.jsonl',
      'seg-000000000015.jsonl',
    ]);
    const ids = async (l: AuditLog, after: number) => {
      const out: number[] = [];
      for await (const e of l.since(after)) out.push(e.id);
      return out;
    };
    expect(await ids(log, 0)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await ids(log, 9)).toEqual(Array.from({ length: 11 }, (_, i) => i + 10));
    await log.close();

    // A crash mid-write leaves half a line: it is cut off, numbering continues after the last whole event.
    appendFileSync(join(dir, 'audit', 'seg-000000000015.jsonl'), '{"v":1,"id":21,"type":"pol');
    const again = await AuditLog.open(join(dir, 'audit'), signer, o);
    expect(again.lastId).toBe(20);
    const e21 = await again.append('key_epoch', { epoch: 2 }, 'bb'.repeat(32), 'led_21_000000000000');
    expect(e21.id).toBe(21);
    expect(await ids(again, 0)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    const lines = readFileSync(join(dir, 'audit', 'seg-000000000015.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(lines.map((l) => JSON.parse(l).id)).toEqual([15, 16, 17, 18, 19, 20, 21]);
    // Live subscribers see new events once written, in order.
    const seen: number[] = [];
    const unsub = again.subscribe((e) => seen.push(e.id));
    await Promise.all([
      again.append('key_epoch', {}, 'cc'.repeat(32), 'x'),
      again.append('key_epoch', {}, 'cc'.repeat(32), 'y'),
    ]);
    unsub();
    expect(seen).toEqual([22, 23]);
    await again.close();
  });

  it('stores each event as the JSON whose canonical form it signs, whatever the record holds', async () => {
    const dir = tmp('audit-canonical');
    const signer = await ControlSigner.open(join(dir, 'control.key'), 'stele-control');
    const log = await AuditLog.open(join(dir, 'audit'), signer, { fsync: false, logger: silent });
    // Unsorted and non-ASCII keys, escapes, line separators, astral characters, nesting, numbers.
    const record = {
      z: 1,
      a: { é: 'q"\\\u2028', b: [3, -1, 0], '\u{1F600}': true },
      B: 'tab\there',
      '': null,
      n: 1e21,
    };
    const [e] = await Promise.all([
      log.append('policy_evaluation', record, 'dd'.repeat(32), 'led_x'),
      log.append('policy_evaluation', {}, 'ee'.repeat(32), 'led_y'),
    ]);
    expect(verifySigned(AUDIT_DOMAIN, e as unknown as Record<string, unknown>, signer.publicKey)).toBe(true);
    const stored = JSON.parse(
      readFileSync(join(dir, 'audit', 'seg-000000000001.jsonl'), 'utf8').split('\n')[0]!,
    ) as Record<string, unknown>;
    expect(stored).toEqual(e);
    expect(verifySigned(AUDIT_DOMAIN, stored, signer.publicKey)).toBe(true);
    await log.close();
  });
});

describe('control signer', () => {
  it('signs groups on its thread in order; a stopped thread fails what it owed and the next group starts a new one', async () => {
    const signer = await ControlSigner.open(join(tmp('signer'), 'control.key'), 'stele-control');
    const objects = Array.from({ length: 5 }, (_, i) => ({ i, key_id: signer.keyId }));
    const signatures = await signer.signCanonicals(
      AUDIT_DOMAIN,
      objects.map((o) => canonicalJson(o)),
    );
    expect(signatures).toHaveLength(5);
    objects.forEach((o, i) =>
      expect(verifySigned(AUDIT_DOMAIN, { ...o, signature: signatures[i] }, signer.publicKey)).toBe(true),
    );
    // Ed25519 is deterministic: the thread's signature is the one sign() makes on the event loop.
    expect(signatures[0]).toBe(signer.sign(AUDIT_DOMAIN, objects[0]!).signature);

    const owed = expect(signer.signCanonicals(AUDIT_DOMAIN, ['{}'])).rejects.toThrow(/signing thread was stopped/);
    await signer.close();
    await owed;
    const [again] = await signer.signCanonicals(AUDIT_DOMAIN, [canonicalJson(objects[1])]);
    expect(again).toBe(signatures[1]);
    await signer.close();
  });
});

/** A stand-in for AWS KMS speaking its JSON 1.1 wire protocol for CreateKey, DescribeKey, Encrypt, Decrypt and DisableKey. */
async function kmsStandIn() {
  const keys = new Map<string, { key: Buffer; enabled: boolean }>();
  const calls: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const op = String(req.headers['x-amz-target']).replace('TrentService.', '');
      calls.push(op);
      const input = JSON.parse(body || '{}');
      const reply = (status: number, o: unknown, type?: string) => {
        res.writeHead(status, {
          'content-type': 'application/x-amz-json-1.1',
          ...(type ? { 'x-amzn-errortype': type } : {}),
        });
        res.end(JSON.stringify(type ? { __type: type, message: String(o) } : o));
      };
      const ctx = (c: Record<string, string> | undefined) => Buffer.from(canonicalJson(c ?? {}));
      const get = (id: string) => keys.get(id);
      if (op === 'CreateKey') {
        const arn = `arn:aws:kms:eu-west-1:111122223333:key/${randomBytes(8).toString('hex')}`;
        keys.set(arn, { key: randomBytes(32), enabled: true });
        return reply(200, {
          KeyMetadata: {
            Arn: arn,
            KeyId: arn.split('/')[1],
            KeySpec: input.KeySpec,
            KeyUsage: input.KeyUsage,
            KeyState: 'Enabled',
          },
        });
      }
      const k = get(input.KeyId);
      if (!k) return reply(400, 'no such key', 'NotFoundException');
      if (op === 'DescribeKey')
        return reply(200, {
          KeyMetadata: {
            Arn: input.KeyId,
            KeySpec: 'SYMMETRIC_DEFAULT',
            KeyUsage: 'ENCRYPT_DECRYPT',
            KeyState: k.enabled ? 'Enabled' : 'Disabled',
          },
        });
      if (op === 'DisableKey') {
        k.enabled = false;
        return reply(200, {});
      }
      if (!k.enabled) return reply(400, 'key is disabled', 'DisabledException');
      if (op === 'Encrypt') {
        const iv = randomBytes(12);
        const c = createCipheriv('aes-256-gcm', k.key, iv).setAAD(ctx(input.EncryptionContext));
        const ct = Buffer.concat([iv, c.update(Buffer.from(input.Plaintext, 'base64')), c.final(), c.getAuthTag()]);
        return reply(200, { CiphertextBlob: ct.toString('base64'), KeyId: input.KeyId });
      }
      if (op === 'Decrypt') {
        const b = Buffer.from(input.CiphertextBlob, 'base64');
        try {
          const d = createDecipheriv('aes-256-gcm', k.key, b.subarray(0, 12)).setAAD(ctx(input.EncryptionContext));
          d.setAuthTag(b.subarray(b.length - 16));
          const pt = Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]);
          return reply(200, { Plaintext: pt.toString('base64'), KeyId: input.KeyId });
        } catch {
          return reply(400, 'bad ciphertext or context', 'InvalidCiphertextException');
        }
      }
      return reply(400, `unsupported ${op}`, 'UnsupportedOperationException');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('AWS KMS KEK adapter (against a wire-protocol stand-in; real KMS cannot run here)', () => {
  it('creates a key per epoch, wraps with the lease as encryption context, unwraps across rotations, disables on retire', async () => {
    const kms = await kmsStandIn();
    try {
      const client = createKmsClient({
        endpoint: kms.endpoint,
        region: 'eu-west-1',
        credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' },
        maxAttempts: 1,
      });
      const kek = new AwsKmsKekProvider({ client });
      const { epochs } = await epochsOver(kek);
      expect(epochs.current().kek_id).toMatch(/^arn:aws:kms:/);
      const dek = new Uint8Array(randomBytes(32));
      const id = newLeaseId();
      const lease = await issueLease(epochs, id, new Date(Date.now() + 60_000), dek.slice());
      expect(decodeEnvelope(lease.wrappedDek).provider).toBe('aws-kms');
      await epochs.rotate('admin');
      expect((await unwrapLease(epochs, id, lease.wrappedDek)).dek).toEqual(dek);
      // Another lease id means another encryption context: KMS refuses to decrypt.
      await expect(unwrapLease(epochs, newLeaseId(), lease.wrappedDek)).rejects.toThrow(/does not authenticate/);
      // A forged header (later expiry) changes the context too.
      const env = decodeEnvelope(lease.wrappedDek);
      await expect(unwrapLease(epochs, id, encodeEnvelope({ ...env, expires: env.expires + 3600 }))).rejects.toThrow(
        /does not authenticate/,
      );
      await epochs.rotate('admin', 2);
      await expect(unwrapLease(epochs, id, lease.wrappedDek)).rejects.toThrow(/retired/);
      expect(kms.calls).toEqual(expect.arrayContaining(['CreateKey', 'Encrypt', 'Decrypt', 'DisableKey']));
    } finally {
      await kms.close();
    }
  });
});
