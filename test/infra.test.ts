// CDK assertions on the synthesized template of infra/stack.ts (synthesized in process,
// offline): the bucket is private, CloudFront caches the checkpoint ≤ 2 s and tiles as
// immutable and never caches the API, the key is Ed25519 for signing, the API role can
// neither write tiles nor sign, and exactly one sequencer task runs.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { SteleStack, WITNESS_POLICY_FILE } from '../infra/stack.js';
import { SIG_COSIGNATURE_V1, formatVkey, makeVerifier } from '../src/core/note.js';
import { ensureBuilt } from './helpers/cli.js';
import { scratchDir } from './helpers/tmp.js';
import type { JsonObject } from './helpers/json.js';

type Json = JsonObject;

let template: Template;
let resources: Record<string, Json>;

beforeAll(() => {
  const app = new App();
  template = Template.fromStack(new SteleStack(app, 'Test'));
  resources = template.toJSON().Resources as Record<string, Json>;
}, 180_000); // synthesizing takes ~50 s on a busy machine

const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const refId = (v: Json | string): string => (typeof v === 'string' ? v : (v.Ref ?? v['Fn::GetAtt']?.[0]));

/** Every IAM statement attached to the role a task definition runs as. */
function taskRoleStatements(taskLogicalIdPrefix: string): Json[] {
  const [, task] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith(taskLogicalIdPrefix))!;
  const role = refId(task.Properties.TaskRoleArn);
  const statements: Json[] = [];
  for (const [, p] of ofType('AWS::IAM::Policy')) {
    if (p.Properties.Roles.some((r: Json) => refId(r) === role))
      statements.push(...p.Properties.PolicyDocument.Statement);
  }
  for (const [, r] of ofType('AWS::IAM::Role').filter(([id]) => id === role)) {
    for (const p of r.Properties.Policies ?? []) statements.push(...p.PolicyDocument.Statement);
    expect(r.Properties.ManagedPolicyArns ?? []).toEqual([]);
  }
  return statements;
}

const actionsOf = (statements: Json[]) =>
  statements.filter((s) => s.Effect === 'Allow').flatMap((s) => [s.Action].flat() as string[]);
