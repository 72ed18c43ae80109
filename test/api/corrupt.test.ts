// Issue 14, item 3 over HTTP: a real log written by the real sequencer, one byte flipped in a
// stored object (a level-0 tile, a level-1 tile, an entry bundle, a record bundle), then a
// server started over it. Every answer is either correct (checked here with src/core/merkle.ts
// against the log as it was written) or a corrupt_storage error; /metrics counts it. And
// the lookup index: a wrong row is never served, an index ahead of the tree is rebuilt.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RootDatabase, open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { artifactId, entryId } from '../../src/core/entry.js';
import { hashFromHex, leafHash, toHex } from '../../src/core/hash.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { verifyConsistency, verifyInclusion } from '../../src/core/merkle.js';
import { LogReader, type TreeHead } from '../../src/read/reader.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { tilePath } from '../../src/core/tiles.js';
import { Bundle } from '../../src/core/bundle.js';
import { scratchDir } from '../helpers/tmp.js';
import { digestOf, getJson, startTestServer, untilIndexed } from './server.js';
import { editIndexRow } from '../helpers/index-rows.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'corrupt.test/log';
// A full level-1 tile (65,536 leaves) and a few hundred more.
const N = 65_536 + 300;
let dataDir: string;
let head: TreeHead;
/** The log as written: entry hashes and roots, for checking answers. */
let entryHashes: string[];
let pristine: LogReader;

beforeAll(async () => {
  dataDir = scratchDir('stele-corrupt-');
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { sequencer } = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 1,
    maxBatch: 65_536,
    listeners: [index],
  });
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(i), { artifact: `a${i}` })),
    ),
  );
  head = { size: sequencer.checkpoint.size, root: sequencer.checkpoint.root };
  expect(head.size).toBe(N);
  await sequencer.close();
  await index.close();
  pristine = new LogReader(new FsObjectStore(join(dataDir, 'log')));
  entryHashes = [];
  for (let seq = 0; seq < N; seq++) entryHashes.push(toHex((await pristine.entry(seq, head)).entryHash));
}, 180_000);

let server: RunningServer | undefined;
afterAll(async () => server?.close());

/** Flips bytes of a stored object for the length of `body`, with a server started over the corrupted log. */
async function withCorruption(
  key: string,
  at: number,
  body: (url: string) => Promise<void>,
  to?: number,
): Promise<void> {
  const file = join(dataDir, 'log', key);
  const data = readContent(file);
  const was = data[at]!;
  data[at] = to ?? was ^ 0x01;
  writeContent(file, data);
  try {
    server = await startTestServer({ dataDir, origin: ORIGIN });
    await body(server.url);
  } finally {
    await server?.close();
    server = undefined;
    data[at] = was;
    writeContent(file, data);
  }
}

type Outcome = 'ok' | 'corrupt';

/** GET an entry: a verified 200 or a corrupt_storage 500, nothing else. */
async function entry(url: string, query: string, seq: number): Promise<Outcome> {
  const { status, body } = await getJson(`${url}/api/ledger/entry?${query}`);
  if (status === 500) {
    expect(body).toEqual({
      error: {
        code: 'corrupt_storage',
        message: expect.stringMatching(/^tile\/\S+ in the log's storage does not match/),
      },
    });
    return 'corrupt';
  }
  expect(status, `${query}: ${JSON.stringify(body)}`).toBe(200);
  expect(body.leafIndex).toBe(seq);
  expect(body.entry.digest).toBe(digestOf(seq));
  expect(body.entry.proof.entryHash).toBe(entryHashes[seq]);
  expect(body.leafHash).toBe(toHex(leafHash(hashFromHex(entryHashes[seq]!))));
  expect(body.rootHash).toBe(toHex(head.root));
  expect(
    verifyInclusion(
      seq,
      body.treeSize,
      hashFromHex(body.leafHash),
      body.auditPath.map(hashFromHex),
      hashFromHex(body.rootHash),
    ),
  ).toBe(true);
  return 'ok';
}

async function consistency(url: string, first: number, second: number): Promise<Outcome> {
  const { status, body } = await getJson(`${url}/api/ledger/consistency?first=${first}&second=${second}`);
  if (status === 500) {
    expect(body.error.code).toBe('corrupt_storage');
    return 'corrupt';
  }
  expect(status).toBe(200);
  expect(body.firstRoot).toBe(toHex(await pristine.treeHash(first, head)));
  expect(body.secondRoot).toBe(toHex(await pristine.treeHash(second, head)));
  expect(
    verifyConsistency(
      first,
      second,
      body.proof.map(hashFromHex),
      hashFromHex(body.firstRoot),
      hashFromHex(body.secondRoot),
    ),
  ).toBe(true);
  return 'ok';
}

/** The object a corrupt_storage answer names. */
async function blamed(url: string, query: string): Promise<string> {
  const { status, body } = await getJson(`${url}/api/ledger/entry?${query}`);
  expect(status).toBe(500);
  return (body.error.message as string).split(' ')[0]!;
}

async function corruptCount(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^stele_corrupt_objects_total (\d+)/m.exec(text)?.[1]);
}

