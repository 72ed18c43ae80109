// The README's table-restore runbook ("Restore the DynamoDB table"), step by step, as far as
// it runs here: the log on a real S3 server (Ceph RGW) and a real DynamoDB-protocol server
// (dynalite), a key file standing in for KMS. AWS's point-in-time restore is itself not
// available here; its effect is: a NEW table holding the items as they were at the restore
// point. The steps:
//   1. restore to a new table (here: the items copied as they were after the first batches);
//   2. the stack adopts it: ExistingTableName makes both services and the sequencer's grants
//      use it (the synthesized template, its conditions evaluated for that parameter);
//   3. `stele log fsck --aws` on it reports the lock older than the published checkpoint, and
//      `stele log recover --aws` rebuilds it from the bucket after verifying the whole tree;
//   4. the sequencer starts on the restored table: the lookup index catches up from the
//      record bundles (lookups and duplicate detection find the entries anchored after the
//      restore point) and anchoring continues at the next leaf.
import { type AttributeValue, BatchWriteItemCommand, DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SteleStack } from '../../infra/stack.js';
import type { AwsLogConfig } from '../../src/serve/aws-config.js';
import { openAwsLog } from '../../src/serve/aws-log.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { anchorIdentity } from '../../src/core/duplicates.js';
import { Sandbox } from '../helpers/cli.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import type { JsonObject } from '../helpers/json.js';
import { digestOf } from '../helpers/logs.js';
import { type RgwServer, rgwLogEnv, rgwLogStorage, startRgwWithCli } from '../helpers/rgw.js';
import { resolve } from './iam-eval.js';

type Json = JsonObject;

const ORIGIN = 'restore.test/log';
const RESTORED = 'stele-restored-20261127';
let rgw: RgwServer;
let ddb: DynamoServer;
let sb: Sandbox;

beforeAll(async () => {
  [rgw, ddb] = await Promise.all([startRgwWithCli(), startDynamoServer('stele')]);
  sb = new Sandbox('stele-restore-');
}, 660_000);
afterAll(async () => {
  await Promise.all([rgw?.close(), ddb?.close()]);
  sb?.cleanup();
});

/** Evaluates Fn::If and the template's conditions for the given parameter values. */
function withParameters(value: unknown, conditions: Json, params: Record<string, string>): unknown {
  const cond = (name: string): boolean => test(conditions[name]);
  const test = (c: Json): boolean => {
    if (c.Condition) return cond(c.Condition);
    if (c['Fn::Not']) return !test(c['Fn::Not'][0]);
    if (c['Fn::And']) return c['Fn::And'].every(test);
    if (c['Fn::Or']) return c['Fn::Or'].some(test);
    if (c['Fn::Equals']) {
      const [a, b] = c['Fn::Equals'].map((x: unknown) => resolve(x, params));
      return a === b;
    }
    throw new Error(`condition ${JSON.stringify(c)}`);
  };
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const o = v as Json;
    if (o['Fn::If']) {
      const [name, yes, no] = o['Fn::If'];
      return walk(cond(name) ? yes : no);
    }
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, walk(x)]));
  };
  return resolve(walk(value), params);
}