/** Whether an IAM action pattern (with * wildcards) grants `action`. */
const grants = (pattern: string, action: string) =>
  new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`, 'i').test(action);

describe('infra/stack.ts (CDK assertions)', () => {
  it('the bucket is private, versioned and TLS-only; only the distribution may read it', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      VersioningConfiguration: { Status: 'Enabled' },
    });
    const [[, policy]] = ofType('AWS::S3::BucketPolicy') as [[string, Json]];
    const statements: Json[] = policy.Properties.PolicyDocument.Statement;
    expect(statements).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
    for (const s of statements.filter((s) => s.Effect === 'Allow')) {
      expect(s.Principal).toEqual({ Service: 'cloudfront.amazonaws.com' });
      expect(s.Condition.StringEquals['AWS:SourceArn']).toBeDefined();
      expect(actionsOf([s]).every((a) => a === 's3:GetObject' || a === 's3:ListBucket')).toBe(true);
    }
    template.resourceCountIs('AWS::CloudFront::OriginAccessControl', 1);
  });

  it('CloudFront: /checkpoint ≤ 2 s, /tile/* a year, /api/ledger/* to the load balancer uncached with all methods', () => {
    const [[, dist]] = ofType('AWS::CloudFront::Distribution') as [[string, Json]];
    const config = dist.Properties.DistributionConfig;
    const origins: Json[] = config.Origins;
    const byPath = Object.fromEntries((config.CacheBehaviors as Json[]).map((b) => [b.PathPattern, b]));
    const policy = (b: Json) => resources[refId(b.CachePolicyId)]?.Properties.CachePolicyConfig;

    for (const path of ['/checkpoint', '/checkpoint.json']) {
      const p = policy(byPath[path]);
      expect(p.MaxTTL).toBeLessThanOrEqual(2);
      expect(p.DefaultTTL).toBeLessThanOrEqual(2);
    }
    const tile = policy(byPath['/tile/*']);
    expect(tile.DefaultTTL).toBe(365 * 86400);
    expect(tile.MinTTL).toBeGreaterThanOrEqual(86400);

    const apiBehavior = byPath['/api/ledger/*'];
    expect(apiBehavior.CachePolicyId).toBe('4135ea2d-6df8-44a3-9df3-4b5a84be39ad'); // managed CachingDisabled
    expect(apiBehavior.AllowedMethods).toEqual(
      expect.arrayContaining(['GET', 'HEAD', 'OPTIONS', 'PUT', 'PATCH', 'POST', 'DELETE']),
    );
    const apiOrigin = origins.find((o) => o.Id === apiBehavior.TargetOriginId)!;
    expect(resources[refId(apiOrigin.DomainName)]?.Type).toBe('AWS::ElasticLoadBalancingV2::LoadBalancer');
    expect(apiOrigin.OriginCustomHeaders[0].HeaderName).toBe('X-Stele-Origin-Verify');

    const s3Origin = origins.find((o) => o.Id === byPath['/tile/*'].TargetOriginId)!;
    expect(s3Origin.OriginPath).toBe('/log');
    expect(s3Origin.OriginAccessControlId).toBeDefined();
  });

  it('the log key is ECC_NIST_EDWARDS25519 for SIGN_VERIFY; the table is on demand with point-in-time recovery', () => {
    template.hasResourceProperties('AWS::KMS::Key', { KeySpec: 'ECC_NIST_EDWARDS25519', KeyUsage: 'SIGN_VERIFY' });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
    });
  });

  it('IAM least privilege: the API role cannot write objects, write the table or sign; the sequencer signs with that key only', () => {
    const api = taskRoleStatements('ApiTask');
    const apiActions = actionsOf(api);
    for (const forbidden of [
      's3:PutObject',
      's3:DeleteObject',
      'kms:Sign',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
    ]) {
      expect(
        apiActions.filter((a) => grants(a, forbidden)),
        forbidden,
      ).toEqual([]);
    }
    expect(apiActions).toEqual(expect.arrayContaining(['s3:GetObject', 'dynamodb:GetItem']));

    const seq = taskRoleStatements('SequencerTask');
    const [keyId] = ofType('AWS::KMS::Key')[0]!;
    const sign = seq.filter((s) => actionsOf([s]).some((a) => grants(a, 'kms:Sign')));
    expect(sign).toHaveLength(1);
    expect(sign[0]!.Resource).toEqual({ 'Fn::GetAtt': [keyId, 'Arn'] });
    expect(actionsOf(seq)).toEqual(expect.arrayContaining(['s3:PutObject', 'dynamodb:UpdateItem', 'kms:GetPublicKey']));
    // No statement of either role is a wildcard action or resource.
    for (const s of [...api, ...seq]) {
      expect(actionsOf([s]).some((a) => a.includes('*'))).toBe(false);
      expect(s.Resource).not.toBe('*');
    }
  });

  it('the lock record is in DynamoDB by default, in the bucket with lock: bucket (both services told, the sequencer may write it)', () => {
    const lockEnv = (t: Template) =>
      Object.values(t.findResources('AWS::ECS::TaskDefinition')).map(
        (task) =>
          (task.Properties.ContainerDefinitions[0].Environment as { Name: string; Value: string }[]).find(
            (e) => e.Name === 'STELE_LOCK',
          )?.Value,
      );
    expect(lockEnv(template)).toEqual(['dynamodb', 'dynamodb']);
    const bucketLock = Template.fromStack(new SteleStack(new App(), 'BucketLock', { lock: 'bucket' }));
    expect(lockEnv(bucketLock)).toEqual(['bucket', 'bucket']);
    // The lock object lives under the staging prefix, which the sequencer alone may write.
    const seqWrites = taskRoleStatements('SequencerTask').filter((st) => actionsOf([st]).includes('s3:PutObject'));
    expect(JSON.stringify(seqWrites)).toContain('/private/*');
  });

  it('exactly one sequencer task, never two during a deployment; the API service autoscales', () => {
    const services = ofType('AWS::ECS::Service');
    const sequencers = services.filter(([, s]) => s.Properties.DesiredCount === 1);
    expect(sequencers).toHaveLength(1);
    expect(sequencers[0]![0]).toMatch(/^SequencerService/);
    expect(sequencers[0]![1].Properties.DeploymentConfiguration).toMatchObject({
      MinimumHealthyPercent: 0,
      MaximumPercent: 100,
    });
    template.hasResourceProperties('AWS::ApplicationAutoScaling::ScalableTarget', {
      ScalableDimension: 'ecs:service:DesiredCount',
      ResourceId: Match.anyValue(),
    });
    const [, seqTask] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith('SequencerTask'))!;
    const env = Object.fromEntries(
      (seqTask.Properties.ContainerDefinitions[0].Environment as Json[]).map((e) => [e.Name, e.Value]),
    );
    expect(env).toMatchObject({
      STELE_BACKEND: 'aws',
      STELE_ROLE: 'sequencer',
      STELE_S3_PREFIX: 'log/',
      STELE_S3_STAGING_PREFIX: 'private/',
    });
    expect(env.STELE_BATCH_INTERVAL_MS).toEqual({ Ref: 'BatchIntervalMs' });
    expect(env.STELE_MIN_BATCH_SPACING_MS).toEqual({ Ref: 'MinBatchSpacingMs' });
    // Anchor tokens reach the sequencer (which serves the anchor route) from Secrets Manager, never the API.
    expect(seqTask.Properties.ContainerDefinitions[0].Secrets.map((x: Json) => x.Name)).toEqual([
      'STELE_ANCHOR_TOKENS',
    ]);
    const [, apiTask] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith('ApiTask'))!;
    expect(apiTask.Properties.ContainerDefinitions[0].Secrets).toBeUndefined();
  });

  it('witnesses and mirrors are parameters given to both services (the sequencer asks them, replicas advertise them)', () => {
    const params = template.toJSON().Parameters as Json;
    for (const name of ['Witnesses', 'WitnessThreshold', 'Mirrors', 'MirrorQuorum'])
      expect(params[name], name).toMatchObject({ Type: 'String', Default: '' });
    for (const prefix of ['SequencerTask', 'ApiTask']) {
      const [, task] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith(prefix))!;
      const env = Object.fromEntries(
        (task.Properties.ContainerDefinitions[0].Environment as Json[]).map((e) => [e.Name, e.Value]),
      );
      expect(env, prefix).toMatchObject({
        STELE_WITNESSES: { Ref: 'Witnesses' },
        STELE_WITNESS_THRESHOLD: { Ref: 'WitnessThreshold' },
        STELE_MIRRORS: { Ref: 'Mirrors' },
        STELE_MIRROR_QUORUM: { Ref: 'MirrorQuorum' },
      });
    }
  });

  it('alarms on sequencer errors and stalled checkpoints; origin, domain and batch interval are parameters', () => {
    template.hasResourceProperties('AWS::Logs::MetricFilter', { FilterPattern: '{ $.level >= 50 }' });
    template.hasResourceProperties('AWS::Logs::MetricFilter', {
      FilterPattern: '{ $.msg = "sequencer heartbeat" }',
      MetricTransformations: [
        Match.objectLike({ MetricValue: '$.stallSeconds', MetricName: 'CheckpointStallSeconds' }),
      ],
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'CheckpointStallSeconds',
      TreatMissingData: 'breaching',
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'SequencerErrors' });
    const params = template.toJSON().Parameters as Json;
    expect(Object.keys(params)).toEqual(
      expect.arrayContaining(['Origin', 'DomainName', 'BatchIntervalMs', 'AnchorTokens']),
    );
    expect(params.AnchorTokens.NoEcho).toBe(true);
    // Group commit on AWS: at most one batch (a KMS sign, S3 PUTs, two DynamoDB writes) a second by default.
    expect(params.MinBatchSpacingMs).toMatchObject({ Type: 'Number', Default: 1000 });
  });
});

describe('infra/stack.ts: a witness policy', () => {
  const witnessKey = makeVerifier('w1.example', SIG_COSIGNATURE_V1, new Uint8Array(32).fill(5));
  const policy = `witness w1 ${formatVkey(witnessKey)} https://w1.example/\nquorum w1\n`;
  const containers = (t: Template) =>
    Object.fromEntries(
      Object.entries(t.findResources('AWS::ECS::TaskDefinition')).map(([id, task]) => {
        const c = task.Properties.ContainerDefinitions[0] as Json;
        const env = Object.fromEntries((c.Environment as Json[]).map((e) => [e.Name, e.Value]));
        return [id.startsWith('SequencerTask') ? 'sequencer' : 'api', { command: c.Command as string[], env }];
      }),
    );

  it('reaches both services as STELE_WITNESS_POLICY, a file their command writes; the threshold parameter gives way to its quorum', async () => {
    const t = Template.fromStack(new SteleStack(new App(), 'WithPolicy', { witnessPolicy: policy }));
    const params = t.toJSON().Parameters as Json;
    expect(params.WitnessThreshold).toBeUndefined();
    const byRole = containers(t);
    for (const role of ['sequencer', 'api']) {
      const { command, env } = byRole[role]!;
      expect(env, role).toMatchObject({ STELE_WITNESS_POLICY: WITNESS_POLICY_FILE, WITNESS_POLICY_TEXT: policy });
      expect(env.STELE_WITNESS_THRESHOLD, role).toBeUndefined();
      expect(command.slice(0, 2), role).toEqual(['sh', '-c']);
    }
    // Without a policy the command is stele serve itself, and the threshold is a parameter.
    const plain = containers(template);
    expect(plain.sequencer!.command).toEqual(['node', 'dist/cli/main.js', 'serve']);
    expect(plain.api!.env.STELE_WITNESS_POLICY).toBeUndefined();

    // The container's command, run as the task runs it (with a local log, from this checkout's
    // build): it writes the policy and `stele serve` starts on it, storing its digest with the log.
    await ensureBuilt();
    const dir = scratchDir('stele-cdk-policy-');
    const text = 'quorum none\n';
    const file = join(dir, 'witnesses.policy');
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: dir };
    Object.assign(env, byRole.sequencer!.env, {
      WITNESS_POLICY_TEXT: text,
      STELE_WITNESS_POLICY: file,
      STELE_BACKEND: 'local',
      STELE_DATA_DIR: join(dir, 'data'),
      STELE_HOST: '127.0.0.1',
      STELE_PORT: '0',
      STELE_MODE: 'demo',
      STELE_RECONFIGURE: 'false',
    });
    for (const k of Object.keys(env)) if (typeof env[k] !== 'string') delete env[k];
    const cwd = new URL('..', import.meta.url).pathname;
    const [sh, flag, script] = byRole.sequencer!.command as [string, string, string];
    const proc = spawn(sh, [flag, script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      let err = '';
      proc.stderr.on('data', (d) => (err += d));
      await new Promise<void>((resolve, reject) => {
        proc.stdout.on('data', (d) => {
          out += d;
          if (out.includes('stele: serving')) resolve();
        });
        proc.once('exit', (code) => reject(new Error(`exited with ${code}: ${err}`)));
      });
      expect(readFileSync(file, 'utf8')).toBe(text);
      const stored = JSON.parse(readFileSync(join(dir, 'data', 'private', 'log-settings.json'), 'utf8'));
      expect(stored.witnessPolicy).toEqual({ path: file, sha256: createHash('sha256').update(text).digest('hex') });
    } finally {
      proc.kill('SIGKILL');
    }
  }, 240_000);

  it('refuses a policy that is not a C2SP tlog-policy at synth; only the sequencer gets STELE_RECONFIGURE', () => {
    expect(() => new SteleStack(new App(), 'BadPolicy', { witnessPolicy: 'witness w1\nquorum w1\n' })).toThrow(
      /^witness policy: /,
    );
    const plain = containers(template);
    expect(plain.sequencer!.env.STELE_RECONFIGURE).toEqual({ Ref: 'ReconfigureLogSettings' });
    expect(plain.api!.env.STELE_RECONFIGURE).toBeUndefined();
    expect((template.toJSON().Parameters as Json).ReconfigureLogSettings).toMatchObject({
      Default: 'false',
      AllowedValues: ['false', 'true'],
    });
  });
});

describe('infra/stack.ts: the explorer', () => {
  it('is published beside the tiles (never pruning the log) and served at /', () => {
    const dir = scratchDir('stele-explorer-');
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>x</title>');
    const t = Template.fromStack(new SteleStack(new App(), 'WithExplorer', { explorerDir: dir }));
    t.hasResourceProperties('Custom::CDKBucketDeployment', { DestinationBucketKeyPrefix: 'log/', Prune: false });
    t.hasResourceProperties('AWS::CloudFront::Distribution', {
      DistributionConfig: Match.objectLike({ DefaultRootObject: 'index.html' }),
    });
  }, 60_000);
});