/**
 * Leaves spread over the log, each asked for by leaf, id, digest and artifact, in this order:
 * 516 first in its bundle, so the reader checks that bundle's items (517's corrupt record
 * among them) on a neighbour's request before 517 is asked for.
 */
const LEAVES = [0, 1, 17, 18, 255, 256, 266, 267, 268, 516, 517, 518, 800, 40_000, 65_535, 65_536, 65_600, N - 1];
const PAIRS = [
  [1, N],
  [17, 18],
  [256, N],
  [300, 65_836],
  [65_536, N],
  [65_600, N - 1],
] as const;

/** Every lookup's outcome, by leaf; consistency outcomes by pair. */
async function survey(url: string): Promise<{ leaves: Map<number, Outcome[]>; pairs: Outcome[] }> {
  const leaves = new Map<number, Outcome[]>();
  for (const seq of LEAVES) {
    const id = entryId(seq, hashFromHex(entryHashes[seq]!));
    leaves.set(seq, [
      await entry(url, `leaf=${seq}`, seq),
      await entry(url, `id=${id}`, seq),
      await entry(url, `hash=${digestOf(seq)}`, seq),
      await entry(url, `artifact=${artifactId(`a${seq}`)}`, seq),
    ]);
  }
  const pairs: Outcome[] = [];
  for (const [a, b] of PAIRS) pairs.push(await consistency(url, a, b));
  return { leaves, pairs };
}

const all = (o: Outcome): Outcome[] => [o, o, o, o];

