// The Stele production stack (aws-cdk-lib v2), environment-agnostic and lookup-free so
// `npx cdk synth` works offline:
//   S3 bucket (private, versioned, TLS only; its policy makes tiles create-only and
//   undeletable, infra/immutability.ts) ── CloudFront (OAC, origin path /log, TLS ≥ 1.2 on
//   the DomainName certificate, WAF web ACL, access logs)
//       /checkpoint, /checkpoint.json   cached ≤ 2 s at the edge
//       /tile/*                         cached a year (immutable objects)
//       /api/ledger/*                   → ALB over HTTPS, no caching, all methods
//   ALB (HTTPS on OriginDomainName's certificate; reachable only from CloudFront's origin-facing
//   prefix list; forwards only requests carrying the rotated origin-verify secret)
//       /api/ledger/anchor → the sequencer service (one Fargate task, never two at once)
//       /api/ledger/*      → the API service (Fargate, autoscaled)
//   KMS key ECC_NIST_EDWARDS25519 (SIGN_VERIFY) — the log key; only the sequencer's role may
//   kms:Sign (key policy), and a Sign by anyone else, a key deletion or disabling raises an
//   alert. DynamoDB table (on demand, PITR, deletion protection, backup plan) — lock, lookup
//   index, sweeper mark; the ExistingTableName parameter adopts a restored table (README runbook).
//   Operations: alarms to an SNS topic with an optional e-mail subscriber, a dashboard, a
//   Synthetics canary on checkpoint freshness, access logs (CloudFront, S3, ALB, VPC flow) in
//   a log bucket, Container Insights, a NAT gateway per AZ.
// Least privilege: the API role reads the public prefix and the table and may fetch the
// public key; only the sequencer role may write objects, write the table or kms:Sign.
// cdk-nag (AwsSolutions) runs at every synth (infra/app.ts); each acknowledgement says why.
// Each part is made in infra/stack/ by a function that takes this stack as its scope, so
// every logical id is the stack's own; the constructor calls them in the template's order.
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Stack, type StackProps } from 'aws-cdk-lib';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { grantServiceAccess } from './stack/access.js';
import { edgeDistribution } from './stack/cdn.js';
import { deployExplorer } from './stack/explorer.js';
import { acknowledgeAcceptedFindings } from './stack/nag-acknowledgements.js';
import { network } from './stack/network.js';
import { operations } from './stack/operations.js';
import { cloudFrontOnlyAlb, originRouting, originSecretRotation } from './stack/origin.js';
import { stackOutputs } from './stack/outputs.js';
import { stackConditions, stackParameters } from './stack/parameters.js';
import { logServices } from './stack/services.js';
import { checkedPolicy } from './stack/settings.js';
import { signingKey } from './stack/signing.js';
import { accessLogBucket, logTable, tableBackup, tilesBucket } from './stack/storage.js';
import { cloudFrontWebAcl } from './stack/waf.js';

export { WITNESS_POLICY_FILE } from './stack/constants.js';
export { AppSettingError } from './stack/settings.js';

export interface SteleStackProps extends StackProps {
  /**
   * Build the container image from this directory (it needs a Dockerfile; docker runs at
   * deploy time, not at synth). Default: the ImageRepository/ImageTag parameters (ECR).
   */
  readonly imageAsset?: string;
  /** Built explorer to publish beside the tiles (default dist/explorer, if built). */
  readonly explorerDir?: string;
  /**
   * Where the sequencer keeps its lock record: a DynamoDB item (default), or an object under
   * the staging prefix, replaced by compare-and-swap on its ETag (`bucket`: S3 conditional
   * writes, no DynamoDB write on the commit path). The table still holds the lookup index.
   */
  readonly lock?: 'dynamodb' | 'bucket';
  /**
   * A C2SP tlog-policy (its text): the witnesses each checkpoint is sent to and the quorum
   * that publishes it. Checked here, at synth, so a typo fails `cdk synth`, not a deployment;
   * kept in the template, so `cdk diff` shows a change. Both services write it to
   * WITNESS_POLICY_FILE at start and run with STELE_WITNESS_POLICY naming it; the
   * WitnessThreshold parameter is left out (the policy's quorum line decides).
   */
  readonly witnessPolicy?: string;
  /**
   * Create the log key as a multi-Region primary key, so `aws kms replicate-key` can make a
   * replica (same key material, same public key: the same log identity) in a recovery region
   * (README "The log key"). Only at creation: an existing key cannot become multi-Region.
   */
  readonly multiRegionKey?: boolean;
}

export class SteleStack extends Stack {
  readonly bucket: s3.Bucket;
  readonly table: dynamodb.Table;
  readonly key: kms.Key;
  readonly distribution: cloudfront.Distribution;
  readonly sequencerService: ecs.FargateService;
  readonly apiService: ecs.FargateService;
  readonly logBucket: s3.Bucket;
  readonly alarmTopic: sns.Topic;

  constructor(scope: Construct, id: string, props: SteleStackProps = {}) {
    super(scope, id, props);
    const policy = props.witnessPolicy === undefined ? undefined : checkedPolicy(props.witnessPolicy);
    const params = stackParameters(this, policy === undefined);
    const conditions = stackConditions(this, params);

    const logBucket = (this.logBucket = accessLogBucket(this));
    const bucket = (this.bucket = tilesBucket(this, logBucket));
    const { table, active } = logTable(this, params, conditions);
    this.table = table;
    const plan = tableBackup(this, active);

    const { vpc, cluster } = network(this, logBucket);
    const { sequencerRole, key } = signingKey(this, props.multiRegionKey === true);
    this.key = key;
    const log = { params, bucket, table: active, key, lock: props.lock ?? 'dynamodb', policy } as const;
    const svc = logServices(this, log, cluster, sequencerRole, props.imageAsset);
    const { seq, api, tokens } = svc;
    this.sequencerService = svc.sequencerService;
    this.apiService = svc.apiService;
    grantServiceAccess(seq.task.taskRole, api.task.taskRole, { bucket, table: active, key });

    const { prefixList, alb } = cloudFrontOnlyAlb(this, vpc, logBucket);
    const routing = originRouting(this, vpc, alb, params, svc);
    const webAcl = cloudFrontWebAcl(this, params, conditions);
    const edge = { bucket, logBucket, params, conditions, originSecretValue: routing.originSecretValue, webAcl };
    const distribution = (this.distribution = edgeDistribution(this, edge));
    const rotation = originSecretRotation(this, vpc, routing, distribution);
    // The explorer's static files, next to the tiles (never pruning: the prefix holds the log).
    const explorerDir = props.explorerDir ?? fileURLToPath(new URL('../dist/explorer', import.meta.url));
    if (existsSync(path.join(explorerDir, 'index.html'))) deployExplorer(this, explorerDir, bucket, vpc);

    const watched = { params, conditions, sequencerLogs: seq.logGroup, key, sequencerRole, logBucket, routing, alb };
    const { topic, canary } = operations(this, { ...watched, distribution });
    this.alarmTopic = topic;
    stackOutputs(this, { params, distribution, alb, bucket, logBucket, active, table, key, topic });
    acknowledgeAcceptedFindings(this, {
      distribution,
      plan,
      bucket,
      logBucket,
      tokens,
      sequencerTask: seq.task,
      apiTask: api.task,
      prefixList,
      rotation,
      canary,
    });
  }
}
