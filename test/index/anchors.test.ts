// The lookup index's rows for duplicate anchors and label search, on both implementations
// (LMDB, and DynamoDB through dynalite): the earliest leaf of each anchor identity, never an
// event's; a label's artifact ids across scopes with their latest leaf, paged by cursor; each
// answer a candidate its record confirms; and an index of an older schema or layout reported
// as outdated and read as empty, so a start rebuilds it and nothing is misread meanwhile.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoIndex } from '../../src/aws/dynamo-index.js';
import { anchorIdentity } from '../../src/core/duplicates.js';
import { type CanonicalEntry, artifactId } from '../../src/core/entry.js';
import { indexCovers } from '../../src/api/index-coverage.js';
import { labelKey } from '../../src/index/keys.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import type { LookupIndex } from '../../src/index/types.js';
import { type PublishedCheckpoint, batchOfEntries } from '../../src/sequencer/contract.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { scratchDir } from '../helpers/tmp.js';

const digest = (i: number) => i.toString(16).padStart(64, '0');
function entry(d: number, labels: { artifact?: string; scope?: string; tenant?: string } = {}, type = 'ledger_anchor') {
  const e: CanonicalEntry = { v: 1, type, result: 'r', digest: digest(d), timestamp: 't' };
  if (labels.artifact !== undefined) {
    e.artifact = labels.artifact;
    e.artifactId = artifactId(labels.artifact, labels.scope);
  }
  if (labels.scope !== undefined) e.scope = labels.scope;
  if (labels.tenant !== undefined) e.tenant = labels.tenant;
  return e;
}
const batch = (from: number, entries: CanonicalEntry[]) => batchOfEntries(from, entries, {} as PublishedCheckpoint);
const id = (d: number, labels: Parameters<typeof entry>[1] = {}) => anchorIdentity(entry(d, labels))!;

/**
 * The log the index's rows point into, and the Confirms the API's lookups give (each
 * candidate checked against its record), over `log` — or over `records`, where a test
 * makes an entry's record disagree with what the index was told.
 */
function confirms(log: CanonicalEntry[], records: (CanonicalEntry | undefined)[] = log) {
  return {
    digest: (d: string) => async (seq: number) => records[seq]?.digest === d,
    anchor: (identity: string) => async (seq: number) =>
      records[seq] !== undefined && anchorIdentity(records[seq]!) === identity,
    artifact: (artifactId: string) => async (seq: number) => records[seq]?.artifactId === artifactId,
    label: (label: string) => async (artifactId: string, seq: number) =>
      records[seq]?.artifact === label && records[seq]?.artifactId === artifactId,
  };
}

const FIRST = [
  entry(1, { artifact: 'app.bin', scope: 'a' }), // 0
  entry(1, { artifact: 'app.bin', scope: 'a' }, 'document_verified'), // 1: an event
  entry(2, { artifact: 'app.bin', scope: 'b' }), // 2
  entry(3, { artifact: 'app.bin' }), // 3
  entry(4, { artifact: 'other.bin', scope: 'a' }), // 4
];
const SECOND = [
  entry(1, { artifact: 'app.bin', scope: 'a' }), // 5: a duplicate (allowDuplicate) — not the earliest
  entry(9, { artifact: 'app.bin', scope: 'c' }), // 6
  entry(2, { artifact: 'app.bin', scope: 'b', tenant: 't' }), // 7
  entry(5, { artifact: 'seen.bin' }, 'document_verified'), // 8
];
const LOG = [...FIRST, ...SECOND];

/** Two batches (the second may still be pending in memory), then every expectation. */
async function exercise(index: LookupIndex, flushBetween: () => Promise<void>): Promise<void> {
  await index.onBatch(batch(0, FIRST));
  await flushBetween();
  await index.onBatch(batch(5, SECOND));
  await expectLookups(index);
}

