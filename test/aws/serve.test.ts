// `stele serve` with STELE_BACKEND=aws, as the CDK stack runs it: the sequencer role and a
// read-only API replica, both real processes, over s3rver (S3), dynalite (DynamoDB) and the
// KMS stand-in (AWS KMS itself cannot run here).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { hashFromHex, leafHash } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { awsLogConfigFromEnv } from '../../src/serve/aws-config.js';
import { openAwsLog } from '../../src/serve/aws-log.js';
import { digestOf, getJson, postAnchor } from '../api/server.js';
import { ensureBuilt } from '../helpers/cli.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { type KmsStandIn, startKmsStandIn } from '../helpers/kms-standin.js';
import { type S3Server, startS3Server } from '../helpers/s3-server.js';
import { repoRoot } from '../helpers/tlogcheck.js';

let s3: S3Server;
let ddb: DynamoServer;
let kms: KmsStandIn;
const children: ChildProcess[] = [];

function awsEnv(role: 'sequencer' | 'api', over: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    STELE_BACKEND: 'aws',
    STELE_ROLE: role,
    STELE_MODE: 'production',
    ...(role === 'sequencer' ? { STELE_ANCHOR_TOKENS: 'ci=tok_0123456789abcdef0123' } : {}),
    STELE_ORIGIN: 'aws.serve.test/log',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    STELE_S3_BUCKET: s3.bucket,
    STELE_S3_ENDPOINT: s3.endpoint,
    STELE_S3_FORCE_PATH_STYLE: 'true',
    STELE_S3_PREFIX: 'serve/log/',
    STELE_S3_STAGING_PREFIX: 'serve/private/',
    STELE_S3_REQUIRE_CONDITIONAL_WRITES: 'false',
    STELE_DYNAMO_TABLE: ddb.table,
    STELE_DYNAMO_ENDPOINT: ddb.endpoint,
    STELE_KMS_KEY_ID: kms.keyId,
    STELE_KMS_ENDPOINT: kms.endpoint,
    STELE_BATCH_INTERVAL_MS: '20',
    STELE_HEARTBEAT_MS: '0',
    ...over,
  };
}

async function serve(role: 'sequencer' | 'api', over: NodeJS.ProcessEnv = {}): Promise<{ url: string; keyId: string }> {
  const child = spawn(
    process.execPath,
    ['dist/cli/main.js', 'serve', '--port', '0', '--json', '--log-level', 'error'],
    {
      cwd: repoRoot,
      env: awsEnv(role, over),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const [line] = (await Promise.race([
    once(child.stdout!, 'data'),
    once(child, 'exit').then(() => [Buffer.from('')]),
  ])) as [Buffer];
  if (!line.length) throw new Error(`serve (${role}) exited: ${err}`);
  return JSON.parse(line.toString()) as { url: string; keyId: string };
}

beforeAll(async () => {
  [s3, ddb, kms] = await Promise.all([startS3Server(), startDynamoServer(), startKmsStandIn(), ensureBuilt()]);
});

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null) {
      c.kill('SIGTERM');
      await once(c, 'exit');
    }
  }
  await Promise.all([s3?.close(), ddb?.close(), kms?.close()]);
});

