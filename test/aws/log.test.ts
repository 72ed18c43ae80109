// End to end on the AWS backends as they run here: openAwsLog() with the S3 store on
// s3rver, the DynamoDB lock and index on dynalite, and the signer on the KMS stand-in.
// Anchors go in; the log is then verified from the bucket alone — with LogReader and with
// the independent audit of test/helpers/audit.ts over a mirror of the public prefix —
// against the public key obtained from KMS's GetPublicKey.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, promises as fs, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DeleteItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { DynamoLock } from '../../src/aws/dynamo-lock.js';
import { KmsSigner } from '../../src/aws/kms.js';
import { type AwsLogConfig, awsLogConfigFromEnv } from '../../src/serve/aws-config.js';
import { openAwsLog, openAwsReader } from '../../src/serve/aws-log.js';
import { openCheckpoint } from '../../src/core/checkpoint.js';
import { artifactId } from '../../src/core/entry.js';
import { leafHash, toHex } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { SIG_ED25519, makeVerifier } from '../../src/core/note.js';
import { LogReader } from '../../src/read/reader.js';
import type { AnchorReceipt } from '../../src/sequencer/contract.js';
import { CHECKPOINT_KEY } from '../../src/store/layout.js';
import { auditLogDir } from '../helpers/audit.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { type KmsStandIn, startKmsStandIn } from '../helpers/kms-standin.js';
import { type S3Server, plainClient, startS3Server } from '../helpers/s3-server.js';
import { firstCandidate } from '../helpers/index-rows.js';

const ORIGIN = 'ledger.example.com/aws';
let s3: S3Server;
let ddb: DynamoServer;
let kms: KmsStandIn;
let plain: S3Client;

beforeAll(async () => {
  [s3, ddb, kms] = await Promise.all([startS3Server(), startDynamoServer(), startKmsStandIn()]);
  plain = plainClient(s3);
});
afterAll(async () => {
  plain?.destroy();
  await Promise.all([s3?.close(), ddb?.close(), kms?.close()]);
});

const uniq = () => randomBytes(4).toString('hex');
const digest = (i: number) => toHex(new Uint8Array(randomBytes(28))) + i.toString(16).padStart(8, '0');

async function config(over: Partial<AwsLogConfig> = {}, kmsTimeoutMs = 2_000): Promise<AwsLogConfig> {
  const table = `t${uniq()}`;
  await ddb.createTable(table);
  const p = `e2e-${uniq()}/`;
  return {
    origin: ORIGIN,
    region: 'us-east-1',
    credentials: s3.credentials, // s3rver checks SigV4 with these; dynalite and the KMS stand-in do not
    s3: {
      bucket: s3.bucket,
      publicPrefix: `${p}log/`,
      stagingPrefix: `${p}private/`,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      requireConditionalWrites: false,
    },
    dynamo: { table, endpoint: ddb.endpoint },
    signer: { kind: 'kms', keyId: kms.keyId, endpoint: kms.endpoint, timeoutMs: kmsTimeoutMs },
    batchInterval: 10,
    heartbeatMs: 0,
    ...over,
  };
}

async function listAll(prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let token: string | undefined;
  do {
    const res = await plain.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of res.Contents ?? []) out.set(o.Key!, o.ETag!);
    token = res.IsTruncated ? res.NextContinuationToken : undefined;
  } while (token);
  return out;
}

/** Copies a prefix of the bucket to a directory, as `aws s3 sync` would. */
async function mirror(prefix: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'stele-mirror-'));
  for (const key of (await listAll(prefix)).keys()) {
    const res = await plain.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    const file = join(dir, key.slice(prefix.length));
    await fs.mkdir(dirname(file), { recursive: true });
    await fs.writeFile(file, await res.Body!.transformToByteArray());
  }
  return dir;
}

/**
 * Waits until nothing is staged: a batch's staging object goes once its objects are durable,
 * which the sequencer finishes just after the acknowledgement.
 */
const stagingDrained = (stagingPrefix: string): Promise<void> =>
  waitFor(async () => (await listAll(stagingPrefix)).size === 0, 5_000, 'staged batches to be cleaned up');