/** Every lookup over LOG, as the API asks them. */
async function expectLookups(index: LookupIndex): Promise<void> {
  const c = confirms(LOG);
  const findAnchor = (d: number, labels: Parameters<typeof entry>[1]) =>
    index.findAnchor(id(d, labels), digest(d), c.anchor(id(d, labels)));
  expect(await findAnchor(1, { artifact: 'app.bin', scope: 'a' })).toBe(0);
  expect(await findAnchor(2, { artifact: 'app.bin', scope: 'b' })).toBe(2);
  expect(await findAnchor(2, { artifact: 'app.bin', scope: 'b', tenant: 't' })).toBe(7);
  expect(await findAnchor(1, { artifact: 'app.bin', scope: 'b' })).toBeUndefined();
  // Events have no identity, so nothing of theirs can be found as an anchor.
  expect(anchorIdentity(entry(5, { artifact: 'seen.bin' }, 'document_verified'))).toBeUndefined();
  expect(await findAnchor(5, { artifact: 'seen.bin' })).toBeUndefined();

  // Digest → earliest leaf (an event's too); artifact id → latest leaf.
  expect(await index.findByDigest(digest(1), c.digest(digest(1)))).toBe(0);
  expect(await index.findByDigest(digest(5), c.digest(digest(5)))).toBe(8);
  expect(await index.findByDigest(digest(6), c.digest(digest(6)))).toBeUndefined();
  const appA = artifactId('app.bin', 'a');
  expect(await index.findByArtifact(appA, c.artifact(appA))).toBe(5);
  const appC = artifactId('app.bin', 'c');
  expect(await index.findByArtifact(appC, c.artifact(appC))).toBe(6);
  // The tenant is not part of an artifact id: 7 is app.bin in b's latest.
  const appB = artifactId('app.bin', 'b');
  expect(await index.findByArtifact(appB, c.artifact(appB))).toBe(7);
  expect(await index.countsByType()).toEqual({ ledger_anchor: 7, document_verified: 2 });

  const search = (label: string, limit: number, after?: string) =>
    index.searchArtifact(label, limit, after, c.label(label));
  const all = await search('app.bin', 10);
  expect(all.more).toBe(false);
  const expected = [
    { artifactId: artifactId('app.bin', 'a'), seq: 5 },
    { artifactId: artifactId('app.bin', 'b'), seq: 7 },
    { artifactId: artifactId('app.bin', 'c'), seq: 6 },
    { artifactId: artifactId('app.bin', ''), seq: 3 },
  ].sort((x, y) => (x.artifactId < y.artifactId ? -1 : 1));
  expect(all.matches).toEqual(expected);
  const first = await search('app.bin', 3);
  expect(first).toEqual({ matches: expected.slice(0, 3), more: true });
  const rest = await search('app.bin', 3, first.matches[2]!.artifactId);
  expect(rest).toEqual({ matches: expected.slice(3), more: false });
  expect((await search('other.bin', 10)).matches).toEqual([{ artifactId: artifactId('other.bin', 'a'), seq: 4 }]);
  expect(await search('none.bin', 10)).toEqual({ matches: [], more: false });
}

describe('anchorIdentity', () => {
  it('is pinned: indexes written by earlier versions hold these values', () => {
    const fields = { type: 'ledger_anchor', digest: 'AB'.repeat(32), artifact: 'build-1.tar', scope: 'ci/é' };
    // SHA-256 of the UTF-8 JSON ["<digest lowercased>","build-1.tar","ci/é",null], computed apart.
    expect(anchorIdentity(fields)).toBe('f65de9c7c3ef2f1c8af3ec9fb8259043cf9a52b812276c722a99c1dc1db9e017');
    expect(anchorIdentity({ ...fields, type: 'document_verified' })).toBeUndefined();
  });
});

