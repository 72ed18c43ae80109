// S3ObjectStore against a real S3 implementation that enforces conditional PUTs: Ceph's
// RADOS Gateway on a one-node cluster (test/helpers/rgw.ts). Nothing here is emulated: the
// 412s come from the gateway, and concurrent writers race on one key for real.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../../src/store/s3.js';
import { ImmutableConflictError } from '../../src/store/store.js';
import { type RgwServer, startRgw } from '../helpers/rgw.js';

let rgw: RgwServer;

beforeAll(async () => {
  rgw = await startRgw();
}, 180_000);
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

describe('S3ObjectStore on Ceph RGW: create-if-absent', () => {
  it('identical bytes count as created, different bytes are refused (ImmutableConflictError) and never overwrite', async () => {
    const store = makeStore();
    const a = bytes(64, 1);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]); // RGW answers 412; read back, identical
    expect(store.stats.puts).toBe(2);
    expect(store.stats.gets).toBe(1);
    await expect(store.createAll([{ key: 'tile/0/000.p/2', data: bytes(64, 2) }])).rejects.toBeInstanceOf(ImmutableConflictError);
    expect(await store.get('tile/0/000.p/2')).toEqual(a);
  });

  it('20 writers creating one key with different bytes: exactly one wins, the rest are refused, the object holds the winner', async () => {
    const prefix = `race-${randomBytes(4).toString('hex')}/`;
    const stores = Array.from({ length: 20 }, () => makeStore(prefix));
    const results = await Promise.allSettled(stores.map((s, i) => s.createAll([{ key: 'tile/entries/000', data: bytes(100, i + 1) }])));
    const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ImmutableConflictError);
    expect(await stores[0]!.get('tile/entries/000')).toEqual(bytes(100, won[0]! + 1));
    for (const s of stores) s.client.destroy();
  });
});
