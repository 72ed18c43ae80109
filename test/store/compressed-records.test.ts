// Record bundles stored gzip-compressed (docs/design.md §1.2): what the stores keep and read
// back, what the local origin sends with and without Accept-Encoding, what a static copy of
// the stored files gives every reader, a gzip bomb refused everywhere, and a log written
// before compression (plain record bundles) read alike. Real stores on a directory, a real
// server on loopback, raw HTTP for what the wire carries.
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GzippedBundles } from '../../src/api/objects.js';
import { ResponseError, VerificationError } from '../../src/client/errors.js';
import { DirObjectReader, HttpObjectReader } from '../../src/client/objects.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { encodeBundle } from '../../src/core/bundle.js';
import { isGzip, MAX_RECORD_BUNDLE_BYTES } from '../../src/core/stored-records.js';
import { TileFormatError, tilePath } from '../../src/core/tiles.js';
import { LogReader } from '../../src/read/reader.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { ImmutableConflictError } from '../../src/store/store.js';
import { startTestServer } from '../api/server.js';
import { ensureBuilt, Sandbox } from '../helpers/cli.js';
import { type StaticServer, startStaticServer } from '../helpers/explorer-servers.js';
import { decompressInPlace, readContent } from '../helpers/stored-objects.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'compressed.test/log';
const N = 600; // two full bundles and a partial of 88
const digestOf = (i: number) => i.toString(16).padStart(64, '0');
const R0 = tilePath({ kind: 'records', index: 0, width: 256 });
const R2 = tilePath({ kind: 'records', index: 2, width: N - 512 });

/** A gzip stream of `size` zero bytes: tiny, and far beyond any record bundle once expanded. */
const bomb = (size = 4 * MAX_RECORD_BUNDLE_BYTES) => gzipSync(Buffer.alloc(size), { level: 9 });

/** A GET as the wire carries it (no decoding), with the given Accept-Encoding (none if undefined). */
function rawGet(url: string, acceptEncoding?: string) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>(
    (resolve, reject) => {
      const req = httpRequest(url, {
        headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding },
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

/** Every record bundle file under a log's public directory. */
function recordFiles(publicDir: string): string[] {
  const dir = join(publicDir, 'tile', 'records');
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name));
}

/** Every entry of the tree read and authenticated through `source`. */
async function readsEveryEntry(
  source: ConstructorParameters<typeof LogReader>[0],
  head: { size: number; root: Uint8Array },
) {
  const reader = new LogReader(source);
  const records = await reader.records(0, head.size, head);
  expect(records).toHaveLength(head.size);
  expect(JSON.parse(Buffer.from(records[N - 1]!).toString('utf8')).digest).toBe(digestOf(N - 1));
}

let dataDir: string;
let publicDir: string;
let head: { size: number; root: Uint8Array };

beforeAll(async () => {
  dataDir = scratchDir('stele-compressed-');
  publicDir = join(dataDir, 'log');
  const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5, sweepPartials: false });
  for (const wave of [256, 256, N - 512])
    await Promise.all(
      Array.from({ length: wave }, (_, k) =>
        log.sequencer.submit(
          anchorRequest('ledger_anchor', 'Anchored', digestOf(log.sequencer.checkpoint.size + k), {
            artifact: `release-${log.sequencer.checkpoint.size + k}.tgz`,
            scope: 'ci',
          }),
        ),
      ),
    );
  head = { size: log.sequencer.checkpoint.size, root: log.sequencer.checkpoint.root };
  await log.sequencer.close();
}, 120_000);

