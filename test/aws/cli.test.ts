// The whole log on the AWS backends as they run here: the sequencer (openAwsLog: S3 on
// s3rver, DynamoDB lock and index on dynalite, the KMS stand-in signing), the JSON API
// (createApp over the same S3 store and DynamoDB index, as an API replica serves it), and
// the `stele` CLI as a subprocess: init → anchor through the API, then verify --tiles,
// mirror and audit reading the tiles straight from the S3 server's URL — the role
// CloudFront plays in production (s3rver serves anonymous GETs like a public origin).
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/api/app.js';
import type { LedgerService } from '../../src/api/ledger.js';
import { Metrics } from '../../src/api/metrics.js';
import { type AwsLog, openAwsLog } from '../../src/serve/aws-log.js';
import { keyIdOf } from '../../src/core/note.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { type KmsStandIn, startKmsStandIn } from '../helpers/kms-standin.js';
import { type S3Server, startS3Server } from '../helpers/s3-server.js';
import type { JsonObject } from '../helpers/json.js';

const ORIGIN = 'ledger.example.com/aws-cli';
type Json = JsonObject;

let s3: S3Server;
let ddb: DynamoServer;
let kms: KmsStandIn;
let log: AwsLog;
let server: Server;
let api: string;
let tiles: string;
let sb: Sandbox;

beforeAll(async () => {
  [s3, ddb, kms] = await Promise.all([startS3Server(), startDynamoServer(), startKmsStandIn(), ensureBuilt()]);
  log = await openAwsLog({
    origin: ORIGIN,
    region: 'us-east-1',
    credentials: s3.credentials,
    s3: {
      bucket: s3.bucket,
      publicPrefix: 'cli/log/',
      stagingPrefix: 'cli/private/',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      requireConditionalWrites: false,
    },
    dynamo: { table: ddb.table, endpoint: ddb.endpoint },
    signer: { kind: 'kms', keyId: kms.keyId, endpoint: kms.endpoint },
    batchInterval: 20,
    heartbeatMs: 0,
  });
  const ledger: LedgerService = {
    origin: ORIGIN,
    publicKey: log.signer.publicKey,
    reader: log.reader,
    index: log.index!,
    checkpoint: () => log.sequencer.checkpoint,
    lifetimeEntries: () => log.sequencer.lifetimeEntries,
    witnesses: [],
    witnessThreshold: 0,
    submit: (req) => log.sequencer.submit(req),
  };
  const app = createApp({ ledger, objects: log.store, logger: pino({ level: 'silent' }), metrics: new Metrics() });
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  tiles = `${s3.endpoint}/${s3.bucket}/cli/log`;
  sb = new Sandbox('stele-aws-cli-');
  sb.file('release.tar.gz', 'the canonical package bytes of release 1.0\n');
  sb.file('later.bin', 'a later release\n');
}, 180_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await log?.close();
  sb?.cleanup();
  await Promise.all([s3?.close(), ddb?.close(), kms?.close()]);
});

describe('stele CLI against the AWS backends (API over S3 + DynamoDB, tiles from the S3 origin)', () => {
  it('init pins the KMS key; anchor goes through the API; verify --tiles, mirror and audit read the S3 origin', async () => {
    const keyId = keyIdOf(kms.publicKey); // what an operator gets from KMS GetPublicKey
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      api,
      '--tenant',
      'acme',
      '--scope',
      'releases',
      '--trust-key',
      keyId,
    ]);
    expect(init.stderr).toBe('');
    expect(init.code).toBe(0);

    const a1 = await sb.json(['ledger', 'anchor', 'release.tar.gz']);
    expect(a1.code).toBe(0);
    expect(a1.out.result).toBe('PASS');
    const a2 = await sb.json(['ledger', 'anchor', 'later.bin', '--artifact', 'later']);
    expect(a2.code).toBe(0);

    // The API answered from the DynamoDB index and the S3 tiles.
    const byHash = (await (await fetch(`${api}/api/ledger/entry?hash=${a1.out.entry.digest}`)).json()) as Json;
    expect(byHash).toMatchObject({ leafIndex: 0, entry: { id: a1.out.entryId } });
    const byArtifact = (await (
      await fetch(`${api}/api/ledger/entry?artifact=${a2.out.entry.artifactId}`)
    ).json()) as Json;
    expect(byArtifact.leafIndex).toBe(1);

    // Verification straight from the S3 origin's tiles, no API involved.
    const v = await sb.json(['ledger', 'verify', 'release.tar.gz', '--tiles', tiles]);
    expect(v.code).toBe(0);
    expect(v.out).toMatchObject({ result: 'PASS', mode: 'tiles', leafIndex: 0 });
    const v2 = await sb.json(['ledger', 'verify', 'later.bin', '--tiles', tiles]);
    expect(v2.out).toMatchObject({ result: 'PASS', leafIndex: 1 });

    const mirror = join(sb.root, 'mirror');
    const m = await sb.json(['ledger', 'mirror', mirror, '--from', tiles]);
    expect(m.code).toBe(0);
    expect(m.out).toMatchObject({ result: 'PASS', treeSize: 2 });
    const audit = await sb.json(['ledger', 'audit', mirror]);
    expect(audit.out).toMatchObject({ ok: true, treeSize: 2, entriesChecked: 2 });

    // A file that was never anchored, checked against leaf 1 from the same origin: FAIL, exit 1.
    sb.file('never.bin', 'nobody anchored this\n');
    const bad = await sb.run(['ledger', 'verify', 'never.bin', '--tiles', tiles, '--leaf-index', '1']);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/FAIL\s+3\. Leaf hash/);
  });
});