describe('stele serve on the AWS backend', () => {
  it('runs the sequencer and a read-only replica that answer the same proofs', async () => {
    const seq = await serve('sequencer');
    const auth = { authorization: 'Bearer tok_0123456789abcdef0123' };
    expect((await postAnchor(seq.url, { digest: digestOf(1) })).status).toBe(401);
    const anchored = await Promise.all(
      Array.from({ length: 40 }, (_, i) => postAnchor(seq.url, { digest: digestOf(i), artifact: `a${i}` }, auth)),
    );
    expect(anchored.every((r) => r.status === 201)).toBe(true);
    const key = (await getJson(`${seq.url}/api/ledger/key`)).body;
    expect(Buffer.from(key.publicKey, 'base64')).toEqual(Buffer.from(kms.publicKey));

    const replica = await serve('api');
    expect(replica.keyId).toBe(seq.keyId);
    const viaReplica = await getJson(`${replica.url}/api/ledger/entry?hash=${digestOf(17)}`);
    expect(viaReplica.status).toBe(200);
    const e = viaReplica.body;
    expect(
      verifyInclusion(
        e.leafIndex,
        e.treeSize,
        leafHash(hashFromHex(e.entry.proof.entryHash)),
        e.auditPath.map(hashFromHex),
        hashFromHex(e.rootHash),
      ),
    ).toBe(true);
    const viaSequencer = await getJson(`${seq.url}/api/ledger/entry?hash=${digestOf(17)}`);
    expect(viaReplica.body.auditPath).toEqual(viaSequencer.body.auditPath);
    expect((await postAnchor(replica.url, { digest: digestOf(99) })).body.error.code).toBe('read_only');

    // The replica follows new checkpoints.
    const next = await postAnchor(seq.url, { digest: digestOf(1000) }, auth);
    await expect
      .poll(async () => (await getJson(`${replica.url}/api/ledger/checkpoint`)).body.treeSize, { timeout: 15_000 })
      .toBe(next.body.checkpoint.treeSize);
    expect((await fetch(`${replica.url}/checkpoint`)).status).toBe(200);

    // Duplicates on AWS: the DynamoDB index holds the first copy; identical anchors sent at once make one entry.
    const dup = await postAnchor(seq.url, { digest: digestOf(17), artifact: 'a17' }, auth);
    expect(dup.status).toBe(200);
    expect(dup.body.leafIndex).toBe(viaSequencer.body.leafIndex);
    const racing = await Promise.all(
      Array.from({ length: 6 }, () => postAnchor(seq.url, { digest: digestOf(2000), artifact: 'race' }, auth)),
    );
    expect(racing.filter((r) => r.status === 201)).toHaveLength(1);
    expect(new Set(racing.map((r) => r.body.leafIndex)).size).toBe(1);
    // The replica lists a label across scopes from the same index.
    const other = await postAnchor(seq.url, { digest: digestOf(2001), artifact: 'a17', scope: 'other' }, auth);
    expect(other.status, JSON.stringify(other.body)).toBe(201);
    const scopes = async () => {
      const found = await getJson(`${replica.url}/api/ledger/search?artifact=a17`);
      expect(found.status).toBe(200);
      return found.body.matches.map((m: { scope?: string }) => m.scope ?? '').sort();
    };
    // The replica shows an entry once it has verified a checkpoint covering it.
    await expect.poll(scopes, { timeout: 15_000, interval: 250 }).toEqual(['', 'other']);
  });
});

describe('the AWS sequencer whose DynamoDB index is lost (issue 35)', () => {
  // Enough entries that rebuilding their index in dynalite takes seconds; the first requests take milliseconds.
  const N = 3_000;
  const over = {
    STELE_ORIGIN: 'aws.lost-index.test/log',
    STELE_S3_PREFIX: 'lost/log/',
    STELE_S3_STAGING_PREFIX: 'lost/private/',
  };
  const lostDigest = (i: number) => (0x7000000 + i).toString(16).padStart(64, '0');

  it('serves at once and rebuilds the index beside the log: 503 index_not_ready for lookups and anchors, never a second entry', async () => {
    // The log is written with no index at all: to the sequencer that starts next, the index is lost.
    const config = awsLogConfigFromEnv(awsEnv('sequencer', over));
    const log = await openAwsLog({
      ...config,
      credentials: s3.credentials,
      index: false,
      batchInterval: 5,
      minBatchSpacing: 0,
    });
    for (let from = 0; from < N; from += 1_000)
      await Promise.all(
        Array.from({ length: 1_000 }, (_, k) =>
          log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', lostDigest(from + k))),
        ),
      );
    await log.close();

    const seq = await serve('sequencer', over);
    const auth = { authorization: 'Bearer tok_0123456789abcdef0123' };
    const [checkpoint, byHash, again] = await Promise.all([
      getJson(`${seq.url}/api/ledger/checkpoint`),
      getJson(`${seq.url}/api/ledger/entry?hash=${lostDigest(N - 1)}`),
      postAnchor(seq.url, { digest: lostDigest(5) }, auth),
    ]);
    expect(checkpoint.status).toBe(200);
    expect(checkpoint.body.treeSize).toBe(N);
    expect(byHash.status).toBe(503);
    expect(byHash.body.error.code).toBe('index_not_ready');
    expect(again.status).toBe(503);
    expect(again.body.error.code).toBe('index_not_ready');

    await expect
      .poll(async () => (await getJson(`${seq.url}/api/ledger/entry?hash=${lostDigest(N - 1)}`)).status, {
        timeout: 120_000,
        interval: 500,
      })
      .toBe(200);
    const duplicate = await postAnchor(seq.url, { digest: lostDigest(5) }, auth);
    expect(duplicate.status).toBe(200);
    expect(duplicate.body.leafIndex).toBe(5);
    expect((await getJson(`${seq.url}/api/ledger/checkpoint`)).body.treeSize).toBe(N);
  }, 180_000);
});
