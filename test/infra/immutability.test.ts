// The log's promises as the deployed policies enforce them, judged on the synthesized
// template (infra/stack.ts), not on a copy of its statements:
//   - the tiles bucket's policy, with the sequencer's own IAM policy, refuses an overwrite
//     (a PUT without If-None-Match) and a delete of a full tile or bundle, and still lets
//     the sequencer create tiles, sweep partial tiles, swap the checkpoint and write its
//     staging prefix; an account administrator with s3:* is refused the same way; without
//     the Deny statements the sequencer's role alone WOULD overwrite (so the policy is what
//     refuses);
//   - the log key's policy lets only the sequencer's role sign; an administrator can
//     administer but not sign, nor create a grant that would let someone sign.
// Then the same bucket-policy statements on a real S3 server (Ceph RGW, test/helpers/rgw.ts),
// as far as RGW implements them: its bucket policies refuse the deletes (DeleteObject with
// NotResource) for the bucket's owner too; RGW 16 does not set the s3:if-none-match
// condition key, so the create-only statement is judged on the template only (and RGW's own
// If-None-Match refuses a create over an existing tile).
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IF_NONE_MATCH_KEY } from '../../infra/immutability.js';
import { SteleStack } from '../../infra/stack.js';
import type { JsonObject } from '../helpers/json.js';
import { type RgwServer, startRgw } from '../helpers/rgw.js';
import { type Request, type Statement, evaluate, resolve } from './iam-eval.js';

type Json = JsonObject;

