// S3 request figures (issue 5), against s3rver on loopback with the DynamoDB lock on
// dynalite and the KMS stand-in signing — the production composition of openAwsLog():
//   S3 PUTs, GETs, LISTs and DELETE requests per 1,000 anchors at batch sizes 1, 100 and
//   10,000 (from the stores' own counters), KMS Sign calls and DynamoDB lock writes per
//   1,000 anchors, and anchors/s against the local S3 server;
//   the floor: one level-0 hash tile, one entry bundle and one record bundle per 256
//   entries (≈ 11.7 PUTs per 1,000 anchors) plus each batch's partial tiles and checkpoint;
//   DynamoDB index writes per 1,000 anchors (one batch size, index on);
//   reader GETs per inclusion proof from a cold cache (what CloudFront misses cost).
// `--quick` / BENCH_QUICK=1 shrinks the anchor counts.
import { anchorRequest } from '../src/anchor.js';
import type { DynamoIndex } from '../src/aws/dynamo-index.js';
import type { DynamoLock } from '../src/aws/dynamo-lock.js';
import { openAwsLog } from '../src/aws/log.js';
import { S3ObjectStore } from '../src/store/s3.js';
import { LogReader } from '../src/reader.js';
import { TILE_WIDTH } from '../src/tiles.js';
import { startDynamoServer } from '../test/helpers/dynamo-server.js';
import { startKmsStandIn } from '../test/helpers/kms-standin.js';
import { startS3Server } from '../test/helpers/s3-server.js';
import { QUICK, figure, note, now } from './util.js';

const ORIGIN = 'bench.stele/s3';

function request(i: number) {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  return anchorRequest('ledger_anchor', 'Anchored', digest, { artifact: `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`, scope: 'acme/ci' });
}