describe('LmdbIndex: anchors and labels', () => {
  it('keeps the earliest anchor of an identity and lists a label across scopes, pending or committed', async () => {
    const path = join(scratchDir('stele-index-anchors-'), 'index');
    const index = new LmdbIndex(path);
    await exercise(index, () => index.flush());
    expect(await index.outdated()).toBe(false);
    await index.close();
    // Reopened: everything from the database alone.
    const again = new LmdbIndex(path);
    await expectLookups(again);
    await again.close();
  });

  it("skips a candidate its record does not carry and answers the next one, in the lookup's order", async () => {
    const path = join(scratchDir('stele-index-candidates-'), 'index');
    const index = new LmdbIndex(path);
    await index.onBatch(batch(0, FIRST));
    await index.flush();
    await index.onBatch(batch(5, SECOND));
    // What a shared short key or a stale row looks like from the API: the record a row names
    // carries something else. Leaf 0 (digest 1, app.bin in a) and leaf 2 (app.bin in b) do not.
    const records: (CanonicalEntry | undefined)[] = [...LOG];
    records[0] = entry(77);
    records[2] = entry(78);
    const c = confirms(LOG, records);
    expect(await index.findByDigest(digest(1), c.digest(digest(1)))).toBe(1); // the next: the event
    const appA = id(1, { artifact: 'app.bin', scope: 'a' });
    expect(await index.findAnchor(appA, digest(1), c.anchor(appA))).toBe(5); // its duplicate
    const appB = artifactId('app.bin', 'b');
    // Latest first: 7 is the latest leaf of app.bin in b (the tenant is not in the id), 2 comes next.
    expect(await index.findByArtifact(appB, c.artifact(appB))).toBe(7);
    records[7] = undefined; // not published yet
    expect(await index.findByArtifact(appB, c.artifact(appB))).toBeUndefined(); // 2 is not it either
    records[2] = LOG[2];
    expect(await index.findByArtifact(appB, c.artifact(appB))).toBe(2);
    // A search shows an artifact at its latest leaf that checks, and leaves out one with none.
    records[3] = entry(79);
    const page = await index.searchArtifact('app.bin', 10, undefined, c.label('app.bin'));
    expect(page.matches.map((m) => m.seq).sort()).toEqual([2, 5, 6]);
    await index.close();
  });

  it('keeps one label row per artifact id however often it recurs, and one digest row per digest and tag in a batch', async () => {
    const path = join(scratchDir('stele-index-once-'), 'index');
    const index = new LmdbIndex(path);
    await index.onBatch(batch(0, FIRST));
    await index.flush();
    // Digest 1 twice in the batch, as an anchor and as an event: two rows (their tags differ).
    expect(index.footprint().rows).toEqual({ digest: 5, artifact: 4, label: 4 });
    await index.onBatch(batch(5, SECOND));
    await index.flush();
    // app.bin in a and in b recur (at 5 and 7): new artifact rows (their latest leaves), no
    // new label rows; app.bin in c and seen.bin are new.
    expect(index.footprint().rows).toEqual({ digest: 9, artifact: 8, label: 6 });
    await index.close();
  });

  /** An index as an earlier version left it: its rows in the root database. */
  async function oldIndex(rows: [string | Buffer, number][]): Promise<string> {
    const path = join(scratchDir('stele-index-old-'), 'index');
    const db = open<number, string | Buffer>({ path, compression: false });
    for (const [key, value] of rows) await db.put(key, value);
    await db.close();
    return path;
  }

  /** LOG as layout 1 (text keys, marked with the bare schema 2) or layout 2 (byte keys, marked 202) held it. */
  function oldRows(layout: 1 | 2): [string | Buffer, number][] {
    const key = (kind: 'd' | 'a' | 'k', tag: number, value: string) =>
      layout === 1
        ? `${kind}:${value}`
        : Buffer.concat([Buffer.of(tag), Buffer.from(kind === 'a' ? value.slice(4) : value, 'hex')]);
    const rows: [string | Buffer, number][] = [
      ['meta:size', LOG.length],
      ['meta:schema', layout === 1 ? 2 : 202],
    ];
    LOG.forEach((e, seq) => {
      if (!rows.some(([k]) => String(k) === String(key('d', 1, e.digest)))) rows.push([key('d', 1, e.digest), seq]);
      if (e.artifactId) rows.push([key('a', 2, e.artifactId), seq]);
      const identity = anchorIdentity(e);
      if (identity && !rows.some(([k]) => String(k) === String(key('k', 3, identity))))
        rows.push([key('k', 3, identity), seq]);
      // Layout 1 and 2 kept label rows as text: n:<label key>:<artifact id> → latest leaf.
      if (e.artifact) rows.push([`n:${labelKey(e.artifact)}:${e.artifactId}`, seq]);
    });
    return rows;
  }

  for (const layout of [1, 2] as const) {
    it(`an index of the previous layout ${layout} is upgraded (rebuilt), never misread`, async () => {
      const path = await oldIndex(oldRows(layout));
      const index = new LmdbIndex(path);
      // Outdated: it claims no leaves (so the API answers 503, not 404), finds nothing, takes no batch.
      expect(await index.outdated()).toBe(true);
      expect(await index.indexedSize()).toBe(0);
      const c = confirms(LOG);
      expect(await index.findByDigest(digest(1), c.digest(digest(1)))).toBeUndefined();
      expect(await index.countsByType()).toEqual({});
      await expect(indexCovers(index, { size: LOG.length } as PublishedCheckpoint)).rejects.toMatchObject({
        status: 503,
        code: 'index_not_ready',
      });
      await expect(index.onBatch(batch(0, FIRST))).rejects.toThrow(/older version/);
      // What a start does (src/index/catchup.ts): clear, then index the record bundles again.
      await index.clear();
      expect(await index.outdated()).toBe(false);
      await index.onBatch(batch(0, FIRST));
      await index.onBatch(batch(5, SECOND));
      await expectLookups(index);
      await indexCovers(index, { size: LOG.length } as PublishedCheckpoint);
      await index.close();
      // The old rows went with the old file.
      const root = open<number, string | Buffer>({ path, compression: false, readOnly: true, maxDbs: 4 });
      expect(root.get(`d:${digest(1)}`)).toBeUndefined();
      expect([...root.getKeys({ start: 'n:', end: 'n;' })]).toEqual([]);
      await root.close();
      const reopened = new LmdbIndex(path);
      expect(await reopened.outdated()).toBe(false);
      await expectLookups(reopened);
      await reopened.close();
    });
  }

  it('an index without a schema mark (the first version) is outdated until cleared', async () => {
    const index = new LmdbIndex(
      await oldIndex([
        ['meta:size', 3],
        [`d:${digest(1)}`, 0],
      ]),
    );
    expect(await index.outdated()).toBe(true);
    await index.clear();
    expect(await index.outdated()).toBe(false);
    expect(await index.indexedSize()).toBe(0);
    await index.close();
  });
});