describe('corrupted storage is never served', () => {
  it('a level-0 tile: its leaves and every proof through it are corrupt_storage, the rest verifies; counted once', async () => {
    await withCorruption(tilePath({ kind: 0, index: 0, width: 256 }), 17 * 32 + 5, async (url) => {
      const { leaves, pairs } = await survey(url);
      // 256's record is chained to entry 255's hash, which only tile/0/000 authenticates
      for (const seq of [0, 1, 17, 18, 255, 256]) expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('corrupt'));
      for (const seq of [266, 800, 40_000, 65_600, N - 1]) expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('ok'));
      expect(pairs).toEqual(['corrupt', 'corrupt', 'ok', 'ok', 'ok', 'ok']);
      expect(await blamed(url, 'leaf=18')).toBe('tile/0/000');
      expect(await corruptCount(url)).toBe(1);
    });
  });

  it('a level-1 tile: everything below it is corrupt_storage, what lies beyond it verifies', async () => {
    await withCorruption(tilePath({ kind: 1, index: 0, width: 256 }), 3 * 32 + 1, async (url) => {
      const { leaves, pairs } = await survey(url);
      for (const seq of [0, 256, 800, 40_000, 65_535, 65_536])
        expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('corrupt'));
      for (const seq of [65_600, N - 1]) expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('ok'));
      expect(pairs).toEqual(['corrupt', 'corrupt', 'corrupt', 'corrupt', 'ok', 'ok']);
      expect(await blamed(url, 'leaf=800')).toBe('tile/1/000');
      expect(await corruptCount(url)).toBe(1);
    });
  });

  it('an entry bundle: the entry and the one chained to it are corrupt_storage', async () => {
    await withCorruption(tilePath({ kind: 'entries', index: 1, width: 256 }), 10 * 34 + 2 + 4, async (url) => {
      const { leaves, pairs } = await survey(url);
      expect(leaves.get(266)).toEqual(all('corrupt'));
      expect(leaves.get(267)).toEqual(all('corrupt'));
      for (const seq of LEAVES.filter((s) => s !== 266 && s !== 267))
        expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('ok'));
      expect(pairs.every((p) => p === 'ok')).toBe(true);
      expect(await blamed(url, 'leaf=266')).toBe('tile/entries/001');
      expect(await corruptCount(url)).toBe(1);
    });
  });

  it('a record that still parses but does not hash to its entry hash: corrupt_storage', async () => {
    const key = tilePath({ kind: 'records', index: 2, width: 256 });
    const item = Bundle.decode(readContent(join(dataDir, 'log', key))).item(5);
    const at = item.byteOffset + Buffer.from(item).indexOf('"digest":"') + 12;
    await withCorruption(
      key,
      at,
      async (url) => {
        const { leaves } = await survey(url);
        expect(leaves.get(517)).toEqual(all('corrupt'));
        for (const seq of LEAVES.filter((s) => s !== 517)) expect(leaves.get(seq), `leaf ${seq}`).toEqual(all('ok'));
        expect(await blamed(url, 'leaf=517')).toBe('tile/records/002');
        expect(await corruptCount(url)).toBe(1);
      },
      item[at - item.byteOffset] === 0x30 ? 0x31 : 0x30,
    );
  });
});