export default async function main(): Promise<void> {
  const [s3, ddb, kms] = await Promise.all([startS3Server(), startDynamoServer(), startKmsStandIn()]);
  let run = 0;
  const open = async (batch: number, index: boolean) => {
    const table = `bench${run}`;
    await ddb.createTable(table);
    const p = `bench-${run++}/`;
    return openAwsLog({
      origin: ORIGIN,
      region: 'us-east-1',
      credentials: s3.credentials,
      s3: { bucket: s3.bucket, publicPrefix: `${p}log/`, stagingPrefix: `${p}private/`, endpoint: s3.endpoint, forcePathStyle: true, requireConditionalWrites: false },
      dynamo: { table, endpoint: ddb.endpoint },
      signer: { kind: 'kms', keyId: kms.keyId, endpoint: kms.endpoint },
      index,
      maxBatch: batch,
      batchInterval: 60_000, // batches start when the pool holds maxBatch anchors: exact batch sizes
      maxPending: 1_000_000,
      heartbeatMs: 0,
    });
  };

  try {
    note('s3rver (loopback, one bucket on a temp dir), dynalite lock, KMS stand-in; counts from S3ObjectStore.stats');
    note('per batch the sequencer writes: 1 staged batch, the level-0 partial tile, the entry and record partial bundles,');
    note('checkpoint.json and checkpoint (≈ 6 PUTs), plus the full tiles it completes; the floor counts the partials and the checkpoint');
    const floorFull = (3 * 1000) / TILE_WIDTH;
    figure('floor full-tile PUTs per 1000 anchors', floorFull, 'PUTs');
    const counts = QUICK ? { 1: 300, 100: 5_000, 10_000: 20_000 } : { 1: 1_000, 100: 20_000, 10_000: 100_000 };
    for (const [batch, total] of Object.entries(counts).map(([b, t]) => [Number(b), t] as const)) {
      const log = await open(batch, false);
      const pub = { ...log.store.stats };
      const stg = { ...log.staging.stats };
      const signs0 = kms.calls.Sign ?? 0;
      const lockWrites0 = (log.lock as DynamoLock).stats.writes;
      const t0 = now();
      let batches = 0;
      log.sequencer.onPublished(() => batches++);
      await Promise.all(Array.from({ length: total }, (_, i) => log.sequencer.submit(request(i))));
      const seconds = (now() - t0) / 1000;
      await log.sweepIdle();
      const per = (n: number) => (n * 1000) / total;
      const publicPuts = log.store.stats.puts - pub.puts;
      const stagingPuts = log.staging.stats.puts - stg.puts;
      const puts = publicPuts + stagingPuts;
      const gets = log.store.stats.gets - pub.gets + log.staging.stats.gets - stg.gets;
      const lists = log.store.stats.lists - pub.lists;
      const deletes = log.store.stats.deletes - pub.deletes + log.staging.stats.deletes - stg.deletes;
      const floor = floorFull + (4 * batches * 1000) / total; // + 3 partials and the checkpoint per batch
      note(`batch ${batch}: ${total} anchors in ${batches} batches, ${seconds.toFixed(2)} s`);
      figure(`S3 PUTs per 1000 anchors (batch ${batch})`, per(puts), 'PUTs');
      figure(`  public PUTs per 1000 anchors (batch ${batch})`, per(publicPuts), 'PUTs');
      figure(`  staging PUTs per 1000 anchors (batch ${batch})`, per(stagingPuts), 'PUTs');
      figure(`S3 GETs per 1000 anchors (batch ${batch})`, per(gets), 'GETs');
      figure(`S3 LISTs per 1000 anchors (batch ${batch})`, per(lists), 'LISTs');
      figure(`S3 DELETE requests per 1000 anchors (batch ${batch})`, per(deletes), 'requests');
      figure(`floor PUTs per 1000 anchors (batch ${batch})`, floor, 'PUTs');
      figure(`PUTs / floor (batch ${batch})`, puts / total / (floor / 1000), 'x');
      figure(`KMS Sign calls per 1000 anchors (batch ${batch})`, per((kms.calls.Sign ?? 0) - signs0), 'calls');
      figure(`DynamoDB lock writes per 1000 anchors (batch ${batch})`, per((log.lock as DynamoLock).stats.writes - lockWrites0), 'writes');
      figure(`anchors/s on s3rver (batch ${batch})`, total / seconds, 'anchors/s');

      if (batch === 100) {
        // What a verifier costs: inclusion proofs at the final size from a cold reader cache.
        const reader = new LogReader(
          new S3ObjectStore({ bucket: s3.bucket, prefix: log.store.prefix, endpoint: s3.endpoint, forcePathStyle: true, credentials: s3.credentials }),
          { unverified: true },
        );
        const size = log.sequencer.checkpoint.size;
        const sample = 200;
        const source = reader.source as S3ObjectStore;
        for (let i = 0; i < sample; i++) {
          const seq = Math.floor((i * size) / sample);
          await reader.inclusionProof(seq, size);
          await reader.entry(seq, size);
        }
        figure('reader GETs per verified entry, warm LogReader (batch 100 log)', source.stats.gets / sample, 'GETs');
        const cold = new LogReader(reader.source, { unverified: true });
        const before = source.stats.gets;
        await cold.inclusionProof(size - 1, size);
        await cold.entry(size - 1, size);
        figure('reader GETs per verified entry, cold cache (batch 100 log)', source.stats.gets - before, 'GETs');
      }
      await log.close();
    }

    // Group commit: with a 1 s batch interval the batch size is the anchor rate, so the
    // per-batch overhead (≈ 6 PUTs, + the level-1 partial when a tile completes) is spread
    // over more anchors as the rate grows. Projection from the counts measured above.
    note('projected with a 1 s batch interval (batch = rate): 11.72 + (6 + min(1, B/256)) x 1000/B PUTs per 1000 anchors');
    for (const rate of [1, 10, 100, 1000, 10_000]) {
      const puts = floorFull + ((6 + Math.min(1, rate / TILE_WIDTH)) * 1000) / rate;
      figure(`projected S3 PUTs per 1000 anchors at ${rate} anchors/s`, puts, 'PUTs');
      figure(`projected PUTs / floor at ${rate} anchors/s`, puts / (floorFull + (4 * 1000) / rate), 'x');
    }

    // DynamoDB index writes (the lookup index every API replica reads).
    const total = QUICK ? 1_000 : 5_000;
    const log = await open(100, true);
    await Promise.all(Array.from({ length: total }, (_, i) => log.sequencer.submit(request(i))));
    await log.close();
    const idx = (log.index as DynamoIndex).stats;
    figure('DynamoDB index writes per 1000 anchors (batch 100, artifact on every anchor)', (idx.writes * 1000) / total, 'writes');
    figure('DynamoDB index reads per 1000 anchors (batch 100)', (idx.reads * 1000) / total, 'reads');
  } finally {
    await Promise.all([s3.close(), ddb.close(), kms.close()]);
  }
}