async function waitFor(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The log's public key as a verifier would get it: from KMS GetPublicKey, not from the sequencer. */
async function kmsVerifier() {
  const k = await KmsSigner.create({
    keyId: kms.keyId,
    name: ORIGIN,
    endpoint: kms.endpoint,
    credentials: s3.credentials,
  });
  k.close();
  return makeVerifier(ORIGIN, SIG_ED25519, k.publicKey);
}

describe('openAwsLog: S3 (s3rver) + DynamoDB (dynalite) + KMS (stand-in)', () => {
  it('refuses an S3 endpoint that ignores conditional writes unless told it is a test server', async () => {
    const cfg = await config();
    await expect(openAwsLog({ ...cfg, s3: { ...cfg.s3, requireConditionalWrites: true } })).rejects.toThrow(
      /ignores conditional writes/,
    );
  });

  it('the bucket lock is refused on an endpoint that ignores conditional writes, and cannot skip the probe', async () => {
    const { dynamo: _, ...cfg } = await config();
    const bucketLock = { ...cfg, lock: 'bucket' as const, index: false };
    await expect(openAwsLog({ ...bucketLock, s3: { ...cfg.s3, requireConditionalWrites: true } })).rejects.toThrow(
      /ignores conditional writes/,
    );
    await expect(openAwsLog(bucketLock)).rejects.toThrow(
      /bucket lock .* cannot run on an endpoint whose conditional writes are not verified/,
    );
    await expect(openAwsLog({ ...cfg, index: false })).rejects.toThrow(/DynamoDB lock needs a table/);
  });

  it('anchors entries, and the log verifies from the bucket alone against the KMS public key; partials are swept; a restart resumes', async () => {
    const cfg = await config();
    const log = await openAwsLog(cfg);
    // The start-up guard lists the level-0 edge (src/sequencer/lock-check.ts): six LISTs, at start only.
    const startLists = log.store.stats.lists;
    expect(startLists).toBeLessThanOrEqual(6);
    const receipts: AnchorReceipt[] = [];
    const submit = (from: number, n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          log.sequencer.submit(
            anchorRequest(
              'ledger_anchor',
              'Anchored',
              digest(from + i),
              (from + i) % 10 === 0 ? { artifact: `build-${(from + i) % 30}` } : {},
            ),
          ),
        ),
      );
    receipts.push(...(await submit(0, 1)));
    receipts.push(...(await submit(1, 300)));
    receipts.push(...(await submit(301, 299)));
    await log.indexReady;
    await log.sweepIdle();
    const size = log.sequencer.checkpoint.size;
    expect(size).toBe(600);

    // The checkpoint in the bucket is a signed note that verifies with the KMS key.
    const verifier = await kmsVerifier();
    const note = Buffer.from((await log.store.get(CHECKPOINT_KEY))!).toString('utf8');
    const cp = openCheckpoint(note, verifier);
    expect(cp.size).toBe(size);

    // LogReader over a fresh S3 store: root, inclusion of every receipt at its own checkpoint and at the final one.
    const reader = new LogReader(log.store, { unverified: true });
    expect(toHex(await reader.treeHash(size))).toBe(toHex(cp.root));
    for (const r of receipts) {
      expect(
        verifyInclusion(r.seq, r.checkpoint.size, leafHash(r.entryHash), r.inclusionProof(), r.checkpoint.root),
      ).toBe(true);
      if (r.seq % 37 === 0) {
        expect(
          verifyInclusion(r.seq, size, leafHash(r.entryHash), await reader.inclusionProof(r.seq, size), cp.root),
        ).toBe(true);
        expect((await reader.entry(r.seq, size)).entry.digest).toBe(r.entry.digest);
      }
    }

    // Independent audit (node:crypto, naive RFC 6962) of a mirror of the public prefix.
    const dir = await mirror(cfg.s3.publicPrefix!);
    try {
      const audit = await auditLogDir(dir, ORIGIN, verifier.publicKey);
      expect(audit.checkpoint.size).toBe(size);
      expect(audit.entryHashes.map((h) => toHex(h))).toEqual(receipts.map((r) => toHex(r.entryHash)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    // Tiles carry immutable caching; partials of the two full tiles are gone; the right edge's are kept.
    const keys = await listAll(cfg.s3.publicPrefix!);
    const head = await plain.send(
      new HeadObjectCommand({ Bucket: s3.bucket, Key: `${cfg.s3.publicPrefix}tile/0/001` }),
    );
    expect(head.CacheControl).toBe('public, max-age=31536000, immutable');
    expect([...keys.keys()].filter((k) => /tile\/(0|entries|records)\/00[01]\.p\//.test(k))).toEqual([]);
    expect(keys.has(`${cfg.s3.publicPrefix}tile/0/002.p/88`)).toBe(true);
    // …deleted by key as their full tiles were published: not one (billed) LIST request.
    expect(log.sweeper!.stats.deleted).toBeGreaterThan(0);
    expect(log.store.stats.lists).toBe(startLists);
    // Staged batches are cleaned up after they are applied.
    await stagingDrained(cfg.s3.stagingPrefix!);

    // The DynamoDB index answers the lookups.
    const idx = log.index!;
    expect(await idx.indexedSize()).toBe(size);
    expect(await idx.findByDigest(receipts[123]!.entry.digest, firstCandidate)).toBe(123);
    expect(await idx.findByArtifact(artifactId('build-0'), firstCandidate)).toBe(570);
    expect(await idx.countsByType()).toEqual({ ledger_anchor: 600 });
    await log.close();

    // A second start resumes from the lock at the same size and keeps going.
    const again = await openAwsLog(cfg);
    expect(again.sequencer.checkpoint.size).toBe(size);
    const [next] = await Promise.all([again.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest(600)))]);
    expect(next.seq).toBe(600);
    expect(await again.index!.findByDigest(next.entry.digest, firstCandidate)).toBe(600);
    await again.close();

    // What an API replica opens: the public objects, the shared index and the KMS public key, no signing.
    const replica = await openAwsReader(cfg);
    expect(replica.publicKey).toEqual(verifier.publicKey);
    expect(await replica.index!.findByDigest(receipts[123]!.entry.digest, firstCandidate)).toBe(123);
    const published = await replica.refreshCheckpoint();
    expect(published).toMatchObject({ size: 601, timestamp: again.sequencer.checkpoint.timestamp });
    expect(toHex(await replica.reader.treeHash(601))).toBe(toHex(published!.root));
    await replica.close();
  });

  it('a failing or hanging KMS fails the batch before anything is written; the anchors are retried and land once KMS recovers', async () => {
    const cfg = await config({}, 300);
    const log = await openAwsLog(cfg);
    await Promise.all(
      [0, 1, 2].map((i) => log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest(i)))),
    );
    const root = cfg.s3.publicPrefix!.split('/')[0]!;
    await stagingDrained(cfg.s3.stagingPrefix!);
    const before = await listAll(`${root}/`);
    const lock = new DynamoLock({
      table: cfg.dynamo!.table,
      log: ORIGIN,
      endpoint: ddb.endpoint,
      region: 'us-east-1',
      credentials: s3.credentials,
    });
    const lockBefore = await lock.read();

    let settled = 0;
    const signsBefore = kms.calls.Sign ?? 0;
    kms.fault = 'error';
    const pending = [3, 4, 5, 6, 7].map((i) =>
      log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest(i))).finally(() => settled++),
    );
    await waitFor(
      () => (kms.calls.Sign ?? 0) >= signsBefore + 6,
      5_000,
      'two failed batch attempts (3 SDK attempts each)',
    );
    kms.fault = 'hang';
    const hangsFrom = kms.calls.Sign ?? 0;
    await waitFor(() => (kms.calls.Sign ?? 0) >= hangsFrom + 1, 5_000, 'a hanging attempt');
    await new Promise((r) => setTimeout(r, 400)); // past the 300 ms KMS timeout

    // Nothing was acknowledged, staged or published for the failed attempts; the lock did not move.
    expect(settled).toBe(0);
    expect(await listAll(`${root}/`)).toEqual(before);
    expect(await lock.read()).toEqual(lockBefore);
    expect(log.sequencer.failure).toBeUndefined();

    kms.fault = 'none';
    const receipts = await Promise.all(pending);
    expect(receipts.map((r) => r.seq)).toEqual([3, 4, 5, 6, 7]);
    const verifier = await kmsVerifier();
    const cp = openCheckpoint(Buffer.from((await log.store.get(CHECKPOINT_KEY))!).toString('utf8'), verifier);
    expect(cp.size).toBe(8);
    const dir = await mirror(cfg.s3.publicPrefix!);
    try {
      expect((await auditLogDir(dir, ORIGIN, verifier.publicKey)).checkpoint.size).toBe(8);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await log.close();
  });

  it('a lost or older DynamoDB lock item: the sequencer refuses to start, never a new log or a rollback, and the bucket is untouched', async () => {
    const cfg = await config();
    const submit = (log: Awaited<ReturnType<typeof openAwsLog>>, from: number, n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest(from + i))),
        ),
      );
    let log = await openAwsLog(cfg);
    await submit(log, 0, 20);
    await log.close();
    const lock = new DynamoLock({
      table: cfg.dynamo!.table,
      log: ORIGIN,
      endpoint: ddb.endpoint,
      region: 'us-east-1',
      credentials: s3.credentials,
    });
    const older = (await lock.read())!.state;
    log = await openAwsLog(cfg);
    await submit(log, 20, 15);
    await log.close();
    const prefix = cfg.s3.publicPrefix ?? '';
    const bucket = await listAll(prefix);

    // A point-in-time restore brings the lock item back at size 20; the bucket says 35.
    const current = (await lock.read())!;
    expect(current.state.size).toBe(35);
    await lock.swap(current.version, older);
    await expect(openAwsLog(cfg)).rejects.toThrow(
      /lock record \(size 20\) is older than the published checkpoint \(size 35\)/,
    );

    // The item is gone altogether: not a new log either.
    const client = new DynamoDBClient({ endpoint: ddb.endpoint, region: 'us-east-1', credentials: s3.credentials });
    await client.send(
      new DeleteItemCommand({ TableName: cfg.dynamo!.table, Key: { pk: { S: `lock#${ORIGIN}` }, sk: { S: 'lock' } } }),
    );
    client.destroy();
    await expect(openAwsLog(cfg)).rejects.toThrow(
      /published objects \(a signed checkpoint of size 35\) but no lock record/,
    );
    expect(await lock.read()).toBeNull();
    expect(await listAll(prefix)).toEqual(bucket);
  });

  it('reads its configuration from the environment the CDK stack sets', () => {
    const cfg = awsLogConfigFromEnv({
      STELE_ORIGIN: ORIGIN,
      AWS_REGION: 'eu-west-1',
      STELE_S3_BUCKET: 'b',
      STELE_DYNAMO_TABLE: 't',
      STELE_KMS_KEY_ID: 'arn:aws:kms:eu-west-1:111122223333:key/k',
      STELE_BATCH_INTERVAL_MS: '500',
      STELE_S3_FORCE_PATH_STYLE: 'true',
    });
    expect(cfg).toMatchObject({
      origin: ORIGIN,
      region: 'eu-west-1',
      s3: { bucket: 'b', forcePathStyle: true },
      dynamo: { table: 't' },
      batchInterval: 500,
    });
    expect(cfg.signer).toMatchObject({ kind: 'kms', keyId: 'arn:aws:kms:eu-west-1:111122223333:key/k' });
    expect(() => awsLogConfigFromEnv({ STELE_ORIGIN: ORIGIN, STELE_S3_BUCKET: 'b', STELE_DYNAMO_TABLE: 't' })).toThrow(
      /STELE_KMS_KEY_ID/,
    );
    // The bucket lock needs no table; the DynamoDB lock (the default) does.
    const base = { STELE_ORIGIN: ORIGIN, STELE_S3_BUCKET: 'b', STELE_KEY_FILE: '/k' };
    const bucket = awsLogConfigFromEnv({ ...base, STELE_LOCK: 'bucket' });
    expect(bucket.lock).toBe('bucket');
    expect(bucket.dynamo).toBeUndefined();
    expect(awsLogConfigFromEnv(base, { lock: 'bucket' }).lock).toBe('bucket');
    expect(() => awsLogConfigFromEnv(base)).toThrow(/STELE_DYNAMO_TABLE/);
    expect(() => awsLogConfigFromEnv({ ...base, STELE_LOCK: 'etcd' })).toThrow(/STELE_LOCK must be dynamodb or bucket/);
  });
});