/** GET /<key> from the server: its status, Cache-Control, error code (if any) and bytes. */
async function object(url: string, key: string) {
  const res = await fetch(`${url}/${key}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const code =
    res.headers.get('content-type')?.startsWith('application/json') === true
      ? (JSON.parse(Buffer.from(bytes).toString('utf8')) as { error?: { code?: string } }).error?.code
      : undefined;
  return { status: res.status, cache: res.headers.get('cache-control'), code, bytes };
}

/** The object is refused as corrupt_storage, never cached; `fine` are served as stored, immutable. */
async function refusedBeside(url: string, bad: readonly string[], fine: readonly string[]): Promise<void> {
  for (const key of bad) {
    const got = await object(url, key);
    expect([key, got.status, got.code, got.cache]).toEqual([key, 500, 'corrupt_storage', 'no-store']);
  }
  for (const key of fine) {
    const got = await object(url, key);
    expect([key, got.status, got.cache]).toEqual([key, 200, 'public, max-age=31536000, immutable']);
    expect(Buffer.from(got.bytes).equals(readContent(join(dataDir, 'log', key))), key).toBe(true);
  }
}

describe('the objects served at /tile and /checkpoint verify, or are corrupt_storage', () => {
  const t0 = tilePath({ kind: 0, index: 0, width: 256 });
  const t1 = tilePath({ kind: 1, index: 0, width: 256 });
  const others = [tilePath({ kind: 0, index: 100, width: 256 }), tilePath({ kind: 'entries', index: 100, width: 256 })];

  it('a level-0 tile: it and the bundles it authenticates are refused; other tiles are served', async () => {
    await withCorruption(t0, 17 * 32 + 5, async (url) => {
      await refusedBeside(url, [t0, tilePath({ kind: 'entries', index: 0, width: 256 })], [...others, t1]);
    });
  });

  it('a level-1 tile: it and every tile below it are refused; the tiles beside it are served', async () => {
    await withCorruption(t1, 3 * 32 + 1, async (url) => {
      await refusedBeside(
        url,
        [t1, t0, tilePath({ kind: 0, index: 255, width: 256 })],
        [tilePath({ kind: 0, index: 256, width: 256 }), tilePath({ kind: 2, index: 0, width: 1 })],
      );
    });
  });

  it('an entry bundle and a record bundle are refused; the hash tile beside them is served', async () => {
    const entries = tilePath({ kind: 'entries', index: 1, width: 256 });
    await withCorruption(entries, 10 * 34 + 2 + 4, async (url) => {
      await refusedBeside(url, [entries], [tilePath({ kind: 0, index: 1, width: 256 }), ...others]);
    });
    const records = tilePath({ kind: 'records', index: 2, width: 256 });
    const item = Bundle.decode(readContent(join(dataDir, 'log', records))).item(5);
    const at = item.byteOffset + Buffer.from(item).indexOf('"digest":"') + 12;
    await withCorruption(
      records,
      at,
      async (url) => {
        await refusedBeside(url, [records], [tilePath({ kind: 'entries', index: 2, width: 256 }), ...others]);
      },
      item[at - item.byteOffset] === 0x30 ? 0x31 : 0x30,
    );
  });

  it('a bundle whose framing no longer parses is corrupt_storage, not an internal error', async () => {
    const entries = tilePath({ kind: 'entries', index: 3, width: 256 });
    // The first item's length made 65,311 bytes longer: it runs past the end of the bundle.
    await withCorruption(
      entries,
      0,
      async (url) => {
        await refusedBeside(url, [entries], others);
        expect((await getJson(`${url}/api/ledger/entry?leaf=${3 * 256 + 7}`)).body.error.code).toBe('corrupt_storage');
      },
      0xff,
    );
  });

  it('the checkpoint of a stopped log: /checkpoint is refused and /readyz is 503 naming it; the API still answers', async () => {
    const note = readFileSync(join(dataDir, 'log', 'checkpoint'), 'utf8');
    await withCorruption('checkpoint', note.indexOf('\n', note.indexOf('\n') + 1) + 3, async (url) => {
      const got = await object(url, 'checkpoint');
      expect([got.status, got.code, got.cache]).toEqual([500, 'corrupt_storage', 'no-store']);
      const ready = await getJson(`${url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body.reason).toMatch(/^the stored checkpoint \(log\/checkpoint\) does not verify: /);
      expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^stele_ready 0$/m);
      expect((await getJson(`${url}/healthz`)).status).toBe(200);
      expect((await getJson(`${url}/api/ledger/checkpoint`)).body.treeSize).toBe(N);
      await refusedBeside(url, [], others);
    });
  });

  it('an intact log: /checkpoint is the published note and /readyz is 200', async () => {
    server = await startTestServer({ dataDir, origin: ORIGIN });
    try {
      const got = await object(server.url, 'checkpoint');
      expect([got.status, got.cache]).toEqual([200, 'no-cache']);
      expect(Buffer.from(got.bytes).toString('utf8')).toBe(readFileSync(join(dataDir, 'log', 'checkpoint'), 'utf8'));
      expect((await getJson(`${server.url}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${server.url}/metrics`)).text()).toMatch(/^stele_ready 1$/m);
      // Beyond the published tree nothing is served: it cannot be authenticated.
      expect((await object(server.url, tilePath({ kind: 0, index: 300, width: 256 }))).status).toBe(404);
    } finally {
      await server.close();
      server = undefined;
    }
  });
});

describe('an older partial tile, which clients at older tree sizes read', () => {
  it('is served while it is the prefix of the verified tile, refused once it is not', async () => {
    const dir = scratchDir('stele-corrupt-partial-');
    const { sequencer } = await openLocalLog({ dataDir: dir, origin: ORIGIN, fsync: false, batchInterval: 1 });
    for (const [from, to] of [
      [0, 300],
      [300, 380],
    ] as const)
      await Promise.all(
        Array.from({ length: to - from }, (_, i) =>
          sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + i))),
        ),
      );
    expect(sequencer.checkpoint.size).toBe(380);
    await sequencer.close();
    const older = [tilePath({ kind: 0, index: 1, width: 44 }), tilePath({ kind: 'entries', index: 1, width: 44 })];
    const current = [tilePath({ kind: 0, index: 1, width: 124 }), tilePath({ kind: 'records', index: 1, width: 124 })];
    const get = async (key: string) => {
      const got = await object(server!.url, key);
      return [got.status, got.code ?? Buffer.from(got.bytes).equals(readContent(join(dir, 'log', key)))];
    };
    for (const key of older) {
      const file = join(dir, 'log', key);
      const data = readFileSync(file);
      server = await startTestServer({ dataDir: dir, origin: ORIGIN });
      try {
        for (const k of [...older, ...current]) expect([k, ...(await get(k))]).toEqual([k, 200, true]);
        await server.close();
        data[data.length - 3]! ^= 1;
        writeFileSync(file, data);
        server = await startTestServer({ dataDir: dir, origin: ORIGIN });
        expect([key, ...(await get(key))]).toEqual([key, 500, 'corrupt_storage']);
        for (const k of current) expect([k, ...(await get(k))]).toEqual([k, 200, true]);
      } finally {
        await server?.close();
        server = undefined;
        data[data.length - 3]! ^= 1;
        writeFileSync(file, data);
      }
    }
  });
});