describe('DynamoIndex: anchors and labels (dynalite)', () => {
  let ddb: DynamoServer;
  beforeAll(async () => {
    ddb = await startDynamoServer();
  }, 60_000);
  afterAll(async () => ddb?.close());
  const make = () =>
    new DynamoIndex({
      endpoint: ddb.endpoint,
      region: ddb.region,
      credentials: ddb.credentials,
      table: ddb.table,
      log: `idx-${randomBytes(4).toString('hex')}`,
    });

  it('keeps the earliest anchor of an identity and lists a label across scopes', async () => {
    const index = make();
    await exercise(index, async () => {});
    expect(await index.outdated()).toBe(false);
    await index.close();
  }, 60_000);

  it('an index without the schema mark is outdated', async () => {
    const index = make();
    expect(await index.outdated()).toBe(false); // empty: nothing to rebuild
    await index.onBatch(batch(0, [entry(1)]));
    expect(await index.outdated()).toBe(false);
    // The meta item as a version-1 sequencer wrote it: a size, no schema.
    const { UpdateItemCommand } = await import('@aws-sdk/client-dynamodb');
    const ns = (index as unknown as { ns: string }).ns;
    await index.client.send(
      new UpdateItemCommand({
        TableName: ddb.table,
        Key: { pk: { S: `${ns}#meta` }, sk: { S: 'meta' } },
        UpdateExpression: 'REMOVE #s',
        ExpressionAttributeNames: { '#s': 'schema' },
      }),
    );
    expect(await index.outdated()).toBe(true);
    await index.close();
  }, 60_000);
});