describe('the stores', () => {
  it('keep every record bundle as gzip (about a quarter of its content) and give back the content', async () => {
    expect(head.size).toBe(N);
    const files = recordFiles(publicDir);
    expect(files.length).toBeGreaterThanOrEqual(3);
    const store = new FsObjectStore(publicDir);
    for (const file of files) {
      const stored = new Uint8Array(readFileSync(file));
      expect(isGzip(stored), file).toBe(true);
      const key = file.slice(publicDir.length + 1);
      const content = await store.get(key);
      expect(Buffer.from(content!).equals(gunzipSync(stored)), key).toBe(true);
      if (key === R0) expect(stored.length).toBeLessThan(content!.length / 3);
    }
    // hash tiles and entry bundles stay as they are
    expect(isGzip(readContent(join(publicDir, tilePath({ kind: 'entries', index: 0, width: 256 }))))).toBe(false);
  });

  it('count a create of the same content as done, whatever its stored form; other content conflicts', async () => {
    const dir = scratchDir('stele-compressed-store-');
    const store = new FsObjectStore(dir, { fsync: false });
    const key = tilePath({ kind: 'records', index: 0, width: 2 });
    const content = encodeBundle([Buffer.from('{"a":1}'), Buffer.from('{"b":2}')]);
    // an older log's plain bundle, then the same content created (compressed) again
    mkdirSync(join(dir, 'tile/records/000.p'), { recursive: true });
    writeFileSync(join(dir, key), content);
    await store.createAll([{ key, data: content }]);
    await store.createAll([{ key, data: gzipSync(content, { level: 1 }) }]); // another compression of it
    await expect(
      store.createAll([{ key, data: encodeBundle([Buffer.from('{"a":1}'), Buffer.from('{"b":3}')]) }]),
    ).rejects.toBeInstanceOf(ImmutableConflictError);
    expect(Buffer.from((await store.get(key))!).equals(content)).toBe(true);
  });

  it('refuse a gzip bomb in place of a record bundle, as a corrupt object', async () => {
    const dir = scratchDir('stele-compressed-bomb-');
    const key = tilePath({ kind: 'records', index: 0, width: 3 });
    mkdirSync(join(dir, 'tile/records/000.p'), { recursive: true });
    writeFileSync(join(dir, key), bomb());
    const store = new FsObjectStore(dir);
    await expect(store.get(key)).rejects.toThrow(TileFormatError);
    await expect(store.get(key)).rejects.toThrow(/decompresses to more than 16777472 bytes/);
    await expect(new DirObjectReader(dir).get(key)).rejects.toBeInstanceOf(VerificationError);
  });
});

describe('served', () => {
  let server: RunningServer;
  let copy: StaticServer;
  beforeAll(async () => {
    server = await startTestServer({ dataDir, origin: ORIGIN });
    // A static copy of the stored files: no Content-Encoding, whatever the client sends.
    copy = await startStaticServer({ roots: [publicDir] });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await copy?.close();
  });

  it('by the local origin: gzip with Content-Encoding to a client that accepts it, the plain bundle to one that does not', async () => {
    const content = readContent(join(publicDir, R0));
    for (const accept of ['gzip', 'gzip, deflate, br', '*']) {
      const got = await rawGet(`${server.url}/${R0}`, accept);
      expect([accept, got.status, got.headers['content-encoding']]).toEqual([accept, 200, 'gzip']);
      expect(got.headers.vary).toMatch(/Accept-Encoding/i);
      expect(gunzipSync(got.body).equals(content)).toBe(true);
    }
    for (const accept of [undefined, 'identity', 'gzip;q=0', 'br']) {
      const got = await rawGet(`${server.url}/${R0}`, accept);
      expect([accept, got.status, got.headers['content-encoding']]).toEqual([accept, 200, undefined]);
      expect(got.headers.vary).toMatch(/Accept-Encoding/i);
      expect(got.body.equals(content)).toBe(true);
    }
    // A partial at an older width is served as content too; hash tiles never compressed.
    const older = await rawGet(`${server.url}/${tilePath({ kind: 'records', index: 2, width: 10 })}`, 'gzip');
    expect(older.status === 404 || older.headers['content-encoding'] === 'gzip').toBe(true);
    const tile = await rawGet(`${server.url}/${tilePath({ kind: 0, index: 0, width: 256 })}`, 'gzip');
    expect([tile.status, tile.headers['content-encoding'], tile.body.length]).toEqual([200, undefined, 256 * 32]);
  });

  it('read alike through the origin, through a static copy of the stored files, and from the directory', async () => {
    await readsEveryEntry(new HttpObjectReader(server.url), head);
    const fromCopy = new HttpObjectReader(copy.url);
    expect(isGzip((await rawGet(`${copy.url}/${R2}`, 'gzip')).body)).toBe(true); // stored bytes, no header
    expect(Buffer.from((await fromCopy.get(R2))!).equals(readContent(join(publicDir, R2)))).toBe(true);
    await readsEveryEntry(fromCopy, head);
    await readsEveryEntry(new DirObjectReader(publicDir), head);
  });

  it('a gzip bomb: refused by the origin (corrupt_storage) and by an HTTP reader, sent with the header or without', async () => {
    const bombs = await startStaticServer({
      roots: [],
      files: { [R0]: bomb() },
    });
    // A host that sends it with Content-Encoding: gzip (fetch decodes it, the reader stops at the bound).
    const encoded = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' });
      res.end(bomb());
    });
    await new Promise<void>((r) => encoded.listen(0, '127.0.0.1', r));
    const port = (encoded.address() as { port: number }).port;
    const bombed = scratchDir('stele-compressed-bombed-');
    cpSync(dataDir, bombed, { recursive: true });
    writeFileSync(join(bombed, 'log', R0), bomb());
    const origin = await startTestServer({ dataDir: bombed, origin: ORIGIN });
    try {
      for (const accept of ['gzip', undefined]) {
        const got = await rawGet(`${origin.url}/${R0}`, accept);
        expect([got.status, got.headers['cache-control'], JSON.parse(got.body.toString()).error.code]).toEqual([
          500,
          'no-store',
          'corrupt_storage',
        ]);
      }
      await expect(new HttpObjectReader(bombs.url).get(R0)).rejects.toBeInstanceOf(ResponseError);
      await expect(new HttpObjectReader(`http://127.0.0.1:${port}`, { attempts: 1 }).get(R0)).rejects.toThrow(
        /larger than 16777472 bytes/,
      );
    } finally {
      await origin.close();
      await bombs.close();
      await new Promise<void>((r) => encoded.close(() => r()));
    }
  });
});

