// `stele log fsck --aws` and `stele log recover --aws` as subprocesses over a real AWS-backend
// log (openAwsLog on s3rver and dynalite, a key file instead of KMS), configured through the
// environment as `stele serve` is: a clean log passes; a deleted DynamoDB lock item (a table
// restored without it) is reported, then rebuilt from the published checkpoint; a corrupted
// tile in the bucket is named and stops recover.
import { DeleteItemCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import type { AwsLogConfig } from '../../src/serve/aws-config.js';
import { openAwsLog } from '../../src/serve/aws-log.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { digestOf } from '../helpers/logs.js';
import { type S3Server, plainClient, startS3Server } from '../helpers/s3-server.js';

const ORIGIN = 'fsck-aws.test/log';
let s3: S3Server;
let ddb: DynamoServer;
let plain: S3Client;
let sb: Sandbox;

beforeAll(async () => {
  await ensureBuilt();
  [s3, ddb] = await Promise.all([startS3Server(), startDynamoServer()]);
  plain = plainClient(s3);
  sb = new Sandbox('stele-log-aws-');
}, 120_000);
afterAll(async () => {
  plain?.destroy();
  await Promise.all([s3?.close(), ddb?.close()]);
  sb?.cleanup();
});

/** A fresh log (its own table and prefix) of `waves` batches, closed; the env that names it. */
async function makeAwsLog(waves: number[]) {
  const table = `t${randomBytes(4).toString('hex')}`;
  await ddb.createTable(table);
  const p = `fsck-${randomBytes(4).toString('hex')}/`;
  const keyFile = join(sb.root, `${table}.key`);
  const config: AwsLogConfig = {
    origin: ORIGIN,
    region: 'us-east-1',
    credentials: s3.credentials,
    s3: {
      bucket: s3.bucket,
      publicPrefix: `${p}log/`,
      stagingPrefix: `${p}private/`,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      requireConditionalWrites: false,
      sweepPartials: false,
    },
    dynamo: { table, endpoint: ddb.endpoint },
    signer: { kind: 'key-file', path: keyFile },
    index: false,
    batchInterval: 5,
    heartbeatMs: 0,
  };
  const log = await openAwsLog(config);
  let n = 0;
  for (const count of waves)
    await Promise.all(
      Array.from({ length: count }, () =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(p, n++))),
      ),
    );
  await log.close();
  const env = {
    STELE_ORIGIN: ORIGIN,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    STELE_S3_BUCKET: s3.bucket,
    STELE_S3_PREFIX: `${p}log/`,
    STELE_S3_STAGING_PREFIX: `${p}private/`,
    STELE_S3_ENDPOINT: s3.endpoint,
    STELE_S3_FORCE_PATH_STYLE: 'true',
    STELE_DYNAMO_TABLE: table,
    STELE_DYNAMO_ENDPOINT: ddb.endpoint,
    STELE_KEY_FILE: keyFile,
  };
  return { env, table, prefix: `${p}log/` };
}

const lockKey = { pk: { S: `lock#${ORIGIN}` }, sk: { S: 'lock' } };
const dynamo = () => new DynamoDBClient({ endpoint: ddb.endpoint, region: ddb.region, credentials: ddb.credentials });

describe('stele log fsck/recover --aws', () => {
  it('passes a clean log, reports a deleted lock item, rebuilds it from the published checkpoint', async () => {
    const { env, table } = await makeAwsLog([3, 300, 40]);
    const clean = await sb.json(['log', 'fsck', '--aws'], env);
    expect(clean.stderr).toBe('');
    expect(clean.code).toBe(0);
    expect(clean.out).toMatchObject({
      result: 'PASS',
      checkpoint: { size: 343 },
      lock: { relation: 'equal', size: 343 },
    });
    expect(clean.out.audit.entriesChecked).toBe(343);

    const client = dynamo();
    try {
      await client.send(new DeleteItemCommand({ TableName: table, Key: lockKey }));
      const lost = await sb.json(['log', 'fsck', '--aws'], env);
      expect(lost.code).toBe(1);
      expect(lost.out.lock.relation).toBe('missing');

      const r = await sb.json(['log', 'recover', '--aws'], env);
      expect(r.code).toBe(0);
      expect(r.out).toMatchObject({
        result: 'recovered',
        size: 343,
        root: clean.out.checkpoint.root,
        previous: { relation: 'missing' },
      });
      const item = await client.send(new GetItemCommand({ TableName: table, Key: lockKey, ConsistentRead: true }));
      expect(JSON.parse(item.Item!.state!.S!)).toMatchObject({ size: 343, root: clean.out.checkpoint.root });
      const after = await sb.json(['log', 'fsck', '--aws'], env);
      expect(after.code).toBe(0);
      expect(after.out.lock.relation).toBe('equal');
    } finally {
      client.destroy();
    }
  }, 60_000);

  it('names a corrupted tile in the bucket, and recover refuses over it', async () => {
    const { env, table, prefix } = await makeAwsLog([300]);
    const key = `${prefix}tile/0/000`;
    const got = await plain.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    const bytes = Buffer.from(await got.Body!.transformToByteArray());
    bytes[33]! ^= 0x01;
    await plain.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: bytes }));
    const r = await sb.json(['log', 'fsck', '--aws'], env);
    expect(r.code).toBe(1);
    expect(r.out.firstBad).toBe('tile/0/000');

    const client = dynamo();
    try {
      await client.send(new DeleteItemCommand({ TableName: table, Key: lockKey }));
      const refused = await sb.json(['log', 'recover', '--aws'], env);
      expect(refused.code).toBe(1);
      expect(refused.out).toMatchObject({ result: 'refused', reason: 'unverified', firstBad: 'tile/0/000' });
      const item = await client.send(new GetItemCommand({ TableName: table, Key: lockKey, ConsistentRead: true }));
      expect(item.Item).toBeUndefined();
    } finally {
      client.destroy();
    }
  }, 60_000);
});