describe('the lookup index against the tree', () => {
  /** Edits the stopped server's LMDB index directly. */
  const editIndex = async (edit: (db: RootDatabase<number, string | Buffer>) => void) => {
    const db = open<number, string>({ path: join(dataDir, 'private', 'index'), compression: false });
    await db.transaction(() => edit(db));
    await db.close();
  };

  it('a row naming another entry is a 404, never that entry', async () => {
    const index = join(dataDir, 'private', 'index');
    // The right rows gone, stale ones naming other entries in their place.
    await editIndexRow(index, 'digest', digestOf(5), undefined);
    await editIndexRow(index, 'digest', digestOf(5), 7);
    await editIndexRow(index, 'artifact', artifactId('a9'), undefined);
    await editIndexRow(index, 'artifact', artifactId('a9'), 11);
    server = await startTestServer({ dataDir, origin: ORIGIN });
    try {
      const byHash = await getJson(`${server.url}/api/ledger/entry?hash=${digestOf(5)}`);
      expect(byHash.status).toBe(404);
      expect(byHash.body.error.code).toBe('entry_not_found');
      expect((await getJson(`${server.url}/api/ledger/entry?artifact=${artifactId('a9')}`)).status).toBe(404);
      expect((await getJson(`${server.url}/api/ledger/entry?hash=${digestOf(6)}`)).body.leafIndex).toBe(6);
    } finally {
      await server.close();
      server = undefined;
      await editIndexRow(index, 'digest', digestOf(5), undefined);
      await editIndexRow(index, 'digest', digestOf(5), 5);
      await editIndexRow(index, 'artifact', artifactId('a9'), undefined);
      await editIndexRow(index, 'artifact', artifactId('a9'), 9);
    }
  });

  it('an index ahead of the tree is rebuilt at start: rows beyond it go, new entries are indexed', async () => {
    const ghost = digestOf(10_000_000);
    await editIndex((db) => {
      db.put('meta:size', N + 100);
    });
    await editIndexRow(join(dataDir, 'private', 'index'), 'digest', ghost, N + 50);
    server = await startTestServer({ dataDir, origin: ORIGIN });
    try {
      await untilIndexed(server.url);
      const summary = await getJson(`${server.url}/api/ledger/summary`);
      expect(summary.body.indexedEntries).toBe(N);
      expect(summary.body.entriesByType).toEqual({ ledger_anchor: N });
      // A new entry at N: an index that still claimed N + 100 leaves would skip it.
      const anchored = await getJson(`${server.url}/api/ledger/anchor`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ digest: digestOf(N) }),
      });
      expect(anchored.status).toBe(201);
      const found = await getJson(`${server.url}/api/ledger/entry?hash=${digestOf(N)}`);
      expect(found.status).toBe(200);
      expect(found.body.leafIndex).toBe(N);
      expect((await getJson(`${server.url}/api/ledger/entry?hash=${ghost}`)).status).toBe(404);
      expect((await getJson(`${server.url}/api/ledger/entry?hash=${digestOf(40_000)}`)).body.leafIndex).toBe(40_000);
    } finally {
      await server.close();
      server = undefined;
    }
  });
});