describe('a log written before compression (plain record bundles)', () => {
  it('is read and served as before, and new bundles it writes are compressed beside the old ones', async () => {
    const old = scratchDir('stele-compressed-old-');
    cpSync(dataDir, old, { recursive: true });
    const oldPublic = join(old, 'log');
    decompressInPlace(recordFiles(oldPublic));
    expect(isGzip(new Uint8Array(readFileSync(join(oldPublic, R0))))).toBe(false);
    await readsEveryEntry(new DirObjectReader(oldPublic), head);
    const server = await startTestServer({ dataDir: old, origin: ORIGIN });
    try {
      const got = await rawGet(`${server.url}/${R0}`, 'gzip');
      expect([got.status, got.headers['content-encoding']]).toEqual([200, 'gzip']);
      expect(gunzipSync(got.body).equals(readContent(join(oldPublic, R0)))).toBe(true);
      await readsEveryEntry(new HttpObjectReader(server.url), head);
    } finally {
      await server.close();
    }
    // The log resumes on its plain right edge and completes the bundle: stored compressed.
    const log = await openLocalLog({
      dataDir: old,
      origin: ORIGIN,
      fsync: false,
      batchInterval: 5,
      sweepPartials: false,
    });
    await Promise.all(
      Array.from({ length: 768 - N }, (_, k) =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(N + k))),
      ),
    );
    const grown = { size: log.sequencer.checkpoint.size, root: log.sequencer.checkpoint.root };
    await log.sequencer.close();
    expect(grown.size).toBe(768);
    const full2 = new Uint8Array(readFileSync(join(oldPublic, tilePath({ kind: 'records', index: 2, width: 256 }))));
    expect(isGzip(full2)).toBe(true);
    expect(isGzip(new Uint8Array(readFileSync(join(oldPublic, R0))))).toBe(false);
    const reader = new LogReader(new DirObjectReader(oldPublic));
    expect(await reader.records(0, 768, grown)).toHaveLength(768);
  });
});

describe('the stele command (a subprocess)', () => {
  it('log fsck passes on the compressed log and on one written before compression; ledger audit reads a static copy of the stored files', async () => {
    await ensureBuilt();
    const sb = new Sandbox('stele-compressed-cli-');
    const old = scratchDir('stele-compressed-cli-old-');
    cpSync(dataDir, old, { recursive: true });
    decompressInPlace(recordFiles(join(old, 'log')));
    const server = await startTestServer({ dataDir: old, origin: ORIGIN });
    const copy = await startStaticServer({ roots: [publicDir] });
    try {
      for (const dir of [dataDir, old]) {
        const fsck = await sb.json(['log', 'fsck', '--data-dir', dir]);
        expect([dir, fsck.code]).toEqual([dir, 0]);
      }
      const key = (await (await fetch(`${server.url}/api/ledger/key`)).json()) as { keyId: string };
      expect((await sb.run(['ledger', 'init', '--endpoint', server.url, '--trust-key', key.keyId])).code).toBe(0);
      // the stored gzip bytes, sent without Content-Encoding
      const audit = await sb.json(['ledger', 'audit', copy.url]);
      expect(audit.code).toBe(0);
      expect([audit.out.ok, audit.out.treeSize, audit.out.entriesChecked]).toEqual([true, N, N]);
    } finally {
      await server.close();
      await copy.close();
      sb.cleanup();
    }
  }, 180_000);
});

describe('GzippedBundles (the origin compresses a record bundle once while it is cached)', () => {
  it('answers a kept bundle from memory, compresses one not to be kept (a tree not yet published) every time, and both decode to the content', async () => {
    const content = readContent(join(publicDir, R0));
    const gz = new GzippedBundles();
    const first = await gz.of(R0, content, true);
    const again = await gz.of(R0, content, true);
    expect(gz.compressions).toBe(1);
    expect(again).toBe(first);
    expect(gunzipSync(first).equals(content)).toBe(true);

    await gz.of(R2, content, false);
    await gz.of(R2, content, false);
    expect(gz.compressions).toBe(3);
  });
});
