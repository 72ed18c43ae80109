// The DynamoDB lookup index reconciled with the tree at start (issue 14, item 3), against a
// real DynamoDB-protocol server (dynalite): an index ahead of the tree (rows naming leaves
// the tree does not have) is cleared and rebuilt from the record bundles of a real log; the
// other logs sharing the table are untouched; an index of the previous layout is read as
// empty until it is rebuilt the same way.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { DynamoIndex } from '../../src/aws/dynamo-index.js';
import { artifactId } from '../../src/core/entry.js';
import { reconcileIndex } from '../../src/index/catchup.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { LogReader } from '../../src/read/reader.js';
import { type PublishedCheckpoint, batchOfEntries } from '../../src/sequencer/contract.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { scratchDir } from '../helpers/tmp.js';
import { firstCandidate } from '../helpers/index-rows.js';
import { indexItems } from '../helpers/dynamo-items.js';
import { labelKey } from '../../src/index/keys.js';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';

const N = 300;
const digestOf = (i: number) => i.toString(16).padStart(64, '0');
let ddb: DynamoServer;
let reader: LogReader;
let checkpoint: PublishedCheckpoint;

beforeAll(async () => {
  ddb = await startDynamoServer();
  const dataDir = scratchDir('stele-dynamo-reconcile-');
  const { sequencer } = await openLocalLog({ dataDir, origin: 'reconcile.test/log', fsync: false, batchInterval: 1 });
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(i), { artifact: `a${i}` })),
    ),
  );
  checkpoint = sequencer.checkpoint;
  await sequencer.close();
  reader = new LogReader(new FsObjectStore(join(dataDir, 'log')));
}, 60_000);

afterAll(async () => ddb?.close());

const conn = () => ({ endpoint: ddb.endpoint, region: ddb.region, credentials: ddb.credentials, table: ddb.table });
const ghost = (i: number) => ({
  v: 1 as const,
  type: 'ghost',
  result: 'Anchored',
  digest: digestOf(1_000_000 + i),
  timestamp: '2026-01-01T00:00:00.000Z',
  artifactId: artifactId(`a${i}`),
});

describe('DynamoIndex reconciled with the tree', () => {
  it('an index ahead of the tree is cleared and rebuilt; another log in the table keeps its rows', async () => {
    const index = new DynamoIndex({ ...conn(), log: 'reconcile.test/log' });
    const neighbour = new DynamoIndex({ ...conn(), log: 'other.test/log' });
    await neighbour.onBatch(batchOfEntries(0, [ghost(0)], checkpoint));
    // the first start indexes the log
    expect(await reconcileIndex(index, reader, checkpoint)).toBe(N);
    expect(await index.findByDigest(digestOf(7), firstCandidate)).toBe(7);
    // ten rows beyond the tree (a restored table, or a log rolled back under it); a5's latest now says leaf 305
    await index.onBatch(
      batchOfEntries(
        N,
        Array.from({ length: 10 }, (_, i) => ghost(i)),
        checkpoint,
      ),
    );
    expect(await index.indexedSize()).toBe(N + 10);
    expect(await index.findByArtifact(artifactId('a5'), firstCandidate)).toBe(N + 5);

    expect(await reconcileIndex(index, reader, checkpoint)).toBe(N);
    expect(await index.indexedSize()).toBe(N);
    expect(await index.countsByType()).toEqual({ ledger_anchor: N });
    expect(await index.findByDigest(digestOf(1_000_003), firstCandidate)).toBeUndefined();
    expect(await index.findByArtifact(artifactId('a5'), firstCandidate)).toBe(5);
    expect(await index.findByDigest(digestOf(N - 1), firstCandidate)).toBe(N - 1);
    expect(await neighbour.findByDigest(digestOf(1_000_000), firstCandidate)).toBe(0);
    expect(await neighbour.indexedSize()).toBe(1);
    await index.close();
    await neighbour.close();
  });

  it('an index of the previous layout (label rows, hex keys) is read as empty, never misread, and rebuilt', async () => {
    const log = 'reconcile.test/previous';
    const index = new DynamoIndex({ ...conn(), log });
    // Items as the previous layout wrote them, each naming a wrong leaf: were they read, a
    // lookup with a confirm that takes the first candidate would answer it.
    const ns = `idx#${log}`;
    const put = (pk: string, sk: string, attrs: Record<string, { N: string }>) =>
      index.client.send(new PutItemCommand({ TableName: ddb.table, Item: { pk: { S: pk }, sk: { S: sk }, ...attrs } }));
    const a7 = artifactId('a7');
    await put(`${ns}#d#${digestOf(7)}`, 'leaf', { leaf: { N: '9' } });
    await put(`${ns}#a#${a7}`, 'leaf', { leaf: { N: '9' } });
    await put(`${ns}#n#${labelKey('a7')}`, a7, { leaf: { N: '9' } });
    await put(`${ns}#meta`, 'meta', { size: { N: String(N) }, schema: { N: '3' }, 'count:ledger_anchor': { N: '5' } });

    expect(await index.outdated()).toBe(true);
    expect(await index.indexedSize()).toBe(0); // so the API answers 503 index_not_ready, not a 404
    expect(await index.countsByType()).toEqual({});
    expect(await index.findByDigest(digestOf(7), firstCandidate)).toBeUndefined();
    expect(await index.findByArtifact(a7, firstCandidate)).toBeUndefined();
    expect(await index.searchArtifact('a7', 10, undefined, async () => true)).toEqual({ matches: [], more: false });
    await expect(index.onBatch(batchOfEntries(N, [ghost(0)], checkpoint))).rejects.toThrow(/older layout/);

    // A start rebuilds it: the previous items go, this layout's answer.
    expect(await reconcileIndex(index, reader, checkpoint)).toBe(N);
    expect(await index.outdated()).toBe(false);
    expect(await index.findByDigest(digestOf(7), firstCandidate)).toBe(7);
    expect(await index.findByArtifact(a7, firstCandidate)).toBe(7);
    expect(await index.searchArtifact('a7', 10, undefined, async () => true)).toEqual({
      matches: [{ artifactId: a7, seq: 7 }],
      more: false,
    });
    expect(await index.countsByType()).toEqual({ ledger_anchor: N });
    const items = await indexItems(index.client, ddb.table, log);
    expect(items.length).toBe(2 * N + 1); // a digest and an artifact item per entry, one scope item ("" here)
    expect(items.some((i) => i.sk?.S === 'leaf' || i.pk!.S!.includes('#n#'))).toBe(false);
    await index.close();
  });
});
