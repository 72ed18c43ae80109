// S3 request figures (issues 5 and 22), against a real S3 implementation: Ceph's RADOS
// Gateway on a one-node loopback cluster (test/helpers/rgw.ts), with the sequencer's lock in
// the bucket (no DynamoDB) and the KMS stand-in signing — openAwsLog() as a self-hosted log runs:
//   S3 PUTs (lock writes included), GETs, LISTs and DELETE requests per 1,000 anchors at
//   batch sizes 1, 100 and 10,000 (from the stores' own counters), KMS Sign calls per 1,000
//   anchors, anchors/s and the process's CPU per 1,000 anchors (from /proc via
//   process.cpuUsage; RGW's own CPU is not counted);
//   follower catch-up: an API replica's own LMDB index filled from the record bundles
//   (IndexFollower), entries/s and CPU per 1,000 entries;
//   the floor: one level-0 hash tile, one entry bundle and one record bundle per 256
//   entries (≈ 11.7 PUTs per 1,000 anchors) plus each batch's partial tiles and checkpoint;
//   DynamoDB index writes per 1,000 anchors (one batch size, index on dynalite);
//   reader GETs per inclusion proof from a cold cache (what CloudFront misses cost).
// `--quick` / BENCH_QUICK=1 shrinks the anchor counts.
import { join } from 'node:path';
import { anchorRequest } from '../src/core/anchor.js';
import type { DynamoIndex } from '../src/aws/dynamo-index.js';
import { openAwsLog } from '../src/serve/aws-log.js';
import { IndexFollower } from '../src/index/follower.js';
import { LmdbIndex } from '../src/index/lmdb.js';
import { SIG_ED25519, makeVerifier } from '../src/core/note.js';
import { LogReader } from '../src/read/reader.js';
import { decodePublishedCheckpoint } from '../src/sequencer/contract.js';
import { CHECKPOINT_JSON_KEY } from '../src/store/layout.js';
import { S3ObjectStore } from '../src/store/s3.js';
import { TILE_WIDTH } from '../src/core/tiles.js';
import { startDynamoServer } from '../test/helpers/dynamo-server.js';
import { startKmsStandIn } from '../test/helpers/kms-standin.js';
import { rgwLogStorage, startRgw } from '../test/helpers/rgw.js';
import { QUICK, ScratchDirs, figure, note, now } from './util.js';

const ORIGIN = 'bench.stele/s3';

function request(i: number) {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  return anchorRequest('ledger_anchor', 'Anchored', digest, {
    artifact: `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`,
    scope: 'acme/ci',
  });
}

export default async function main(): Promise<void> {
  const [s3, ddb, kms] = await Promise.all([
    startRgw({ memoryBytes: 4 * 1024 ** 3 }),
    startDynamoServer(),
    startKmsStandIn(),
  ]);
  let run = 0;
  const open = async (batch: number, index: boolean) => {
    const table = `bench${run}`;
    if (index) await ddb.createTable(table);
    const p = `bench-${run++}/`;
    return openAwsLog({
      origin: ORIGIN,
      ...rgwLogStorage(s3, p),
      // The index figures use the DynamoDB index (dynalite); otherwise the self-hosted shape: the lock in the bucket, no table.
      ...(index
        ? { dynamo: { table, endpoint: ddb.endpoint }, lock: 'dynamodb' as const }
        : { lock: 'bucket' as const }),
      signer: { kind: 'kms', keyId: kms.keyId, endpoint: kms.endpoint },
      index,
      maxBatch: batch,
      batchInterval: 60_000, // batches start when the pool holds maxBatch anchors: exact batch sizes
      maxPending: 1_000_000,
      heartbeatMs: 0,
    });
  };

  try {
    note(
      'Ceph RGW 16 (one-node loopback cluster, memstore OSD), lock in the bucket, KMS stand-in; counts from S3ObjectStore.stats',
    );
    note(
      'per batch the sequencer writes: the lock record (with small batches inline, else 1 staged batch), the level-0 partial tile,',
    );
    note('the entry and record partial bundles, checkpoint.json and checkpoint, plus the full tiles it completes');
    note(
      'the machine is shared: anchors/s is wall-clock and noisy; CPU ms per 1000 anchors is this process only (process.cpuUsage)',
    );
    const floorFull = (3 * 1000) / TILE_WIDTH;
    figure('floor full-tile PUTs per 1000 anchors', floorFull, 'PUTs');
    const counts = QUICK ? { 1: 300, 100: 5_000, 10_000: 20_000 } : { 1: 1_000, 100: 20_000, 10_000: 100_000 };
    for (const [batch, total] of Object.entries(counts).map(([b, t]) => [Number(b), t] as const)) {
      const log = await open(batch, false);
      const pub = { ...log.store.stats };
      const stg = { ...log.staging.stats };
      const signs0 = kms.calls.Sign ?? 0;
      const cpu0 = process.cpuUsage();
      const t0 = now();
      let batches = 0;
      log.sequencer.onPublished(() => batches++);
      await Promise.all(Array.from({ length: total }, (_, i) => log.sequencer.submit(request(i))));
      const seconds = (now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
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
      figure(`anchors/s on RGW (batch ${batch})`, total / seconds, 'anchors/s');
      figure(`sequencer CPU per 1000 anchors on RGW (batch ${batch})`, per((cpu.user + cpu.system) / 1000), 'ms');

      if (batch === 100) {
        // What a verifier costs: inclusion proofs at the final size from a cold reader cache.
        const reader = new LogReader(
          new S3ObjectStore({
            bucket: s3.bucket,
            prefix: log.store.prefix,
            endpoint: s3.endpoint,
            forcePathStyle: true,
            credentials: s3.credentials,
          }),
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

        // Follower catch-up: a replica's own index, from empty, over the whole log.
        const dirs = new ScratchDirs();
        const index = new LmdbIndex(join(dirs.make('stele-bench-follow-'), 'index'));
        const verifier = makeVerifier(ORIGIN, SIG_ED25519, log.signer.publicKey);
        const followReader = new LogReader(source);
        const follower = new IndexFollower(index, followReader, async () => {
          const cp = decodePublishedCheckpoint((await source.get(CHECKPOINT_JSON_KEY))!, verifier);
          followReader.trust(cp);
          return cp;
        });
        const f0 = now();
        const c0 = process.cpuUsage();
        const served = await follower.poll();
        const fs = (now() - f0) / 1000;
        const fc = process.cpuUsage(c0);
        note(`follower caught up ${served!.size} entries in ${fs.toFixed(2)} s`);
        figure('follower catch-up rate on RGW (from empty)', served!.size / fs, 'entries/s');
        figure('follower catch-up CPU per 1000 entries', ((fc.user + fc.system) / 1000) * (1000 / served!.size), 'ms');
        await index.close();
        dirs.removeAll();
      }
      await log.close();
    }

    // Group commit: with a 1 s batch interval the batch size is the anchor rate, so the
    // per-batch overhead (≈ 6 PUTs, + the level-1 partial when a tile completes) is spread
    // over more anchors as the rate grows. Projection from the counts measured above.
    note(
      'projected with a 1 s batch interval (batch = rate): 11.72 + (6 + min(1, B/256)) x 1000/B PUTs per 1000 anchors',
    );
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
    figure(
      'DynamoDB index writes per 1000 anchors (batch 100, artifact on every anchor)',
      (idx.writes * 1000) / total,
      'writes',
    );
    figure('DynamoDB index reads per 1000 anchors (batch 100)', (idx.reads * 1000) / total, 'reads');
  } finally {
    await Promise.all([s3.close(), ddb.close(), kms.close()]);
  }
}