describe('README runbook: restore the DynamoDB table', () => {
  it('restore to a new table → the stack adopts it → log recover --aws → the index catches up', async () => {
    const prefix = `r${randomBytes(3).toString('hex')}/`;
    const keyFile = join(sb.root, 'log.key');
    const config = (table: string): AwsLogConfig => ({
      origin: ORIGIN,
      ...rgwLogStorage(rgw, prefix),
      dynamo: { table, endpoint: ddb.endpoint },
      lock: 'dynamodb',
      signer: { kind: 'key-file', path: keyFile },
      batchInterval: 5,
      heartbeatMs: 0,
    });
    const anchor = (log: Awaited<ReturnType<typeof openAwsLog>>, from: number, count: number) =>
      Promise.all(
        Array.from({ length: count }, (_, i) =>
          log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(prefix, from + i))),
        ),
      );

    // The log runs on the stack's table; the restore point is after its first 40 entries.
    let log = await openAwsLog(config('stele'));
    await anchor(log, 0, 40);
    await log.indexReady;
    await log.close();
    const client = new DynamoDBClient({ endpoint: ddb.endpoint, region: ddb.region, credentials: ddb.credentials });
    try {
      const scan = async (TableName: string) => {
        const items: Record<string, AttributeValue>[] = [];
        let ExclusiveStartKey: Record<string, never> | undefined;
        do {
          const page = await client.send(new ScanCommand({ TableName, ConsistentRead: true, ExclusiveStartKey }));
          items.push(...(page.Items ?? []));
          ExclusiveStartKey = page.LastEvaluatedKey as typeof ExclusiveStartKey;
        } while (ExclusiveStartKey);
        return items;
      };
      const restorePoint = await scan('stele');
      expect(restorePoint.length).toBeGreaterThan(40); // the lock, the index rows, the marks

      log = await openAwsLog(config('stele'));
      await anchor(log, 40, 260); // past the restore point, across a full tile
      await log.close();

      // 1. Restore to a new table, as of the restore point.
      await ddb.createTable(RESTORED);
      for (let i = 0; i < restorePoint.length; i += 25)
        await client.send(
          new BatchWriteItemCommand({
            RequestItems: { [RESTORED]: restorePoint.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
          }),
        );
    } finally {
      client.destroy();
    }

    // 2. The stack adopts it: both services and the sequencer's grants name the restored table.
    const template = Template.fromStack(new SteleStack(new App(), 'Restore')).toJSON() as Json;
    const resources = template.Resources as Record<string, Json>;
    const [tableId] = Object.entries(resources).find(([, r]) => r.Type === 'AWS::DynamoDB::Table')!;
    const params = { ExistingTableName: RESTORED, [tableId]: 'Restore-Table-XYZ', 'AWS::Partition': 'aws' };
    const env = (prefixId: string, p: Record<string, string>) => {
      const [, task] = Object.entries(resources).find(
        ([id, r]) => id.startsWith(prefixId) && r.Type === 'AWS::ECS::TaskDefinition',
      )!;
      const e = withParameters(task.Properties.ContainerDefinitions[0].Environment, template.Conditions, p) as {
        Name: string;
        Value: string;
      }[];
      return Object.fromEntries(e.map((x) => [x.Name, x.Value]));
    };
    expect(env('SequencerTask', params).STELE_DYNAMO_TABLE).toBe(RESTORED);
    expect(env('ApiTask', params).STELE_DYNAMO_TABLE).toBe(RESTORED);
    expect(env('SequencerTask', { ...params, ExistingTableName: '' }).STELE_DYNAMO_TABLE).toBe('Restore-Table-XYZ');
    const grants = Object.values(resources)
      .filter((r) => r.Type === 'AWS::IAM::Policy')
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Json[])
      .filter((s) => JSON.stringify(s.Action).includes('dynamodb:Scan'));
    expect(grants).toHaveLength(1);
    expect(withParameters(grants[0]!.Resource, template.Conditions, params)).toMatch(new RegExp(`:table/${RESTORED}$`));
    const table = env('SequencerTask', params).STELE_DYNAMO_TABLE!;

    // 3. fsck sees the restored lock behind the bucket; recover rebuilds it from the bucket.
    const cliEnv = {
      ...rgwLogEnv(rgw, ORIGIN, prefix),
      STELE_LOCK: 'dynamodb',
      STELE_DYNAMO_TABLE: table,
      STELE_DYNAMO_ENDPOINT: ddb.endpoint,
      STELE_KEY_FILE: keyFile,
    };
    const before = await sb.json(['log', 'fsck', '--aws'], cliEnv);
    expect(before.code).toBe(1);
    expect(before.out.lock).toMatchObject({ relation: 'older', size: 40 });
    const recovered = await sb.json(['log', 'recover', '--aws'], cliEnv);
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.out).toMatchObject({ result: 'recovered', size: 300, previous: { relation: 'older', size: 40 } });
    const after = await sb.json(['log', 'fsck', '--aws'], cliEnv);
    expect(after.code).toBe(0);
    expect(after.out).toMatchObject({ result: 'PASS', lock: { relation: 'equal', size: 300 } });

    // 4. The sequencer on the restored table: the index catches up from the record bundles.
    log = await openAwsLog(config(table));
    try {
      await log.indexReady;
      expect(await log.index!.indexedSize()).toBe(300);
      // Every index row is a candidate the caller confirms against its record; these rows are the log's own.
      const accept = async () => true;
      expect(await log.index!.findByDigest(digestOf(prefix, 7), accept)).toBe(7);
      expect(await log.index!.findByDigest(digestOf(prefix, 299), accept)).toBe(299);
      // Duplicate detection (src/sequencer/in-flight-duplicates.ts asks the index by anchor identity)
      // finds an anchor made after the restore point...
      const identity = anchorIdentity({ type: 'ledger_anchor', digest: digestOf(prefix, 123) })!;
      expect(await log.index!.findAnchor(identity, digestOf(prefix, 123), accept)).toBe(123);
      // ...and a new anchor continues the log.
      const next = await log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(prefix, 300)));
      expect(next.seq).toBe(300);
    } finally {
      await log.close();
    }
  }, 300_000);
});
