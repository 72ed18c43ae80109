// S3ObjectStore against a real S3-protocol server on loopback (s3rver). s3rver does not
// enforce conditional PUTs; the probe below proves it, and ConditionalS3Shim
// (test/helpers/s3-server.ts) answers as AWS S3 does (the quoted If-Match form) and injects
// the faults a real server cannot be made to give on demand (409, 503, a lost response).
// Conditional writes for real — racing creators and compare-and-swaps, RGW's bare If-Match
// form — are tested on Ceph RGW in test/s3/rgw-store.test.ts.
import { randomBytes } from 'node:crypto';
import { HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PartialSweeper, S3ObjectStore, type S3StoreOptions } from '../../src/store/s3.js';
import { partialTilesAt } from '../../src/core/tiles.js';
import { ImmutableConflictError, VersionConflictError } from '../../src/store/store.js';
import { tilePath } from '../../src/core/tiles.js';
import { readTileBytes } from '../../src/read/tilestore.js';
import { ConditionalS3Shim, type S3Server, plainClient, startS3Server } from '../helpers/s3-server.js';

let server: S3Server;
let plain: S3Client;

beforeAll(async () => {
  server = await startS3Server();
  plain = plainClient(server);
});
afterAll(async () => {
  plain?.destroy();
  await server?.close();
});

const prefix = () => `t-${randomBytes(4).toString('hex')}/`;
const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

function makeStore(o: Partial<S3StoreOptions> & { shim?: ConditionalS3Shim } = {}): S3ObjectStore {
  const { shim, ...rest } = o;
  return new S3ObjectStore({
    bucket: server.bucket,
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: server.credentials,
    prefix: prefix(),
    ...(shim ? { clientConfig: { requestHandler: shim } } : {}),
    ...rest,
  });
}

async function head(store: S3ObjectStore, key: string) {
  return plain.send(new HeadObjectCommand({ Bucket: server.bucket, Key: store.prefix + key }));
}

describe('S3ObjectStore on s3rver (loopback)', () => {
  it('writes tiles and checkpoints under its prefix with the Content-Type and Cache-Control of docs/design.md §1.2', async () => {
    const store = makeStore();
    const tile = bytes(3 * 32, 7);
    await store.createAll([
      { key: 'tile/0/000.p/3', data: tile },
      { key: 'tile/entries/000.p/3', data: bytes(10, 1) },
    ]);
    const v = await store.swap('checkpoint', Buffer.from('origin\n3\nroot\n'), null);
    expect(v).toMatch(/^".+"$/);

    const t = await head(store, 'tile/0/000.p/3');
    expect(t.ContentType).toBe('application/octet-stream');
    expect(t.CacheControl).toBe('public, max-age=31536000, immutable');
    const c = await head(store, 'checkpoint');
    expect(c.ContentType).toBe('text/plain; charset=utf-8');
    expect(c.CacheControl).toBe('no-cache');

    expect(await store.get('tile/0/000.p/3')).toEqual(tile);
    expect(await store.get('tile/0/999')).toBeNull();
    expect((await store.getVersioned('checkpoint'))?.version).toBe(v);
    expect(store.stats.puts).toBe(3);
    expect(store.stats.gets).toBe(3);
    await store.delete('checkpoint');
    expect(await store.get('checkpoint')).toBeNull();
    expect(store.stats.deletes).toBe(1);
  });

  it('uploads a batch concurrently, never more than `concurrency` PUTs at once', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket, 15);
    const store = makeStore({ shim, concurrency: 6 });
    const objects = Array.from({ length: 60 }, (_, i) => ({
      key: tilePath({ kind: 0, index: i, width: 256 }),
      data: bytes(32, i),
    }));
    await store.createAll(objects);
    expect(shim.maxInFlight).toBe(6);
    expect(store.stats.puts).toBe(60);
    expect(await store.get(objects[59]!.key)).toEqual(objects[59]!.data);
  });

  it('s3rver IGNORES If-None-Match and If-Match on PUT (probe): conditional writes are tested through ConditionalS3Shim, compare-and-swap through the DynamoDB lock', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket);
    shim.emulateConditions = false; // straight to s3rver
    const store = makeStore({ shim });
    const support = await store.probeConditionalWrites();
    // The store sent the conditions…
    expect(shim.puts.map((p) => p.ifNoneMatch ?? p.ifMatch)).toEqual(['*', '*', '"00000000000000000000000000000000"']);
    // …and s3rver applied both PUTs anyway. Real S3 (and MinIO, R2) answer 412 here.
    expect(support).toEqual({ ifNoneMatch: false, ifMatch: false });

    // With the shim answering as S3 does, the same probe passes.
    const emulated = makeStore({ shim: new ConditionalS3Shim(plain, server.bucket) });
    expect(await emulated.probeConditionalWrites()).toEqual({
      ifNoneMatch: true,
      ifMatch: true,
      ifMatchForm: 'quoted',
    });
  });
});

