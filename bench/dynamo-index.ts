// What the DynamoDB lookup index costs per entry (issue 35): `npm run bench -- dynamo-index`
// indexes N anchors (bench/scale.ts's: each with its own digest and a new artifact label, the
// index's largest case; default 20,000, `--quick` 2,000) into DynamoIndex on dynalite, in
// batches of 1,000, then scans the table and prints, one figure a line:
//   dynamo_items_per_entry          items the index holds per entry (its meta item aside)
//   dynamo_billed_bytes_per_entry   bytes DynamoDB bills them for (names, values, 100 per item)
//   dynamo_largest_item_bytes       the largest item: a write of it is one write unit if < 1 KB
//   dynamo_writes_per_entry         write requests per entry (each one write unit)
import { DynamoIndex } from '../src/aws/dynamo-index.js';
import { anchorRequest, buildEntry } from '../src/core/anchor.js';
import type { CanonicalEntry } from '../src/core/entry.js';
import { type PublishedCheckpoint, batchOfEntries } from '../src/sequencer/contract.js';
import { billedBytes, indexItems } from '../test/helpers/dynamo-items.js';
import { startDynamoServer } from '../test/helpers/dynamo-server.js';
import { QUICK, figure, note } from './util.js';

const LOG = 'ledger.example.com/log';
const BATCH = 1_000;
const STAMP = '2026-11-27T15:00:00.000Z';

/** Entry `i` as the sequencer builds it from bench/scale.ts's anchor. */
function entry(i: number): CanonicalEntry {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  const artifact = `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`;
  return buildEntry(anchorRequest('ledger_anchor', 'Anchored', digest, { artifact, scope: 'acme/ci' }), STAMP);
}

export default async function run(args: string[]): Promise<void> {
  const at = args.indexOf('--entries');
  const total = at >= 0 ? Number(args[at + 1]) : QUICK ? 2_000 : 20_000;
  if (!Number.isInteger(total) || total < 1) throw new Error('--entries must be a positive integer');
  const ddb = await startDynamoServer();
  const index = new DynamoIndex({
    endpoint: ddb.endpoint,
    region: ddb.region,
    credentials: ddb.credentials,
    table: ddb.table,
    log: LOG,
  });
  try {
    for (let from = 0; from < total; from += BATCH) {
      const entries = Array.from({ length: Math.min(BATCH, total - from) }, (_, k) => entry(from + k));
      await index.onBatch(batchOfEntries(from, entries, {} as PublishedCheckpoint));
    }
    const items = await indexItems(index.client, ddb.table, LOG);
    note(`${total} entries, log ${JSON.stringify(LOG)}, batches of ${BATCH}`);
    figure('dynamo_items_per_entry', +(items.length / total).toFixed(3), 'items');
    figure('dynamo_billed_bytes_per_entry', +(items.reduce((n, i) => n + billedBytes(i), 0) / total).toFixed(1), 'B');
    figure('dynamo_largest_item_bytes', Math.max(...items.map(billedBytes)), 'B');
    figure('dynamo_writes_per_entry', +(index.stats.writes / total).toFixed(3), 'writes');
  } finally {
    await index.close();
    await ddb.close();
  }
}
