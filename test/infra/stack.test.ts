// CDK assertions on the synthesized template of infra/stack.ts (synthesized in process,
// offline): the bucket is private, CloudFront caches the checkpoint ≤ 2 s and tiles as
// immutable and never caches the API, the key is Ed25519 for signing, the API role can
// neither write tiles nor sign, and exactly one sequencer task runs; issue 32's points —
// immutability and version retention, one signer and its alerts, TLS end to end with WAF,
// and what an operator needs (alarm e-mail, dashboard, access logs, canary, Container
// Insights, NAT per AZ, table protection, backups, the index's grants, an adoptable table).
// The policies themselves are judged against requests in test/infra/immutability.test.ts,
// cdk-nag and cfn-guard in test/infra/nag.test.ts.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { AppSettingError, SteleStack, WITNESS_POLICY_FILE } from '../../infra/stack.js';
import { SIG_COSIGNATURE_V1, formatVkey, makeVerifier } from '../../src/core/note.js';
import { ensureBuilt } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';
import type { JsonObject } from '../helpers/json.js';

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
    const [tilesId] = ofType('AWS::S3::Bucket').find(([id]) => id.startsWith('Tiles'))!;
    const [, policy] = ofType('AWS::S3::BucketPolicy').find(([, p]) => p.Properties.Bucket.Ref === tilesId)!;
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
    // The load balancer under its own name (a CNAME to it), over HTTPS with TLS 1.2.
    expect(apiOrigin.DomainName).toEqual({ Ref: 'OriginDomainName' });
    expect(apiOrigin.CustomOriginConfig).toMatchObject({
      OriginProtocolPolicy: 'https-only',
      OriginSSLProtocols: ['TLSv1.2'],
    });
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
    // A deployment drains the old sequencer (in-flight anchors finish) before stopping it,
    // and gives it time to integrate what it accepted.
    const drain = (prefix: string) =>
      ofType('AWS::ElasticLoadBalancingV2::TargetGroup')
        .find(([id]) => id.startsWith(prefix))![1]
        .Properties.TargetGroupAttributes.find((a: Json) => a.Key === 'deregistration_delay.timeout_seconds').Value;
    expect(Number(drain('SequencerTargets'))).toBeGreaterThanOrEqual(30);
    const [, seqTaskDef] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith('SequencerTask'))!;
    expect(seqTaskDef.Properties.ContainerDefinitions[0].StopTimeout).toBeGreaterThan(
      Number(drain('SequencerTargets')),
    );
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
    const cwd = new URL('../..', import.meta.url).pathname;
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
      /^context stele:witnessPolicy: line 1: /,
    );
    // The app prints it as one line (exit 2): test/infra/nag.test.ts.
    expect(() => new SteleStack(new App(), 'BadPolicy2', { witnessPolicy: 'quorum w1\n' })).toThrow(AppSettingError);
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

