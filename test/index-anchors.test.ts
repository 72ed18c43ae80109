// The lookup index's rows for duplicate anchors and label search, on both implementations
// (LMDB, and DynamoDB through dynalite): the earliest leaf of each anchor identity, never an
// event's; a label's artifact ids across scopes with their latest leaf, paged by cursor; and
// an index of the older schema reported as outdated, so a start rebuilds it.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoIndex } from '../src/aws/dynamo-index.js';
import { anchorIdentity } from '../src/core/duplicates.js';
import { type CanonicalEntry, artifactId } from '../src/core/entry.js';
import { LmdbIndex, rowKey } from '../src/index/lmdb.js';
import { INDEX_SCHEMA, type LookupIndex } from '../src/index/types.js';
import { type PublishedCheckpoint, batchOfEntries } from '../src/sequencer/contract.js';
import { type DynamoServer, startDynamoServer } from './helpers/dynamo-server.js';
import { scratchDir } from './helpers/tmp.js';

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

/** Two batches (the second may still be pending in memory), then every expectation. */
async function exercise(index: LookupIndex, flushBetween: () => Promise<void>): Promise<void> {
  await index.onBatch(
    batch(0, [
      entry(1, { artifact: 'app.bin', scope: 'a' }), // 0
      entry(1, { artifact: 'app.bin', scope: 'a' }, 'document_verified'), // 1: an event
      entry(2, { artifact: 'app.bin', scope: 'b' }), // 2
      entry(3, { artifact: 'app.bin' }), // 3
      entry(4, { artifact: 'other.bin', scope: 'a' }), // 4
    ]),
  );
  await flushBetween();
  await index.onBatch(
    batch(5, [
      entry(1, { artifact: 'app.bin', scope: 'a' }), // 5: a duplicate (allowDuplicate) — not the earliest
      entry(9, { artifact: 'app.bin', scope: 'c' }), // 6
      entry(2, { artifact: 'app.bin', scope: 'b', tenant: 't' }), // 7
      entry(5, { artifact: 'seen.bin' }, 'document_verified'), // 8
    ]),
  );
  expect(await index.findAnchor(id(1, { artifact: 'app.bin', scope: 'a' }))).toBe(0);
  expect(await index.findAnchor(id(2, { artifact: 'app.bin', scope: 'b' }))).toBe(2);
  expect(await index.findAnchor(id(2, { artifact: 'app.bin', scope: 'b', tenant: 't' }))).toBe(7);
  expect(await index.findAnchor(id(1, { artifact: 'app.bin', scope: 'b' }))).toBeUndefined();
  // Events have no identity, so nothing of theirs can be found as an anchor.
  expect(anchorIdentity(entry(5, { artifact: 'seen.bin' }, 'document_verified'))).toBeUndefined();
  expect(await index.findAnchor(id(5, { artifact: 'seen.bin' }))).toBeUndefined();

  const all = await index.searchArtifact('app.bin', 10);
  expect(all.more).toBe(false);
  const expected = [
    { artifactId: artifactId('app.bin', 'a'), seq: 5 },
    { artifactId: artifactId('app.bin', 'b'), seq: 7 },
    { artifactId: artifactId('app.bin', 'c'), seq: 6 },
    { artifactId: artifactId('app.bin', ''), seq: 3 },
  ].sort((x, y) => (x.artifactId < y.artifactId ? -1 : 1));
  expect(all.matches).toEqual(expected);
  const first = await index.searchArtifact('app.bin', 3);
  expect(first).toEqual({ matches: expected.slice(0, 3), more: true });
  const rest = await index.searchArtifact('app.bin', 3, first.matches[2]!.artifactId);
  expect(rest).toEqual({ matches: expected.slice(3), more: false });
  expect((await index.searchArtifact('other.bin', 10)).matches).toEqual([
    { artifactId: artifactId('other.bin', 'a'), seq: 4 },
  ]);
  expect(await index.searchArtifact('none.bin', 10)).toEqual({ matches: [], more: false });
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
    expect(await again.findAnchor(id(1, { artifact: 'app.bin', scope: 'a' }))).toBe(0);
    expect((await again.searchArtifact('app.bin', 10)).matches).toHaveLength(4);
    await again.close();
  });

  /** An index as an earlier version left it: its text-keyed rows. */
  async function oldIndex(rows: Record<string, number>): Promise<string> {
    const path = join(scratchDir('stele-index-old-'), 'index');
    const db = open<number, string>({ path, compression: false });
    for (const [key, value] of Object.entries(rows)) await db.put(key, value);
    await db.close();
    return path;
  }

  it('an index written before these rows existed is outdated until cleared', async () => {
    // What a version-1 index holds: rows and a size, no schema.
    const index = new LmdbIndex(await oldIndex({ 'meta:size': 3, [`d:${digest(1)}`]: 0 }));
    expect(await index.outdated()).toBe(true);
    await index.clear();
    expect(await index.outdated()).toBe(false);
    expect(await index.indexedSize()).toBe(0);
    await index.close();
  });

  it('reads and extends an index keyed as text (layout 1) as it is; rebuilt, it keys rows by their bytes', async () => {
    const path = await oldIndex({ 'meta:size': 1, 'meta:schema': INDEX_SCHEMA, [`d:${digest(1)}`]: 0 });
    const index = new LmdbIndex(path);
    expect(await index.outdated()).toBe(false);
    expect(await index.findByDigest(digest(1))).toBe(0);
    await index.onBatch(batch(1, [entry(2)]));
    await index.close();
    const text = open<number, string>({ path, compression: false, readOnly: true });
    expect(text.get(`d:${digest(2)}`)).toBe(1);
    await text.close();

    const rebuilt = new LmdbIndex(path);
    await rebuilt.clear();
    await rebuilt.onBatch(batch(0, [entry(1, { artifact: 'app.bin' })]));
    await rebuilt.close();
    const rows = open<number, string | Buffer>({ path, compression: false, readOnly: true });
    expect(rows.get(rowKey('digest', digest(1)))).toBe(0);
    expect(rows.get(rowKey('artifact', artifactId('app.bin')))).toBe(0);
    expect(rows.get(`d:${digest(1)}`)).toBeUndefined();
    // The previous version, which reads text keys only, finds this index outdated and rebuilds it.
    expect(rows.get('meta:schema')).not.toBe(INDEX_SCHEMA);
    await rows.close();
    const reopened = new LmdbIndex(path);
    expect(await reopened.outdated()).toBe(false);
    expect(await reopened.findByDigest(digest(1))).toBe(0);
    await reopened.close();
  });

  it('an index marked as text-keyed that holds rows keyed by bytes is outdated, not misread', async () => {
    const path = join(scratchDir('stele-index-mixed-'), 'index');
    const written = new LmdbIndex(path);
    await written.onBatch(batch(0, [entry(1)]));
    await written.close();
    // What a development build left: byte-keyed rows under the text layout's mark.
    const db = open<number, string | Buffer>({ path, compression: false });
    await db.put('meta:schema', INDEX_SCHEMA);
    await db.close();
    const index = new LmdbIndex(path);
    expect(await index.outdated()).toBe(true);
    await index.close();
  });

  it('keys a row by its bytes, or by its text under another tag when it is not in the usual form', () => {
    expect(rowKey('digest', digest(7))).toHaveLength(33);
    expect(rowKey('anchor', digest(7))).toHaveLength(33);
    expect(rowKey('artifact', artifactId('x'))).toHaveLength(13);
    // The same bytes under two kinds, and a value's two forms, are different keys.
    expect(rowKey('digest', digest(7)).equals(rowKey('anchor', digest(7)))).toBe(false);
    expect(rowKey('digest', digest(0xabc).toUpperCase()).equals(rowKey('digest', digest(0xabc)))).toBe(false);
    expect(rowKey('artifact', 'art_a').toString('utf8', 1)).toBe('art_a');
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