const ACCOUNT = '111122223333';
const BUCKET = 'stele-tiles';
const SEQUENCER = `arn:aws:iam::${ACCOUNT}:role/stele-sequencer`;
const API = `arn:aws:iam::${ACCOUNT}:role/stele-api`;
const ADMIN = `arn:aws:iam::${ACCOUNT}:role/Admin`;
const KEY = `arn:aws:kms:us-east-1:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;

let resources: Record<string, Json>;
let refs: Record<string, string>;

const idOf = (prefix: string, type: string) => {
  const ids = Object.keys(resources).filter((id) => id.startsWith(prefix) && resources[id]!.Type === type);
  expect(ids, `${type} ${prefix}`).toHaveLength(1);
  return ids[0]!;
};

beforeAll(() => {
  const template = Template.fromStack(new SteleStack(new App(), 'Immutability'));
  resources = template.toJSON().Resources as Record<string, Json>;
  const tiles = idOf('Tiles', 'AWS::S3::Bucket');
  const seqRole = idOf('SequencerTaskRole', 'AWS::IAM::Role');
  const apiRole = idOf('ApiTaskTaskRole', 'AWS::IAM::Role');
  const key = idOf('LogKey', 'AWS::KMS::Key');
  refs = {
    [tiles]: BUCKET,
    [`${tiles}.Arn`]: `arn:aws:s3:::${BUCKET}`,
    [`${seqRole}.Arn`]: SEQUENCER,
    [`${apiRole}.Arn`]: API,
    [`${key}.Arn`]: KEY,
    'AWS::Partition': 'aws',
    'AWS::AccountId': ACCOUNT,
    'AWS::Region': 'us-east-1',
  };
}, 120_000);

/** The tiles bucket's policy statements, resolved. */
function bucketPolicy(): Statement[] {
  const tiles = idOf('Tiles', 'AWS::S3::Bucket');
  const [policy] = Object.values(resources).filter(
    (r) => r.Type === 'AWS::S3::BucketPolicy' && r.Properties.Bucket.Ref === tiles,
  );
  return resolve(policy!.Properties.PolicyDocument.Statement, refs) as Statement[];
}

/** Every statement of the IAM policies attached to a role (by its logical id prefix), resolved. */
function roleStatements(rolePrefix: string): Statement[] {
  const role = idOf(rolePrefix, 'AWS::IAM::Role');
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x: Json) => x.Ref === role))
    .flatMap((p) => resolve(p.Properties.PolicyDocument.Statement, refs) as Statement[]);
}

const object = (key: string) => `arn:aws:s3:::${BUCKET}/${key}`;
const put = (principalArn: string, key: string, ifNoneMatch: boolean): Request => ({
  principalArn,
  action: 's3:PutObject',
  resource: object(key),
  keys: ifNoneMatch ? { [IF_NONE_MATCH_KEY]: '*' } : {},
});
const del = (principalArn: string, key: string, action = 's3:DeleteObject'): Request => ({
  principalArn,
  action,
  resource: object(key),
});

const FULL = ['log/tile/0/000', 'log/tile/1/x001/234', 'log/tile/entries/000', 'log/tile/records/x002/017'];
const PARTIAL = ['log/tile/0/001.p/7', 'log/tile/entries/x001/002.p/255', 'log/tile/records/003.p/1'];

describe('the tiles bucket refuses overwriting or deleting a published tile', () => {
  it("the sequencer's role: creates tiles with If-None-Match, never overwrites or deletes a full one; sweeps partials, swaps the checkpoint", () => {
    const policy = bucketPolicy();
    const seq = roleStatements('SequencerTaskRole');
    const decide = (r: Request) => evaluate(seq, policy, r);
    for (const key of [...FULL, ...PARTIAL]) {
      expect(decide(put(SEQUENCER, key, true)), `create ${key}`).toBe('allow');
      expect(decide(put(SEQUENCER, key, false)), `overwrite ${key}`).toBe('explicit-deny');
    }
    for (const key of FULL) {
      expect(decide(del(SEQUENCER, key)), `delete ${key}`).toBe('explicit-deny');
      expect(decide(del(SEQUENCER, key, 's3:DeleteObjectVersion')), `delete a version of ${key}`).toBe('explicit-deny');
    }
    for (const key of PARTIAL) expect(decide(del(SEQUENCER, key)), `sweep ${key}`).toBe('allow');
    // The checkpoint is replaced by compare-and-swap (If-Match), never deleted.
    expect(decide(put(SEQUENCER, 'log/checkpoint', false))).toBe('allow');
    expect(decide(put(SEQUENCER, 'log/checkpoint.json', false))).toBe('allow');
    expect(decide(del(SEQUENCER, 'log/checkpoint'))).toBe('explicit-deny');
    // Staged batches, the bucket lock and the start-up probe live under private/.
    expect(decide(put(SEQUENCER, 'private/lock.json', false))).toBe('allow');
    expect(decide(del(SEQUENCER, 'private/batches/000123'))).toBe('allow');
    expect(decide(del(SEQUENCER, 'private/.probe-0123456789abcdef'))).toBe('allow');
  });

  it("the policy is what refuses: without its Deny statements the sequencer's role would overwrite and delete a full tile", () => {
    const allowsOnly = bucketPolicy().filter((s) => s.Effect === 'Allow');
    const seq = roleStatements('SequencerTaskRole');
    expect(evaluate(seq, allowsOnly, put(SEQUENCER, FULL[0]!, false))).toBe('allow');
    expect(evaluate(seq, allowsOnly, del(SEQUENCER, FULL[0]!))).toBe('allow');
  });

  it('an administrator with s3:* is refused too; the API role cannot write at all', () => {
    const policy = bucketPolicy();
    const admin: Statement[] = [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }];
    expect(evaluate(admin, policy, put(ADMIN, FULL[1]!, false))).toBe('explicit-deny');
    expect(evaluate(admin, policy, del(ADMIN, FULL[1]!))).toBe('explicit-deny');
    expect(evaluate(admin, policy, del(ADMIN, FULL[1]!, 's3:DeleteObjectVersion'))).toBe('explicit-deny');
    const api = roleStatements('ApiTaskTaskRole');
    expect(evaluate(api, policy, put(API, 'log/tile/0/005', true))).toBe('implicit-deny');
    expect(evaluate(api, policy, put(API, 'log/checkpoint', false))).toBe('implicit-deny');
    expect(evaluate(api, policy, del(API, PARTIAL[0]!))).toBe('implicit-deny');
    expect(evaluate(api, policy, { principalArn: API, action: 's3:GetObject', resource: object(FULL[0]!) })).toBe(
      'allow',
    );
  });
});

describe('one signer: the log key policy', () => {
  const keyPolicy = () => {
    const key = idOf('LogKey', 'AWS::KMS::Key');
    return resolve(resources[key]!.Properties.KeyPolicy.Statement, refs) as Statement[];
  };
  const kms = (principalArn: string, action: string): Request => ({ principalArn, action, resource: KEY });

  it("lets only the sequencer's role sign; administrators administer without signing or granting", () => {
    const policy = keyPolicy();
    const seq = roleStatements('SequencerTaskRole');
    expect(evaluate(seq, policy, kms(SEQUENCER, 'kms:Sign'))).toBe('allow');
    expect(evaluate(seq, policy, kms(SEQUENCER, 'kms:GetPublicKey'))).toBe('allow');
    const admin: Statement[] = [{ Effect: 'Allow', Action: 'kms:*', Resource: '*' }];
    expect(evaluate(admin, policy, kms(ADMIN, 'kms:Sign'))).toBe('explicit-deny');
    expect(evaluate(admin, policy, kms(ADMIN, 'kms:CreateGrant'))).toBe('explicit-deny');
    for (const action of ['kms:DescribeKey', 'kms:ScheduleKeyDeletion', 'kms:CancelKeyDeletion', 'kms:PutKeyPolicy'])
      expect(evaluate(admin, policy, kms(ADMIN, action)), action).toBe('allow');
    // A grant for an AWS service's resource, made by the service, is not refused.
    expect(
      evaluate(admin, policy, {
        ...kms(ADMIN, 'kms:CreateGrant'),
        keys: { 'kms:GrantIsForAWSResource': 'true', 'aws:PrincipalIsAWSService': 'true' },
      }),
    ).toBe('allow');
    const api = roleStatements('ApiTaskTaskRole');
    expect(evaluate(api, policy, kms(API, 'kms:Sign'))).toBe('explicit-deny');
    expect(evaluate(api, policy, kms(API, 'kms:GetPublicKey'))).toBe('allow');
    // No Allow of the key policy gives the account (IAM) kms:*, kms:Sign or kms:CreateGrant.
    const toAccount = policy.filter(
      (x) =>
        x.Effect === 'Allow' &&
        typeof x.Principal === 'object' &&
        [x.Principal.AWS ?? []].flat().some((p) => p.endsWith(':root')),
    );
    expect(toAccount).toHaveLength(1);
    for (const s of toAccount)
      expect([s.Action ?? []].flat().filter((a) => ['kms:*', 'kms:Sign', 'kms:CreateGrant'].includes(a))).toEqual([]);
  });
});

describe('on Ceph RGW: the same bucket-policy statements', () => {
  let rgw: RgwServer;
  beforeAll(async () => {
    rgw = await startRgw();
  }, 660_000);
  afterAll(async () => {
    await rgw?.close();
  });

  it('refuse deleting a full tile, bundle or the checkpoint (also to the bucket owner); let partials and staging go; RGW 16 has no s3:if-none-match key', async () => {
    const c = rgw.client;
    const B = rgw.bucket;
    // Objects first, as the sequencer writes them (If-None-Match), then the policy.
    for (const key of [...FULL, ...PARTIAL, 'log/checkpoint', 'private/batches/000001'])
      await c.send(new PutObjectCommand({ Bucket: B, Key: key, Body: key, IfNoneMatch: '*' }));
    const onRgw = (s: Statement) =>
      JSON.parse(JSON.stringify(s).replaceAll(`arn:aws:s3:::${BUCKET}`, `arn:aws:s3:::${B}`)) as Statement;
    const statements = bucketPolicy()
      .filter((s) => s.Effect === 'Deny' && s.Condition?.Bool?.['aws:SecureTransport'] === undefined)
      .map(onRgw);
    expect(statements.map((s) => s.Sid).sort()).toEqual([
      'OnlyPartialTilesAreDeleted',
      'PublishedVersionsAreNeverDeleted',
      'TilesAreCreatedNeverOverwritten',
    ]);
    const status = async (send: () => Promise<unknown>): Promise<number> => {
      try {
        await send();
        return 200;
      } catch (e) {
        return (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 0;
      }
    };
    const deletes = statements.filter((s) => s.Sid !== 'TilesAreCreatedNeverOverwritten');
    await c.send(
      new PutBucketPolicyCommand({ Bucket: B, Policy: JSON.stringify({ Version: '2012-10-17', Statement: deletes }) }),
    );
    const remove = (Key: string) => status(() => c.send(new DeleteObjectCommand({ Bucket: B, Key })));
    for (const key of [...FULL, 'log/checkpoint']) expect(await remove(key), `delete ${key}`).toBe(403);
    for (const key of [...PARTIAL, 'private/batches/000001']) expect(await remove(key), `delete ${key}`).toBe(200);
    // RGW judges a multi-object delete (the sweeper's DeleteObjects) against the bucket as a
    // whole, so under the NotResource statement it refuses even partials; S3 judges each key
    // (s3:DeleteObject per object). README "Immutability" says so for RGW deployments.
    expect(
      await status(() =>
        c.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: [{ Key: 'log/tile/0/004.p/3' }] } })),
      ),
    ).toBe(403);
    // RGW refuses a create over an existing tile by itself (If-None-Match; this bucket is
    // unversioned: RGW 16 accepted it over an existing object in a versioned bucket)...
    const create = (Key: string) =>
      status(() => c.send(new PutObjectCommand({ Bucket: B, Key, Body: 'other bytes', IfNoneMatch: '*' })));
    expect(await create(FULL[0]!)).toBe(412);
    // ...but does not set the s3:if-none-match key: under the create-only statement (Null: the
    // key absent) it refuses even a create that carries the header. AWS S3 sets the key
    // (conditional-write enforcement), so that statement is judged on the template above.
    await c.send(
      new PutBucketPolicyCommand({
        Bucket: B,
        Policy: JSON.stringify({ Version: '2012-10-17', Statement: statements }),
      }),
    );
    expect(await create('log/tile/0/099')).toBe(403);
    expect(await status(() => c.send(new PutObjectCommand({ Bucket: B, Key: 'log/checkpoint', Body: 'x' })))).toBe(200);
  }, 120_000);
});