describe('S3ObjectStore conditional writes (S3 semantics via ConditionalS3Shim over s3rver)', () => {
  it('create-if-absent: identical bytes on 412 count as created, different bytes throw ImmutableConflictError', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket);
    const store = makeStore({ shim });
    const a = bytes(64, 1);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]);
    await store.createAll([{ key: 'tile/0/000.p/2', data: a }]); // 412, read back, identical
    expect(shim.puts.every((p) => p.ifNoneMatch === '*')).toBe(true);
    await expect(store.createAll([{ key: 'tile/0/000.p/2', data: bytes(64, 2) }])).rejects.toBeInstanceOf(
      ImmutableConflictError,
    );
    expect(await store.get('tile/0/000.p/2')).toEqual(a); // never overwritten
  });

  it('swap uses If-Match on the ETag (If-None-Match: * to create) and maps 412 to VersionConflictError', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket);
    const store = makeStore({ shim });
    const v1 = await store.swap('checkpoint', Buffer.from('one'), null);
    await expect(store.swap('checkpoint', Buffer.from('other'), null)).rejects.toBeInstanceOf(VersionConflictError);
    const v2 = await store.swap('checkpoint', Buffer.from('two'), v1);
    expect(v2).not.toBe(v1);
    await expect(store.swap('checkpoint', Buffer.from('three'), v1)).rejects.toBeInstanceOf(VersionConflictError);
    await expect(store.swap('absent', Buffer.from('x'), v1)).rejects.toBeInstanceOf(VersionConflictError);
    expect(Buffer.from((await store.get('checkpoint'))!).toString()).toBe('two');
    expect(
      shim.puts.filter((p) => p.key.endsWith('checkpoint')).map((p) => p.ifMatch ?? `none-match ${p.ifNoneMatch}`),
    ).toEqual(['none-match *', 'none-match *', v1, v1]);
  });

  it('a PUT whose response was lost is retried by the SDK and resolved by reading back (create and swap)', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket);
    const store = makeStore({ shim });
    shim.faults.push({ status: 500, code: 'InternalError', afterLanding: true });
    await store.createAll([{ key: 'tile/1/000.p/1', data: bytes(32, 9) }]);
    expect(store.stats.retries).toBeGreaterThanOrEqual(1);

    const v1 = await store.swap('checkpoint', Buffer.from('a'), null);
    shim.faults.push({ status: 500, code: 'InternalError', afterLanding: true });
    const v2 = await store.swap('checkpoint', Buffer.from('b'), v1); // landed; retry gets 412; bytes are ours
    expect((await store.getVersioned('checkpoint'))?.version).toBe(v2);
  });

  it('retries 409 ConditionalRequestConflict with backoff, and throttling/5xx through the SDK strategy', async () => {
    const shim = new ConditionalS3Shim(plain, server.bucket);
    const store = makeStore({ shim });
    shim.faults.push(
      { status: 409, code: 'ConditionalRequestConflict' },
      { status: 409, code: 'ConditionalRequestConflict' },
    );
    await store.createAll([{ key: 'tile/2/000.p/1', data: bytes(32, 3) }]);
    shim.faults.push({ status: 503, code: 'SlowDown' }, { status: 500, code: 'InternalError' });
    await store.swap('checkpoint', Buffer.from('c'), null);
    expect(store.stats.retries).toBe(4);
    expect(await store.get('tile/2/000.p/1')).toEqual(bytes(32, 3));

    const impatient = makeStore({ shim, conflictRetries: 1 });
    shim.faults.push(
      { status: 409, code: 'ConditionalRequestConflict' },
      { status: 409, code: 'ConditionalRequestConflict' },
    );
    await expect(impatient.createAll([{ key: 'tile/0/000', data: bytes(32, 1) }])).rejects.toMatchObject({
      name: 'ConditionalRequestConflict',
    });
  });
});

