// S3ObjectStore against a real S3 implementation that enforces conditional PUTs: Ceph's
// RADOS Gateway on a one-node cluster (test/helpers/rgw.ts). Nothing here is emulated: the
// 412s come from the gateway, and concurrent writers race on one key for real.
import { randomBytes } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { gunzipSync } from 'node:zlib';
import { encodeBundle } from '../../src/core/bundle.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../../src/store/s3.js';
import { ImmutableConflictError, VersionConflictError } from '../../src/store/store.js';
import { type RgwServer, startRgw } from '../helpers/rgw.js';

let rgw: RgwServer;

beforeAll(async () => {
  rgw = await startRgw();
}, 720_000); // may wait for another file's cluster (one per machine)
afterAll(async () => {
  await rgw?.close();
});

const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

/** A store with its own client (its own connections), under `prefix` (default: a fresh one). */
function makeStore(prefix = `t-${randomBytes(4).toString('hex')}/`): S3ObjectStore {
  return new S3ObjectStore({
    bucket: rgw.bucket,
    endpoint: rgw.endpoint,
    region: rgw.region,
    forcePathStyle: true,
    credentials: rgw.credentials,
    prefix,
  });
}

describe('S3ObjectStore on Ceph RGW: record bundles stored compressed', () => {
  it('are stored gzip with Content-Encoding: gzip (what S3 and CloudFront send), read back as content, re-created as the same object', async () => {
    const prefix = `gz-${randomBytes(4).toString('hex')}/`;
    const store = makeStore(prefix);
    const content = encodeBundle(
      Array.from({ length: 40 }, (_, i) => Buffer.from(`{"digest":"${'ab'.repeat(32)}","n":${i}}`)),
    );
    const key = 'tile/records/000.p/40';
    await store.createAll([
      { key, data: content },
      { key: 'tile/entries/000.p/1', data: bytes(34, 3) },
    ]);
    const raw = await store.client.send(new GetObjectCommand({ Bucket: rgw.bucket, Key: `${prefix}${key}` }));
    expect(raw.ContentEncoding).toBe('gzip');
    const stored = await raw.Body!.transformToByteArray();
    expect(stored.length).toBeLessThan(content.length / 3);
    expect(gunzipSync(stored).equals(Buffer.from(content))).toBe(true);
    expect(Buffer.from((await store.get(key))!).equals(Buffer.from(content))).toBe(true);
    await store.createAll([{ key, data: content }]); // RGW's 412, then the same content: created
    const entries = await store.client.send(
      new GetObjectCommand({ Bucket: rgw.bucket, Key: `${prefix}tile/entries/000.p/1` }),
    );
    expect(entries.ContentEncoding).toBeUndefined();
    store.client.destroy();
  });
});

describe('S3ObjectStore on Ceph RGW: create-if-absent', () => {
  it('identical bytes count as created, different bytes are refused (ImmutableConflictError) and never overwrite', async () => {
    const store = makeStore();
    const a = bytes(64, 1);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]); // RGW answers 412; read back, identical
    expect(store.stats.puts).toBe(2);
    expect(store.stats.gets).toBe(1);
    await expect(store.createAll([{ key: 'tile/0/000.p/2', data: bytes(64, 2) }])).rejects.toBeInstanceOf(
      ImmutableConflictError,
    );
    expect(await store.get('tile/0/000.p/2')).toEqual(a);
  });

  it('20 writers creating one key with different bytes: exactly one wins, the rest are refused, the object holds the winner', async () => {
    const prefix = `race-${randomBytes(4).toString('hex')}/`;
    const stores = Array.from({ length: 20 }, () => makeStore(prefix));
    const results = await Promise.allSettled(
      stores.map((s, i) => s.createAll([{ key: 'tile/entries/000', data: bytes(100, i + 1) }])),
    );
    const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ImmutableConflictError);
    expect(await stores[0]!.get('tile/entries/000')).toEqual(bytes(100, won[0]! + 1));
    for (const s of stores) s.client.destroy();
  });
});

describe('S3ObjectStore on Ceph RGW: compare-and-swap on the ETag', () => {
  it('RGW 16 refuses the quoted ETag in If-Match (AWS accepts it) and takes the bare one: the probe finds that form', async () => {
    const key = `quirk-${randomBytes(4).toString('hex')}`;
    const put = (IfMatch?: string) =>
      rgw.client.send(
        new PutObjectCommand({
          Bucket: rgw.bucket,
          Key: key,
          Body: 'x',
          ...(IfMatch ? { IfMatch } : { IfNoneMatch: '*' }),
        }),
      );
    const { ETag } = await put();
    expect(ETag).toMatch(/^"[0-9a-f]{32}"$/);
    await expect(put(ETag)).rejects.toMatchObject({ $metadata: { httpStatusCode: 412 } });
    await put(ETag!.slice(1, -1));

    const store = makeStore();
    expect(store.ifMatchForm).toBe('quoted');
    expect(await store.probeConditionalWrites()).toEqual({ ifNoneMatch: true, ifMatch: true, ifMatchForm: 'bare' });
    expect(store.ifMatchForm).toBe('bare');
  });

  it('swap replaces only the expected version; stale and absent versions get real 412s (VersionConflictError); the quoted form is corrected once', async () => {
    const store = makeStore(); // not probed: starts with the quoted form
    const v1 = await store.swap('checkpoint', Buffer.from('one'), null);
    await expect(store.swap('checkpoint', Buffer.from('other'), null)).rejects.toBeInstanceOf(VersionConflictError);
    const puts = store.stats.puts;
    const v2 = await store.swap('checkpoint', Buffer.from('two'), v1); // quoted: 412; current is v1, so bare: 200
    expect(store.stats.puts - puts).toBe(2);
    expect(store.ifMatchForm).toBe('bare');
    expect(v2).not.toBe(v1);
    await expect(store.swap('checkpoint', Buffer.from('three'), v1)).rejects.toBeInstanceOf(VersionConflictError);
    await expect(store.swap('absent', Buffer.from('x'), v1)).rejects.toBeInstanceOf(VersionConflictError);
    const v3 = await store.swap('checkpoint', Buffer.from('three'), v2);
    expect(Buffer.from((await store.get('checkpoint'))!).toString()).toBe('three');
    expect((await store.getVersioned('checkpoint'))?.version).toBe(v3);
  });

  for (const form of ['bare', 'quoted'] as const) {
    it(`20 writers swapping from one version (If-Match starting ${form}): exactly one wins, the others conflict`, async () => {
      const prefix = `cas-${randomBytes(4).toString('hex')}/`;
      const stores = Array.from({ length: 20 }, () => makeStore(prefix));
      for (const s of stores) s.ifMatchForm = form;
      const v0 = await stores[0]!.swap('lock.json', Buffer.from('start'), null);
      const results = await Promise.allSettled(
        stores.map((s, i) => s.swap('lock.json', Buffer.from(`writer ${i}`), v0)),
      );
      const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(VersionConflictError);
      expect(Buffer.from((await stores[0]!.get('lock.json'))!).toString()).toBe(`writer ${won[0]}`);
      for (const s of stores) s.client.destroy();
    });
  }
});