describe('infra/stack.ts: issue 32 (immutability, one signer, TLS, operations)', () => {
  const byPrefix = (prefix: string, type: string): [string, Json] => {
    const found = ofType(type).filter(([id]) => id.startsWith(prefix));
    expect(found, `${type} ${prefix}`).toHaveLength(1);
    return found[0]!;
  };
  const envOf = (t: Template, prefix: string) => {
    const [, task] = Object.entries(t.findResources('AWS::ECS::TaskDefinition')).find(([id]) => id.startsWith(prefix))!;
    return Object.fromEntries(
      (task.Properties.ContainerDefinitions[0].Environment as Json[]).map((e) => [e.Name, e.Value]),
    );
  };

  it('the bucket policy makes tiles create-only and deletes partial tiles only; noncurrent versions stay ≥ 30 days, hot keys are capped', () => {
    const [tilesId, tiles] = byPrefix('Tiles', 'AWS::S3::Bucket');
    const [, policy] = ofType('AWS::S3::BucketPolicy').find(([, p]) => p.Properties.Bucket.Ref === tilesId)!;
    const bySid = Object.fromEntries((policy.Properties.PolicyDocument.Statement as Json[]).map((s) => [s.Sid, s]));
    const obj = (key: string) => ({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [tilesId, 'Arn'] }, `/${key}`]] });
    expect(bySid.TilesAreCreatedNeverOverwritten).toEqual({
      Sid: 'TilesAreCreatedNeverOverwritten',
      Effect: 'Deny',
      Principal: { AWS: '*' },
      Action: 's3:PutObject',
      Resource: obj('log/tile/*'),
      Condition: { Null: { 's3:if-none-match': 'true' } },
    });
    expect(bySid.OnlyPartialTilesAreDeleted).toMatchObject({
      Effect: 'Deny',
      Action: 's3:DeleteObject',
      NotResource: [obj('log/tile/*.p/*'), obj('private/*')],
    });
    expect(bySid.PublishedVersionsAreNeverDeleted).toMatchObject({
      Effect: 'Deny',
      Action: 's3:DeleteObjectVersion',
      Resource: obj('log/*'),
    });
    const rules = tiles.Properties.LifecycleConfiguration.Rules as Json[];
    const hot = rules.filter((r) => r.NoncurrentVersionExpiration?.NewerNoncurrentVersions !== undefined);
    expect(hot.map((r) => r.Prefix).sort()).toEqual(['log/checkpoint', 'log/checkpoint.json', 'private/lock.json']);
    for (const r of hot)
      expect(r.NoncurrentVersionExpiration).toEqual({ NoncurrentDays: 1, NewerNoncurrentVersions: 100 });
    const others = rules.filter((r) => r.NoncurrentVersionExpiration && !hot.includes(r));
    expect(others.length).toBeGreaterThan(0);
    for (const r of others) {
      expect(r.NoncurrentVersionExpiration.NoncurrentDays, r.Id).toBeGreaterThanOrEqual(30);
      expect(r.Prefix, r.Id).toBeUndefined(); // applies to the whole bucket, tiles included
    }
  });

  it("the explorer's deployment may write its own files only: no delete, no tile, no bucket-wide grant", () => {
    const dir = scratchDir('stele-explorer32-');
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>x</title>');
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'assets', 'app.js'), '');
    const t = Template.fromStack(new SteleStack(new App(), 'Explorer32', { explorerDir: dir }));
    const res = t.toJSON().Resources as Record<string, Json>;
    const [roleId] = Object.entries(res).find(
      ([id, r]) => id.startsWith('ExplorerDeployRole') && r.Type === 'AWS::IAM::Role',
    )!;
    const [, fn] = Object.entries(res).find(
      ([id, r]) => id.startsWith('CustomCDKBucketDeployment') && r.Type === 'AWS::Lambda::Function',
    )!;
    expect(fn.Properties.Role).toEqual({ 'Fn::GetAtt': [roleId, 'Arn'] });
    const statements = Object.values(res)
      .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x: Json) => x.Ref === roleId))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Json[]);
    const [tilesId] = Object.entries(res).find(([id, r]) => id.startsWith('Tiles') && r.Type === 'AWS::S3::Bucket')!;
    const onTiles = statements.filter((s) => JSON.stringify(s.Resource).includes(tilesId));
    expect(actionsOf(onTiles).filter((a) => /delete|\*/i.test(a))).toEqual([]);
    const writes = onTiles.filter((s) => actionsOf([s]).includes('s3:PutObject'));
    expect(writes).toHaveLength(1);
    expect(writes[0]!.Resource).toEqual([
      { 'Fn::Join': ['', [{ 'Fn::GetAtt': [tilesId, 'Arn'] }, '/log/assets/*']] },
      { 'Fn::Join': ['', [{ 'Fn::GetAtt': [tilesId, 'Arn'] }, '/log/index.html']] },
    ]);
    // The construct's own grant (read-write-delete on the bucket) reached no policy.
    expect(JSON.stringify(statements)).not.toContain('s3:DeleteObject');
    // A file where the log's objects live is refused at synth.
    mkdirSync(join(dir, 'tile'));
    expect(() => new SteleStack(new App(), 'BadExplorer', { explorerDir: dir })).toThrow(/explorer: tile/);
  }, 60_000);

  it('one signer: the key policy lets the sequencer role alone sign; CloudTrail rules alarm on another signer and on deletion or disabling', () => {
    const [keyId, key] = byPrefix('LogKey', 'AWS::KMS::Key');
    const [seqRoleId] = byPrefix('SequencerTaskRole', 'AWS::IAM::Role');
    const seqArn = { 'Fn::GetAtt': [seqRoleId, 'Arn'] };
    const statements = key.Properties.KeyPolicy.Statement as Json[];
    const signers = statements.filter((s) => s.Effect === 'Allow' && actionsOf([s]).some((a) => grants(a, 'kms:Sign')));
    expect(signers).toHaveLength(1);
    expect(signers[0]!.Principal).toEqual({ AWS: seqArn });
    expect(statements).toContainEqual(
      expect.objectContaining({
        Effect: 'Deny',
        Action: 'kms:Sign',
        Principal: { AWS: '*' },
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': seqArn } },
      }),
    );
    expect(key.Properties.MultiRegion).toBe(false);
    const keyArn = { 'Fn::GetAtt': [keyId, 'Arn'] };
    const [, foreign] = byPrefix('ForeignSignRule', 'AWS::Events::Rule');
    expect(foreign.Properties.State).toBe('ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS');
    expect(foreign.Properties.EventPattern.detail).toMatchObject({
      eventName: ['Sign'],
      resources: { ARN: [keyArn] },
      $or: [
        { userIdentity: { sessionContext: { sessionIssuer: { arn: [{ 'anything-but': seqArn }] } } } },
        { userIdentity: { type: [{ 'anything-but': 'AssumedRole' }] } },
      ],
    });
    const [ruleId, lifecycle] = byPrefix('KeyLifecycleRule', 'AWS::Events::Rule');
    expect(lifecycle.Properties.EventPattern.detail.eventName).toEqual(
      expect.arrayContaining(['ScheduleKeyDeletion', 'DisableKey']),
    );
    const [topicId] = byPrefix('Alarms', 'AWS::SNS::Topic');
    for (const rule of [foreign, lifecycle]) expect(rule.Properties.Targets[0].Arn).toEqual({ Ref: topicId });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Events',
      MetricName: 'TriggeredRules',
      Dimensions: [{ Name: 'RuleName', Value: { Ref: ruleId } }],
      AlarmActions: [{ Ref: topicId }],
    });
    const multi = Template.fromStack(new SteleStack(new App(), 'MultiRegion', { multiRegionKey: true }));
    multi.hasResourceProperties('AWS::KMS::Key', { MultiRegion: true, KeySpec: 'ECC_NIST_EDWARDS25519' });
  }, 60_000);

  it('TLS end to end: TLS 1.2 on our certificate at the edge, HTTPS to the origin, the ALB open to CloudFront only', () => {
    const [, dist] = byPrefix('Cdn', 'AWS::CloudFront::Distribution');
    const config = dist.Properties.DistributionConfig;
    expect(config.Aliases).toEqual([{ Ref: 'DomainName' }]);
    expect(config.ViewerCertificate).toEqual({
      AcmCertificateArn: { Ref: 'CertificateArn' },
      SslSupportMethod: 'sni-only',
      MinimumProtocolVersion: 'TLSv1.2_2021',
    });
    const listeners = ofType('AWS::ElasticLoadBalancingV2::Listener');
    expect(listeners).toHaveLength(1);
    expect(listeners[0]![1].Properties).toMatchObject({
      Port: 443,
      Protocol: 'HTTPS',
      Certificates: [{ CertificateArn: { Ref: 'OriginCertificateArn' } }],
      SslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
    });
    const [albSgId, albSg] = byPrefix('AlbSecurityGroup', 'AWS::EC2::SecurityGroup');
    expect(albSg.Properties.SecurityGroupIngress).toBeUndefined();
    const ingress = ofType('AWS::EC2::SecurityGroupIngress').filter(
      ([, r]) => r.Properties.GroupId['Fn::GetAtt']?.[0] === albSgId,
    );
    expect(ingress).toHaveLength(1);
    const [lookupId, lookup] = byPrefix('CloudFrontPrefixList', 'Custom::AWS');
    expect(ingress[0]![1].Properties).toMatchObject({
      FromPort: 443,
      ToPort: 443,
      SourcePrefixListId: { 'Fn::GetAtt': [lookupId, 'PrefixLists.0.PrefixListId'] },
    });
    expect(JSON.stringify(lookup.Properties)).toContain('com.amazonaws.global.cloudfront.origin-facing');
    expect(JSON.stringify(template.toJSON())).not.toContain('0.0.0.0/0"},"FromPort":443');
    template.hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', {
      LoadBalancerAttributes: Match.arrayWith([
        { Key: 'deletion_protection.enabled', Value: 'true' },
        { Key: 'routing.http.drop_invalid_header_fields.enabled', Value: 'true' },
        { Key: 'access_logs.s3.enabled', Value: 'true' },
      ]),
    });
  });

  it('the origin-verify value is a Secrets Manager secret CloudFront sends and the ALB rules require, rotated every 30 days', () => {
    const [secretId] = byPrefix('OriginVerifySecret', 'AWS::SecretsManager::Secret');
    const dynamicRef = { 'Fn::Join': ['', ['{{resolve:secretsmanager:', { Ref: secretId }, ':SecretString:::}}']] };
    const [, dist] = byPrefix('Cdn', 'AWS::CloudFront::Distribution');
    const apiOrigin = (dist.Properties.DistributionConfig.Origins as Json[]).find((o) => o.OriginCustomHeaders)!;
    expect(apiOrigin.OriginCustomHeaders).toEqual([{ HeaderName: 'X-Stele-Origin-Verify', HeaderValue: dynamicRef }]);
    const rules = ofType('AWS::ElasticLoadBalancingV2::ListenerRule');
    expect(rules).toHaveLength(2);
    for (const [, r] of rules)
      expect(r.Properties.Conditions).toContainEqual({
        Field: 'http-header',
        HttpHeaderConfig: { HttpHeaderName: 'X-Stele-Origin-Verify', Values: [dynamicRef] },
      });
    const [fnId, fn] = byPrefix('OriginSecretRotation', 'AWS::Lambda::Function');
    template.hasResourceProperties('AWS::SecretsManager::RotationSchedule', {
      SecretId: { Ref: secretId },
      RotationLambdaARN: { 'Fn::GetAtt': [fnId, 'Arn'] },
      RotationRules: { ScheduleExpression: 'rate(30 days)' },
    });
    const ruleRefs = rules.map(([id]) => ({ Ref: id }));
    expect(fn.Properties.Environment.Variables.RULE_ARNS['Fn::Join'][1]).toEqual(ruleRefs);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      FunctionName: { 'Fn::GetAtt': [fnId, 'Arn'] },
      Principal: 'secretsmanager.amazonaws.com',
      SourceArn: { Ref: secretId },
    });
    const rotationRole = refId(fn.Properties.Role);
    const statements = ofType('AWS::IAM::Policy')
      .filter(([, p]) => p.Properties.Roles.some((r: Json) => refId(r) === rotationRole))
      .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as Json[]);
    const modify = statements.find((s) => actionsOf([s]).includes('elasticloadbalancing:ModifyRule'))!;
    expect(modify.Resource).toEqual(ruleRefs);
  });

  it('WAF: a rate rule on POST /api/ledger/anchor, the web ACL attached (created in us-east-1, else the WebAclArn parameter)', () => {
    const [aclId, acl] = byPrefix('WebAcl', 'AWS::WAFv2::WebACL');
    expect(acl.Properties.Scope).toBe('CLOUDFRONT');
    expect(acl.Condition).toBe('CreateWebAcl');
    const rate = (acl.Properties.Rules as Json[]).find((r) => r.Name === 'AnchorRate')!;
    expect(rate.Action).toEqual({ Block: {} });
    const stmt = rate.Statement.RateBasedStatement;
    expect(stmt).toMatchObject({ Limit: { Ref: 'AnchorRateLimit' }, AggregateKeyType: 'IP' });
    const matches = stmt.ScopeDownStatement.AndStatement.Statements.map((s: Json) => s.ByteMatchStatement);
    expect(matches).toEqual([
      expect.objectContaining({ FieldToMatch: { Method: {} }, SearchString: 'POST', PositionalConstraint: 'EXACTLY' }),
      expect.objectContaining({
        FieldToMatch: { UriPath: {} },
        SearchString: '/api/ledger/anchor',
        PositionalConstraint: 'EXACTLY',
      }),
    ]);
    const [, dist] = byPrefix('Cdn', 'AWS::CloudFront::Distribution');
    expect(dist.Properties.DistributionConfig.WebACLId).toEqual({
      'Fn::If': [
        'CreateWebAcl',
        { 'Fn::GetAtt': [aclId, 'Arn'] },
        { 'Fn::If': ['HasWebAclArn', { Ref: 'WebAclArn' }, { Ref: 'AWS::NoValue' }] },
      ],
    });
    expect((template.toJSON().Conditions as Json).CreateWebAcl['Fn::And']).toContainEqual({
      'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'],
    });
  });

  it('operable: alarm e-mail, every alarm to the topic, a dashboard, a freshness canary, access logs, Container Insights, a NAT per AZ', () => {
    const [topicId] = byPrefix('Alarms', 'AWS::SNS::Topic');
    const [, sub] = byPrefix('AlarmEmailSubscription', 'AWS::SNS::Subscription');
    expect(sub).toMatchObject({
      Condition: 'HasAlarmEmail',
      Properties: { Protocol: 'email', Endpoint: { Ref: 'AlarmEmail' }, TopicArn: { Ref: topicId } },
    });
    const alarms = ofType('AWS::CloudWatch::Alarm');
    expect(alarms.length).toBeGreaterThanOrEqual(6);
    for (const [id, a] of alarms) expect(a.Properties.AlarmActions, id).toEqual([{ Ref: topicId }]);
    const [, dashboard] = byPrefix('Dashboard', 'AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    for (const metric of [
      'RequestCount',
      'TargetResponseTime',
      'CheckpointStallSeconds',
      'SequencerErrors',
      'SuccessPercent',
      '4xxErrorRate',
      '5xxErrorRate',
      'HTTPCode_Target_5XX_Count',
      'RATE(size)',
      'TreeSize',
      'PendingAnchors',
      'CheckpointAgeSeconds',
      'WitnessPolicyNotMet',
    ])
      expect(body, metric).toContain(metric);
    // The heartbeat's fields and the witness rounds become metrics (metric filters on the sequencer's log).
    for (const [name, value] of [
      ['TreeSize', '$.size'],
      ['PendingAnchors', '$.pending'],
      ['CheckpointAgeSeconds', '$.checkpointAgeSeconds'],
    ])
      template.hasResourceProperties('AWS::Logs::MetricFilter', {
        FilterPattern: '{ $.msg = "sequencer heartbeat" }',
        MetricTransformations: [Match.objectLike({ MetricName: name, MetricValue: value })],
      });
    template.hasResourceProperties('AWS::Logs::MetricFilter', {
      FilterPattern: '{ $.msg = "witness policy not met; the checkpoint waits for the next round" }',
      MetricTransformations: [Match.objectLike({ MetricName: 'WitnessPolicyNotMet', MetricValue: '1' })],
    });
    const [canaryId, canary] = byPrefix('CheckpointCanary', 'AWS::Synthetics::Canary');
    expect(canary.Properties.RunConfig.EnvironmentVariables).toEqual({
      CHECKPOINT_URL: { 'Fn::Join': ['', ['https://', { Ref: 'DomainName' }, '/checkpoint.json']] },
      MAX_AGE_SECONDS: { Ref: 'CheckpointMaxAgeSeconds' },
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'CloudWatchSynthetics',
      MetricName: 'SuccessPercent',
      Dimensions: [{ Name: 'CanaryName', Value: { Ref: canaryId } }],
      ComparisonOperator: 'LessThanThreshold',
      Threshold: 100,
    });
    // Access logs: CloudFront, the tiles bucket and the ALB's log bucket into the log bucket; the ALB; the VPC.
    const [logsId] = byPrefix('AccessLogs', 'AWS::S3::Bucket');
    const [, dist] = byPrefix('Cdn', 'AWS::CloudFront::Distribution');
    expect(dist.Properties.DistributionConfig.Logging.Bucket).toEqual({ 'Fn::GetAtt': [logsId, 'RegionalDomainName'] });
    for (const prefix of ['Tiles', 'AlbLogs']) {
      const [, b] = byPrefix(prefix, 'AWS::S3::Bucket');
      expect(b.Properties.LoggingConfiguration.DestinationBucketName, prefix).toEqual({ Ref: logsId });
    }
    const [albLogsId] = byPrefix('AlbLogs', 'AWS::S3::Bucket');
    template.hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', {
      LoadBalancerAttributes: Match.arrayWith([{ Key: 'access_logs.s3.bucket', Value: { Ref: albLogsId } }]),
    });
    // ELB writes as its regional account in older regions, as a service principal in newer ones.
    const [, albLogsPolicy] = ofType('AWS::S3::BucketPolicy').find(([, p]) => p.Properties.Bucket.Ref === albLogsId)!;
    const [tlsOnly, elbWrites] = albLogsPolicy.Properties.PolicyDocument.Statement as Json[];
    expect(tlsOnly).toMatchObject({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } });
    expect(elbWrites).toMatchObject({
      Sid: 'ElbWritesAccessLogs',
      Effect: 'Allow',
      Action: 's3:PutObject',
      Principal: {
        'Fn::If': [
          'ElbLegacyRegion',
          { AWS: { 'Fn::FindInMap': ['ElbAccounts', { Ref: 'AWS::Region' }, 'account'] } },
          { Service: 'logdelivery.elasticloadbalancing.amazonaws.com' },
        ],
      },
    });
    expect((template.toJSON().Mappings as Json).ElbAccounts['us-east-1']).toEqual({ account: '127311923021' });
    template.hasResourceProperties('AWS::EC2::FlowLog', { LogDestinationType: 's3', TrafficType: 'ALL' });
    template.hasResourceProperties('AWS::ECS::Cluster', {
      ClusterSettings: [{ Name: 'containerInsights', Value: 'enabled' }],
    });
    template.resourceCountIs('AWS::EC2::NatGateway', 2);
    for (const [, subnet] of ofType('AWS::EC2::Subnet')) expect(subnet.Properties.MapPublicIpOnLaunch).toBe(false);
    // Containers: read-only root, unprivileged user, /tmp and the data directory (the image's
    // STELE_DATA_DIR, where production mode keeps its anchor policy) task volumes, a hard memory limit.
    const dockerfile = readFileSync(new URL('../../infra/Dockerfile', import.meta.url), 'utf8');
    expect(/STELE_DATA_DIR=(\S+)/.exec(dockerfile)?.[1]).toBe('/data'); // the mount below is the image's data directory
    for (const [id, task] of ofType('AWS::ECS::TaskDefinition')) {
      const [c, collector] = task.Properties.ContainerDefinitions as Json[];
      expect(c, id).toMatchObject({
        Essential: true,
        ReadonlyRootFilesystem: true,
        User: 'node',
        MountPoints: [
          { ContainerPath: '/tmp', SourceVolume: 'tmp', ReadOnly: false },
          { ContainerPath: '/data', SourceVolume: 'data', ReadOnly: false },
        ],
        Memory: Number(task.Properties.Memory) - 128,
      });
      // The /metrics collector beside it: not essential, read-only, unprivileged, 128 MiB.
      expect(collector, id).toMatchObject({
        Name: 'metrics',
        Essential: false,
        ReadonlyRootFilesystem: true,
        User: '10001',
        Memory: 128,
        Image: 'public.ecr.aws/aws-observability/aws-otel-collector:latest',
      });
    }
  });

  it("/metrics is collected: each task's collector scrapes its own service and writes EMF to one log group the task role may write", () => {
    const [metricsLogId] = byPrefix('PrometheusMetrics', 'AWS::Logs::LogGroup');
    for (const [prefix, job] of [
      ['SequencerTask', 'stele-sequencer'],
      ['ApiTask', 'stele-api'],
    ]) {
      const [, task] = ofType('AWS::ECS::TaskDefinition').find(([id]) => id.startsWith(prefix!))!;
      const collector = (task.Properties.ContainerDefinitions as Json[]).find((c) => c.Name === 'metrics')!;
      const [config] = collector.Environment.filter((e: Json) => e.Name === 'AOT_CONFIG_CONTENT').map(
        (e: Json) => e.Value,
      );
      const text = JSON.stringify(config);
      for (const fragment of [
        `job_name: ${job}`,
        "targets: ['127.0.0.1:8080']",
        'metrics_path: /metrics',
        'namespace: Stele/Prometheus',
        "metric_name_selectors: ['^stele_']",
      ])
        expect(text, `${prefix} ${fragment}`).toContain(fragment);
      expect(text).toContain(metricsLogId);
      const role = refId(task.Properties.TaskRoleArn);
      const writes = ofType('AWS::IAM::Policy')
        .filter(([, p]) => p.Properties.Roles.some((r: Json) => refId(r) === role))
        .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as Json[])
        .filter((st) => actionsOf([st]).includes('logs:PutLogEvents'));
      expect(writes, prefix).toHaveLength(1);
      expect(writes[0]!.Resource).toEqual({ 'Fn::GetAtt': [metricsLogId, 'Arn'] });
    }
    // The metrics the dashboard reads from it exist in the services' registry (src/api/metrics.ts).
    const metricsSource = readFileSync(new URL('../../src/api/metrics.ts', import.meta.url), 'utf8');
    const [, dashboard] = byPrefix('Dashboard', 'AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    const used = [...body.matchAll(/stele_[a-z_]+/g)].map((m) => m[0]);
    expect(used.length).toBeGreaterThanOrEqual(3);
    for (const name of new Set(used)) expect(metricsSource, name).toContain(`'${name}'`);
  });

  it('the table: deletion protection, monthly backups kept a year, the grants clear() needs, and a restored table adopted by name', () => {
    const [tableId] = byPrefix('Table', 'AWS::DynamoDB::Table');
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      DeletionProtectionEnabled: true,
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    const active = { 'Fn::If': ['HasTableName', { Ref: 'ExistingTableName' }, { Ref: tableId }] };
    const activeArn = {
      'Fn::Join': [
        '',
        [
          'arn:',
          { Ref: 'AWS::Partition' },
          ':dynamodb:',
          { Ref: 'AWS::Region' },
          ':',
          { Ref: 'AWS::AccountId' },
          ':table/',
          active,
        ],
      ],
    };
    const [, plan] = byPrefix('TableBackup', 'AWS::Backup::BackupPlan');
    const retention = (plan.Properties.BackupPlan.BackupPlanRule as Json[])
      .map((r) => r.Lifecycle.DeleteAfterDays)
      .sort();
    expect(retention).toEqual([365]);
    template.hasResourceProperties('AWS::Backup::BackupSelection', {
      BackupSelection: Match.objectLike({ Resources: [activeArn] }),
    });
    for (const prefix of ['SequencerTask', 'ApiTask'])
      expect(envOf(template, prefix).STELE_DYNAMO_TABLE, prefix).toEqual(active);
    const seq = taskRoleStatements('SequencerTask').filter((s) => JSON.stringify(s).includes('dynamodb:'));
    expect(seq).toHaveLength(1);
    expect(seq[0]!.Resource).toEqual(activeArn);
    expect(actionsOf(seq)).toEqual(expect.arrayContaining(['dynamodb:Scan', 'dynamodb:DeleteItem', 'dynamodb:Query']));
    const api = taskRoleStatements('ApiTask');
    expect(actionsOf(api).filter((a) => ['dynamodb:Scan', 'dynamodb:DeleteItem'].includes(a))).toEqual([]);
    expect((template.toJSON().Parameters as Json).ExistingTableName).toMatchObject({ Type: 'String', Default: '' });
  });
});