describe('sweepPartials', () => {
  it('deletes the partials of tiles whose full tile exists, keeps the rest, and readers fall back to the full tile', async () => {
    const store = makeStore();
    const full = new Uint8Array(256 * 32).map((_, i) => i % 251);
    await store.createAll([
      { key: 'tile/0/000.p/5', data: full.subarray(0, 5 * 32) },
      { key: 'tile/0/000.p/200', data: full.subarray(0, 200 * 32) },
      { key: 'tile/0/000', data: full },
      { key: 'tile/entries/000.p/5', data: bytes(10, 1) },
      { key: 'tile/entries/000', data: bytes(20, 1) },
      { key: 'tile/records/000.p/7', data: bytes(10, 2) }, // its full bundle is missing: kept
      { key: 'tile/0/001.p/3', data: bytes(96, 4) }, // not full at size 300: untouched
    ]);
    const r = await store.sweepPartials(300);
    expect(r).toEqual({ tiles: 3, deleted: 3, missingFull: 1 });
    expect(await store.get('tile/0/000.p/5')).toBeNull();
    expect(await store.get('tile/entries/000.p/5')).toBeNull();
    expect(await store.get('tile/records/000.p/7')).not.toBeNull();
    expect(await store.get('tile/0/001.p/3')).not.toBeNull();
    expect(await readTileBytes(store, 0, 0, 5)).toEqual(full.subarray(0, 5 * 32));
    // A later sweep from the previous mark looks only at tiles completed since.
    expect((await store.sweepPartials(600, 300)).tiles).toBe(3);
    expect(store.stats.lists).toBe(6);
  });
});

describe('PartialSweeper', () => {
  it("deletes the partials of published sizes by key, finds earlier processes' partials with one LIST sweep, and advances the mark", async () => {
    const store = makeStore();
    let mark = 0;
    const sweepMark = { get: async () => mark, advance: async (n: number) => void (mark = Math.max(mark, n)) };
    const write = (size: number) =>
      store.createAll(
        partialTilesAt(size).map((t) => ({
          key: tilePath(t),
          data: bytes(typeof t.kind === 'number' ? t.width * 32 : 4, size & 0xff),
        })),
      );
    const full = (kind: number | 'entries' | 'records', index: number) => ({
      key: tilePath({ kind, index, width: 256 }),
      data: bytes(32, 0),
    });
    const listPartials = async () => {
      const res = await plain.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: `${store.prefix}tile/` }));
      return (res.Contents ?? [])
        .map((o) => o.Key!.slice(store.prefix.length))
        .filter((k) => k.includes('.p/'))
        .sort();
    };

    // A previous process published sizes 1, 5 and 100, then stopped.
    for (const size of [1, 5, 100]) await write(size);
    const sweeper = await PartialSweeper.start(store, sweepMark, 100, (e) => {
      throw e;
    });
    sweeper.published(100);
    // This process publishes 256 (tile 0 full) and 300.
    await store.createAll([full(0, 0), full('entries', 0), full('records', 0)]);
    await write(256);
    sweeper.published(256);
    await write(300);
    sweeper.published(300);
    await sweeper.idle();
    expect(store.stats.lists).toBe(3); // one catch-up LIST per kind for tile 0, once
    expect(mark).toBe(256);
    expect(await listPartials()).toEqual([
      'tile/0/001.p/44',
      'tile/1/000.p/1',
      'tile/entries/001.p/44',
      'tile/records/001.p/44',
    ]);

    // Tile 1 completes at 520: its partials go by key, the level-1 partial stays (its tile is far from full).
    await store.createAll([full(0, 1), full('entries', 1), full('records', 1)]);
    await write(520);
    sweeper.published(520);
    await sweeper.idle();
    expect(store.stats.lists).toBe(3);
    expect(mark).toBe(512);
    expect(await listPartials()).toEqual([
      'tile/0/002.p/8',
      'tile/1/000.p/1',
      'tile/1/000.p/2',
      'tile/entries/002.p/8',
      'tile/records/002.p/8',
    ]);
    expect(sweeper.stats).toEqual({ deleted: 12, listSweeps: 1 });
  });
});
