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
//   index, sweeper mark; a TableName parameter adopts a restored table (README runbook).
//   Operations: alarms to an SNS topic with an optional e-mail subscriber, a dashboard, a
//   Synthetics canary on checkpoint freshness, access logs (CloudFront, S3, ALB, VPC flow) in
//   a log bucket, Container Insights, a NAT gateway per AZ.
// Least privilege: the API role reads the public prefix and the table and may fetch the
// public key; only the sequencer role may write objects, write the table or kms:Sign.
// cdk-nag (AwsSolutions) runs at every synth (infra/app.ts); each acknowledgement below says why.
import * as path from 'node:path';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  Aws,
  CfnCondition,
  CfnOutput,
  CfnParameter,
  Duration,
  Fn,
  RemovalPolicy,
  SecretValue,
  Stack,
  type StackProps,
  type CfnElement,
  CfnMapping,
  type ICfnConditionExpression,
  Validations,
} from 'aws-cdk-lib';
import { RegionInfo } from 'aws-cdk-lib/region-info';
import * as backup from 'aws-cdk-lib/aws-backup';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventsTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import * as s3deploy from 'aws-cdk-lib/aws-s3-deployment';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as synthetics from 'aws-cdk-lib/aws-synthetics';
import * as cr from 'aws-cdk-lib/custom-resources';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import type { Construct, IConstruct } from 'constructs';
import { PolicyError, parsePolicy } from '../src/core/tlog-policy.js';
import { CANARY_SCRIPT } from './canary.js';
import { HOT_KEY_VERSIONS, hotKeys, immutabilityStatements } from './immutability.js';
import { COLLECTOR_IMAGE, COLLECTOR_MEMORY_MIB, METRICS_NAMESPACE, collectorConfig } from './metrics-collector.js';
import { ROTATION_SCRIPT } from './origin-secret-rotation.js';

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

/** Where the services write the witness policy at start (a path of the container's own, writable by its user). */
export const WITNESS_POLICY_FILE = '/tmp/witnesses.policy';

/** Object prefixes in the bucket; must match the services' STELE_S3_PREFIX / STELE_S3_STAGING_PREFIX. */
export const PUBLIC_PREFIX = 'log/';
export const STAGING_PREFIX = 'private/';
const PORT = 8080;
const ORIGIN_VERIFY_HEADER = 'X-Stele-Origin-Verify';
/** The API route the WAF rate-limits per client address (POST only). */
export const ANCHOR_PATH = '/api/ledger/anchor';
/** CloudFront's managed prefix list of origin-facing addresses (looked up in the deploy region). */
export const CLOUDFRONT_ORIGIN_FACING = 'com.amazonaws.global.cloudfront.origin-facing';

/** A cdk-nag finding acknowledged on a construct (and its children), with the reason written there. */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
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

    // ---- parameters -----------------------------------------------------------------
    const origin = new CfnParameter(this, 'Origin', {
      type: 'String',
      description: "The log's origin: the checkpoint's first line and the key name, e.g. ledger.example.com/log",
      allowedPattern: '^[^\\s+]+$',
      constraintDescription: 'no spaces or plus signs',
    });
    // TLS ≥ 1.2 at the edge needs a certificate of one's own: CloudFront's default
    // *.cloudfront.net certificate accepts TLS 1.0.
    const domainName = new CfnParameter(this, 'DomainName', {
      type: 'String',
      minLength: 1,
      description:
        "The log's public name on CloudFront, e.g. ledger.example.com (point it at the LogDomainTarget output)",
    });
    const certificateArn = new CfnParameter(this, 'CertificateArn', {
      type: 'String',
      allowedPattern: '^arn:aws[a-z-]*:acm:us-east-1:[0-9]{12}:certificate/.+$',
      description: 'ACM certificate in us-east-1 for DomainName',
    });
    // CloudFront reaches the load balancer over HTTPS and checks its certificate against the
    // origin's name, so the origin has a name of its own (a CNAME to the ALB) and a certificate.
    const originDomainName = new CfnParameter(this, 'OriginDomainName', {
      type: 'String',
      minLength: 1,
      description:
        "The load balancer's name for CloudFront, e.g. origin.ledger.example.com (a CNAME to the OriginAliasTarget output)",
    });
    const originCertificateArn = new CfnParameter(this, 'OriginCertificateArn', {
      type: 'String',
      allowedPattern: '^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/.+$',
      description: "ACM certificate in the stack's region for OriginDomainName",
    });
    const alarmEmail = new CfnParameter(this, 'AlarmEmail', {
      type: 'String',
      default: '',
      description: 'E-mail address subscribed to the alarm topic (empty: no subscription; subscribe one yourself)',
    });
    const tableName = new CfnParameter(this, 'ExistingTableName', {
      type: 'String',
      default: '',
      allowedPattern: '^[a-zA-Z0-9_.-]{0,255}$',
      description:
        "A DynamoDB table both services use instead of the stack's own, e.g. one restored from a backup or point in time (README runbook); empty: the stack's table",
    });
    const anchorRateLimit = new CfnParameter(this, 'AnchorRateLimit', {
      type: 'Number',
      default: 600,
      minValue: 10,
      description: 'WAF: most POST /api/ledger/anchor requests one client address may make in 5 minutes',
    });
    const webAclArn = new CfnParameter(this, 'WebAclArn', {
      type: 'String',
      default: '',
      description:
        'A CLOUDFRONT-scope WAF web ACL to use instead of the one this stack creates (which it can only create when deployed in us-east-1)',
    });
    const checkpointMaxAge = new CfnParameter(this, 'CheckpointMaxAgeSeconds', {
      type: 'Number',
      default: 3600,
      minValue: 60,
      description:
        'The canary alarms when the checkpoint served through CloudFront is older than this (set it above the longest quiet time of the log)',
    });
    const batchInterval = new CfnParameter(this, 'BatchIntervalMs', {
      type: 'Number',
      default: 1000,
      minValue: 10,
      maxValue: 60000,
      description: 'Longest an anchor waits for its batch, in ms',
    });
    const minBatchSpacing = new CfnParameter(this, 'MinBatchSpacingMs', {
      type: 'Number',
      default: 1000,
      minValue: 0,
      maxValue: 60000,
      description:
        'Shortest time between two batch starts, in ms: each batch costs a KMS sign, S3 PUTs and two DynamoDB writes (0: back to back)',
    });
    const imageRepository = new CfnParameter(this, 'ImageRepository', {
      type: 'String',
      default: 'stele',
      description: 'ECR repository (in this account and region) holding the Stele image',
    });
    const imageTag = new CfnParameter(this, 'ImageTag', {
      type: 'String',
      default: 'latest',
      description: 'Image tag to run',
    });
    const apiMin = new CfnParameter(this, 'ApiMinTasks', {
      type: 'Number',
      default: 2,
      minValue: 1,
      description: 'Fewest API tasks',
    });
    const apiMax = new CfnParameter(this, 'ApiMaxTasks', {
      type: 'Number',
      default: 10,
      minValue: 1,
      description: 'Most API tasks',
    });
    const stallSeconds = new CfnParameter(this, 'StallAlarmSeconds', {
      type: 'Number',
      default: 60,
      minValue: 5,
      description: 'Alarm when anchors have waited this long with no checkpoint published',
    });
    const anchorTokens = new CfnParameter(this, 'AnchorTokens', {
      type: 'String',
      noEcho: true,
      minLength: 1,
      description:
        'Bearer tokens of the anchor route, name=token[@tenant],… (kept in Secrets Manager, given to the sequencer only)',
    });
    // Witnesses and mirrors (src/serve/witnessing.ts): both services get them, the sequencer to
    // ask them before each publish, the API replicas to advertise the same policy. Empty: none.
    const witnesses = new CfnParameter(this, 'Witnesses', {
      type: 'String',
      default: '',
      description:
        'tlog-witnesses that cosign each checkpoint before it is published, <witness vkey>=<submission URL>,… (STELE_WITNESSES); empty: none, and split views go unseen',
    });
    const policy = props.witnessPolicy === undefined ? undefined : checkedPolicy(props.witnessPolicy);
    const witnessThreshold = policy
      ? undefined
      : new CfnParameter(this, 'WitnessThreshold', {
          type: 'String',
          default: '',
          allowedPattern: '^[0-9]*$',
          description: 'Witness cosignatures a checkpoint needs (STELE_WITNESS_THRESHOLD; empty: all of them)',
        });
    const mirrors = new CfnParameter(this, 'Mirrors', {
      type: 'String',
      default: '',
      description: 'tlog-mirrors the entries are pushed to, <mirror vkey>=<URL>,… (STELE_MIRRORS)',
    });
    const mirrorQuorum = new CfnParameter(this, 'MirrorQuorum', {
      type: 'String',
      default: '',
      allowedPattern: '^[0-9]*$',
      description: 'Mirror cosignatures a checkpoint needs before it is published (STELE_MIRROR_QUORUM; empty: 0)',
    });
    // The sequencer stores the witness and mirror settings it starts with in the bucket's private
    // prefix and refuses a start that changes them (src/serve/log-settings.ts): changing them is
    // a deployment with this set to true (then back to false; the same settings start as before).
    const reconfigure = new CfnParameter(this, 'ReconfigureLogSettings', {
      type: 'String',
      default: 'false',
      allowedValues: ['false', 'true'],
      description:
        "true: the sequencer replaces the witness and mirror settings stored with the log by this deployment's (STELE_RECONFIGURE); false refuses a change, so clients that pinned the witnesses never see checkpoints they reject",
    });
    const hasEmail = new CfnCondition(this, 'HasAlarmEmail', {
      expression: Fn.conditionNot(Fn.conditionEquals(alarmEmail.valueAsString, '')),
    });
    const hasTableName = new CfnCondition(this, 'HasTableName', {
      expression: Fn.conditionNot(Fn.conditionEquals(tableName.valueAsString, '')),
    });
    const hasWebAclArn = new CfnCondition(this, 'HasWebAclArn', {
      expression: Fn.conditionNot(Fn.conditionEquals(webAclArn.valueAsString, '')),
    });
    const createWebAcl = new CfnCondition(this, 'CreateWebAcl', {
      expression: Fn.conditionAnd(
        Fn.conditionEquals(webAclArn.valueAsString, ''),
        Fn.conditionEquals(Aws.REGION, 'us-east-1'),
      ),
    });

    // ---- storage, key, table --------------------------------------------------------
    // Access logs of CloudFront, the tiles bucket, the load balancer and the VPC. CloudFront's
    // standard logs are written with an ACL, so this bucket keeps ACLs (bucket owner preferred).
    this.logBucket = new s3.Bucket(this, 'AccessLogs', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      versioned: true,
      enforceSSL: true,
      encryption: s3.BucketEncryption.S3_MANAGED, // ALB access logs accept SSE-S3 only
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        { id: 'expire', expiration: Duration.days(365), noncurrentVersionExpiration: Duration.days(30) },
      ],
    });
    acknowledge(this.logBucket, 'AwsSolutions-S1', 'The access-log bucket does not log its own accesses (a loop).');

    this.bucket = new s3.Bucket(this, 'Tiles', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      encryption: s3.BucketEncryption.S3_MANAGED, // ETags stay content MD5s; CloudFront needs no key grant
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy: RemovalPolicy.RETAIN,
      serverAccessLogsBucket: this.logBucket,
      serverAccessLogsPrefix: 's3/',
      lifecycleRules: [
        // The bucket policy keeps full tiles and bundles current forever; the noncurrent
        // versions here are swept partials, replaced checkpoints and applied staged batches,
        // all kept 30 days (an operator's window to look back after an incident).
        {
          id: 'noncurrent',
          noncurrentVersionExpiration: Duration.days(30),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
        // The hot keys are replaced up to once a second (2.6 M versions a month each; S3
        // answers 503 SlowDown on keys with millions of versions): a day of noncurrent
        // versions (≤ 86,400), then only the newest HOT_KEY_VERSIONS.
        ...hotKeys(PUBLIC_PREFIX, STAGING_PREFIX).map((key, i) => ({
          id: `hot-key-${i}`,
          prefix: key,
          noncurrentVersionExpiration: Duration.days(1),
          noncurrentVersionsToRetain: HOT_KEY_VERSIONS,
        })),
        { id: 'delete-markers', expiredObjectDeleteMarker: true },
      ],
    });
    for (const statement of immutabilityStatements(
      (pattern) => this.bucket.arnForObjects(pattern),
      PUBLIC_PREFIX,
      STAGING_PREFIX,
    ))
      this.bucket.addToResourcePolicy(statement);

    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // The table the services use: the stack's own, or a restored one named by ExistingTableName.
    const activeTableName = Fn.conditionIf(
      hasTableName.logicalId,
      tableName.valueAsString,
      this.table.tableName,
    ).toString();
    const activeTableArn = Stack.of(this).formatArn({
      service: 'dynamodb',
      resource: 'table',
      resourceName: activeTableName,
    });
    // Monthly backups kept a year of the table in use (AWS Backup). The last 35 days are
    // point-in-time recovery's; a DynamoDB backup is a full copy, billed per GB-month, so
    // daily ones would duplicate PITR at 35 times the storage.
    const plan = new backup.BackupPlan(this, 'TableBackup', {
      backupPlanRules: [backup.BackupPlanRule.monthly1Year()],
    });
    plan.addSelection('Table', {
      resources: [backup.BackupResource.fromArn(activeTableArn)],
    });

    // ---- network and compute --------------------------------------------------------
    // A NAT gateway per AZ: losing one AZ's gateway does not cut the other AZ's tasks off
    // KMS, ECR, Secrets Manager, CloudWatch and the witnesses.
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 2,
      // Public subnets hold the NAT gateways and the load balancer only (both get their own
      // addresses); nothing launched there gets a public IP by default.
      subnetConfiguration: [
        { name: 'Public', subnetType: ec2.SubnetType.PUBLIC, mapPublicIpOnLaunch: false },
        { name: 'Private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      ],
      gatewayEndpoints: {
        S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
        DynamoDB: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
      },
      flowLogs: {
        ToLogBucket: {
          destination: ec2.FlowLogDestination.toS3(this.logBucket, 'vpc-flow/'),
          trafficType: ec2.FlowLogTrafficType.ALL,
        },
      },
    });
    const cluster = new ecs.Cluster(this, 'Cluster', {
      vpc,
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });

    // The sequencer's role exists before the key, whose policy names it as the only signer.
    const sequencerRole = new iam.Role(this, 'SequencerTaskRole', {
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description: 'Stele sequencer task: writes the log, the only principal that may kms:Sign with the log key',
    });
    this.key = new kms.Key(this, 'LogKey', {
      keySpec: kms.KeySpec.ECC_NIST_EDWARDS25519,
      keyUsage: kms.KeyUsage.SIGN_VERIFY,
      description: 'Stele log signing key (Ed25519; checkpoints are signed with ED25519_SHA_512, RAW)',
      removalPolicy: RemovalPolicy.RETAIN,
      multiRegion: props.multiRegionKey === true,
      policy: logKeyPolicy(sequencerRole.roleArn),
    });
    const image = props.imageAsset
      ? ecs.ContainerImage.fromAsset(path.resolve(props.imageAsset), {
          file: 'infra/Dockerfile',
          exclude: ['node_modules', 'cdk.out', '.git', 'dist', '.stele', '.scratch'],
        })
      : ecs.ContainerImage.fromEcrRepository(
          ecr.Repository.fromRepositoryName(this, 'Repository', imageRepository.valueAsString),
          imageTag.valueAsString,
        );

    const tokens = new secretsmanager.Secret(this, 'AnchorTokensSecret', {
      description: 'Stele anchor-route bearer tokens (STELE_ANCHOR_TOKENS)',
      secretStringValue: SecretValue.cfnParameter(anchorTokens),
    });

    const environment = (role: 'sequencer' | 'api'): Record<string, string> => ({
      STELE_BACKEND: 'aws',
      STELE_ROLE: role,
      STELE_ORIGIN: origin.valueAsString,
      STELE_HOST: '0.0.0.0',
      STELE_PORT: String(PORT),
      STELE_S3_BUCKET: this.bucket.bucketName,
      STELE_S3_PREFIX: PUBLIC_PREFIX,
      STELE_S3_STAGING_PREFIX: STAGING_PREFIX,
      STELE_DYNAMO_TABLE: activeTableName,
      STELE_LOCK: props.lock ?? 'dynamodb',
      STELE_KMS_KEY_ID: this.key.keyArn,
      STELE_BATCH_INTERVAL_MS: batchInterval.valueAsString,
      STELE_MIN_BATCH_SPACING_MS: minBatchSpacing.valueAsString,
      STELE_MODE: 'production',
      STELE_WITNESSES: witnesses.valueAsString,
      ...(witnessThreshold ? { STELE_WITNESS_THRESHOLD: witnessThreshold.valueAsString } : {}),
      ...(policy ? { STELE_WITNESS_POLICY: WITNESS_POLICY_FILE, WITNESS_POLICY_TEXT: policy } : {}),
      STELE_MIRRORS: mirrors.valueAsString,
      STELE_MIRROR_QUORUM: mirrorQuorum.valueAsString,
      ...(role === 'sequencer' ? { STELE_RECONFIGURE: reconfigure.valueAsString } : {}),
      AWS_REGION: Aws.REGION,
    });
    // A task definition carries environment variables, not files: with a policy, the container
    // writes the text to the file it names, then becomes `stele serve`.
    const command = policy
      ? ['sh', '-c', 'printf %s "$WITNESS_POLICY_TEXT" > "$STELE_WITNESS_POLICY" && exec node dist/cli/main.js serve']
      : ['node', 'dist/cli/main.js', 'serve'];
    // The anchor route is served by the sequencer only (the ALB routes it there).
    const secrets = (role: 'sequencer' | 'api'): Record<string, ecs.Secret> =>
      role === 'sequencer' ? { STELE_ANCHOR_TOKENS: ecs.Secret.fromSecretsManager(tokens) } : {};

    // Embedded-metric-format lines of the /metrics collectors (both services).
    const metricsLogGroup = new logs.LogGroup(this, 'PrometheusMetrics', {
      retention: logs.RetentionDays.ONE_YEAR,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const service = (name: 'Sequencer' | 'Api', role: 'sequencer' | 'api', cpu: number, memoryLimitMiB: number) => {
      const logGroup = new logs.LogGroup(this, `${name}Logs`, {
        retention: logs.RetentionDays.ONE_YEAR,
        removalPolicy: RemovalPolicy.DESTROY,
      });
      const task = new ecs.FargateTaskDefinition(this, `${name}Task`, {
        cpu,
        memoryLimitMiB,
        ...(role === 'sequencer' ? { taskRole: sequencerRole } : {}),
      });
      // The root file system is read-only; /tmp (the witness policy file, Node's scratch) and
      // the image's data directory /data (STELE_DATA_DIR: the production anchor policy's
      // directory) are task volumes, which Fargate fills from the image (owner included).
      task.addVolume({ name: 'tmp' });
      task.addVolume({ name: 'data' });
      const container = task.addContainer('stele', {
        image,
        command,
        environment: environment(role),
        secrets: secrets(role),
        logging: ecs.LogDrivers.awsLogs({ logGroup, streamPrefix: role }),
        portMappings: [{ containerPort: PORT }],
        stopTimeout: Duration.seconds(role === 'sequencer' ? 60 : 30), // time to integrate the anchors already accepted
        memoryLimitMiB: memoryLimitMiB - COLLECTOR_MEMORY_MIB,
        readonlyRootFilesystem: true,
        user: 'node', // the image's unprivileged user (uid 1000)
      });
      container.addMountPoints(
        { sourceVolume: 'tmp', containerPath: '/tmp', readOnly: false },
        { sourceVolume: 'data', containerPath: '/data', readOnly: false },
      );
      // The /metrics collector (infra/metrics-collector.ts): not essential, so a collector
      // failure never stops the service.
      task.addContainer('metrics', {
        image: ecs.ContainerImage.fromRegistry(COLLECTOR_IMAGE),
        essential: false,
        memoryLimitMiB: COLLECTOR_MEMORY_MIB,
        readonlyRootFilesystem: true,
        user: '10001',
        environment: {
          AOT_CONFIG_CONTENT: collectorConfig(`stele-${role}`, PORT, metricsLogGroup.logGroupName),
        },
        logging: ecs.LogDrivers.awsLogs({ logGroup, streamPrefix: `${role}-metrics` }),
      });
      metricsLogGroup.grantWrite(task.taskRole);
      acknowledge(
        task,
        'AwsSolutions-ECS2',
        'The environment holds configuration only (bucket, table, key ARN, origin, witness URLs, the collector configuration); the one secret, the anchor tokens, comes from Secrets Manager.',
      );
      return { task, logGroup };
    };

    const seq = service('Sequencer', 'sequencer', 1024, 2048);
    const api = service('Api', 'api', 512, 1024);

    // The single writer: one task, and a deployment stops the old task before starting the
    // new one, so two sequencers never run at once (if they did, the lock — DynamoDB or
    // the bucket's — makes the second one stop rather than fork the log).
    this.sequencerService = new ecs.FargateService(this, 'SequencerService', {
      cluster,
      taskDefinition: seq.task,
      desiredCount: 1,
      minHealthyPercent: 0,
      maxHealthyPercent: 100,
      circuitBreaker: { rollback: true },
    });
    this.apiService = new ecs.FargateService(this, 'ApiService', {
      cluster,
      taskDefinition: api.task,
      desiredCount: apiMin.valueAsNumber,
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      circuitBreaker: { rollback: true },
    });
    const scaling = this.apiService.autoScaleTaskCount({
      minCapacity: apiMin.valueAsNumber,
      maxCapacity: apiMax.valueAsNumber,
    });
    scaling.scaleOnCpuUtilization('Cpu', { targetUtilizationPercent: 60 });
    scaling.scaleOnMemoryUtilization('Memory', { targetUtilizationPercent: 75 });

    // ---- IAM: least privilege ---------------------------------------------------------
    const publicObjects = this.bucket.arnForObjects(`${PUBLIC_PREFIX}*`);
    const stagingObjects = this.bucket.arnForObjects(`${STAGING_PREFIX}*`);
    // ListBucket makes S3 answer 404 (not 403) for an absent key, which the store relies on.
    const listBucket = new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] });
    seq.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'],
        resources: [publicObjects, stagingObjects],
      }),
    );
    seq.task.taskRole.addToPrincipalPolicy(listBucket);
    // The index's clear() (after a schema upgrade, or an index ahead of a rolled-back tree)
    // scans this log's rows and deletes them one by one; lookups read with Query.
    seq.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: [
          'dynamodb:GetItem',
          'dynamodb:PutItem',
          'dynamodb:UpdateItem',
          'dynamodb:DeleteItem',
          'dynamodb:Query',
          'dynamodb:Scan',
        ],
        resources: [activeTableArn],
      }),
    );
    seq.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['kms:Sign', 'kms:GetPublicKey'], resources: [this.key.keyArn] }),
    );

    api.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [publicObjects] }),
    );
    api.task.taskRole.addToPrincipalPolicy(listBucket);
    api.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'],
        resources: [activeTableArn],
      }),
    );
    api.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['kms:GetPublicKey'], resources: [this.key.keyArn] }),
    );

    // ---- load balancer: only CloudFront gets through ----------------------------------
    // Reachable on 443 only, only from CloudFront's origin-facing addresses (its managed
    // prefix list, looked up in the deploy region), and it forwards only requests carrying
    // the origin-verify secret (Secrets Manager, rotated every 30 days; see
    // infra/origin-secret-rotation.ts).
    const prefixList = new cr.AwsCustomResource(this, 'CloudFrontPrefixList', {
      onUpdate: {
        service: 'EC2',
        action: 'describeManagedPrefixLists',
        parameters: { Filters: [{ Name: 'prefix-list-name', Values: [CLOUDFRONT_ORIGIN_FACING] }] },
        physicalResourceId: cr.PhysicalResourceId.of(CLOUDFRONT_ORIGIN_FACING),
        outputPaths: ['PrefixLists.0.PrefixListId'],
      },
      policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: cr.AwsCustomResourcePolicy.ANY_RESOURCE }),
      installLatestAwsSdk: false,
      vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
    });
    const cloudFrontPrefixList = prefixList.getResponseField('PrefixLists.0.PrefixListId');
    const albSecurityGroup = new ec2.SecurityGroup(this, 'AlbSecurityGroup', {
      vpc,
      description: 'Stele ALB: HTTPS from CloudFront origin-facing addresses only',
      allowAllOutbound: false,
    });
    albSecurityGroup.addIngressRule(ec2.Peer.prefixList(cloudFrontPrefixList), ec2.Port.tcp(443), 'CloudFront');
    const alb = new elbv2.ApplicationLoadBalancer(this, 'Alb', {
      vpc,
      internetFacing: true,
      securityGroup: albSecurityGroup,
      deletionProtection: true,
      dropInvalidHeaderFields: true,
    });
    this.albAccessLogs(alb);
    const listener = alb.addListener('Https', {
      port: 443,
      protocol: elbv2.ApplicationProtocol.HTTPS,
      certificates: [elbv2.ListenerCertificate.fromArn(originCertificateArn.valueAsString)],
      sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS,
      open: false,
      defaultAction: elbv2.ListenerAction.fixedResponse(403, { contentType: 'text/plain', messageBody: 'forbidden' }),
    });
    const originSecret = new secretsmanager.Secret(this, 'OriginVerifySecret', {
      description: `Stele: the ${ORIGIN_VERIFY_HEADER} value CloudFront sends and the load balancer requires`,
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
    });
    // Resolved by CloudFormation at deploy time: the value never appears in the template.
    const originSecretValue = originSecret.secretValue.unsafeUnwrap();
    const healthCheck = { path: '/api/ledger/checkpoint', healthyHttpCodes: '200', interval: Duration.seconds(15) };
    const viaCloudFront = elbv2.ListenerCondition.httpHeader(ORIGIN_VERIFY_HEADER, [originSecretValue]);
    const targetGroup = (id: string, service: ecs.FargateService, drain: Duration) =>
      new elbv2.ApplicationTargetGroup(this, id, {
        vpc,
        port: PORT,
        protocol: elbv2.ApplicationProtocol.HTTP,
        targets: [service],
        healthCheck,
        deregistrationDelay: drain,
      });
    // A sequencer deployment drains: the ALB stops sending anchors to the old task and lets
    // those in flight finish (an anchor waits at most a batch interval and a publish), then
    // ECS stops it (SIGTERM: it integrates what it accepted, within stopTimeout) and starts
    // the new one. Anchors sent in between get 503 and are retried by clients; none accepted
    // is lost.
    const sequencerTargets = targetGroup('SequencerTargets', this.sequencerService, Duration.seconds(35));
    const apiTargets = targetGroup('ApiTargets', this.apiService, Duration.seconds(10));
    const sequencerRule = new elbv2.ApplicationListenerRule(this, 'SequencerRule', {
      listener,
      priority: 10,
      conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns([ANCHOR_PATH])],
      targetGroups: [sequencerTargets],
    });
    const apiRule = new elbv2.ApplicationListenerRule(this, 'ApiRule', {
      listener,
      priority: 20,
      conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns(['/api/ledger/*'])],
      targetGroups: [apiTargets],
    });
    alb.connections.allowTo(this.sequencerService, ec2.Port.tcp(PORT));
    alb.connections.allowTo(this.apiService, ec2.Port.tcp(PORT));

    // ---- WAF --------------------------------------------------------------------------
    // A CLOUDFRONT-scope web ACL exists only in us-east-1: this stack creates it when deployed
    // there; elsewhere WebAclArn names one made in us-east-1 (README).
    const webAcl = new wafv2.CfnWebACL(this, 'WebAcl', {
      scope: 'CLOUDFRONT',
      defaultAction: { allow: {} },
      visibilityConfig: { sampledRequestsEnabled: true, cloudWatchMetricsEnabled: true, metricName: 'SteleWebAcl' },
      rules: [
        {
          name: 'AnchorRate',
          priority: 0,
          action: { block: {} },
          statement: {
            rateBasedStatement: {
              limit: anchorRateLimit.valueAsNumber,
              aggregateKeyType: 'IP',
              scopeDownStatement: {
                andStatement: {
                  statements: [
                    {
                      byteMatchStatement: {
                        fieldToMatch: { method: {} },
                        positionalConstraint: 'EXACTLY',
                        searchString: 'POST',
                        textTransformations: [{ priority: 0, type: 'NONE' }],
                      },
                    },
                    {
                      byteMatchStatement: {
                        fieldToMatch: { uriPath: {} },
                        positionalConstraint: 'EXACTLY',
                        searchString: ANCHOR_PATH,
                        textTransformations: [{ priority: 0, type: 'NONE' }],
                      },
                    },
                  ],
                },
              },
            },
          },
          visibilityConfig: { sampledRequestsEnabled: true, cloudWatchMetricsEnabled: true, metricName: 'AnchorRate' },
        },
        {
          name: 'AmazonIpReputation',
          priority: 1,
          overrideAction: { none: {} },
          statement: {
            managedRuleGroupStatement: { vendorName: 'AWS', name: 'AWSManagedRulesAmazonIpReputationList' },
          },
          visibilityConfig: {
            sampledRequestsEnabled: true,
            cloudWatchMetricsEnabled: true,
            metricName: 'AmazonIpReputation',
          },
        },
      ],
    });
    webAcl.cfnOptions.condition = createWebAcl;

    // ---- CloudFront -------------------------------------------------------------------
    // OAC grants the distribution (only it: AWS:SourceArn) GetObject and ListBucket. With
    // ListBucket S3 answers 404, not 403, for a missing tile, so tlog clients fall back from
    // a swept partial to the full tile. The origin path keeps requests inside the public prefix.
    const tilesOrigin = origins.S3BucketOrigin.withOriginAccessControl(this.bucket, {
      originPath: `/${PUBLIC_PREFIX.slice(0, -1)}`,
      originAccessLevels: [cloudfront.AccessLevel.READ, cloudfront.AccessLevel.LIST],
    });
    const apiOrigin = new origins.HttpOrigin(originDomainName.valueAsString, {
      protocolPolicy: cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
      originSslProtocols: [cloudfront.OriginSslPolicy.TLS_V1_2],
      customHeaders: { [ORIGIN_VERIFY_HEADER]: originSecretValue },
      readTimeout: Duration.seconds(60),
    });
    const checkpointCache = new cloudfront.CachePolicy(this, 'CheckpointCache', {
      // 1-2 s at the edge even though the object says no-cache: absorbs polling storms.
      comment: 'Stele checkpoint: at most 2 s at the edge',
      minTtl: Duration.seconds(1),
      defaultTtl: Duration.seconds(1),
      maxTtl: Duration.seconds(2),
      enableAcceptEncodingGzip: true,
      enableAcceptEncodingBrotli: true,
    });
    const tileCache = new cloudfront.CachePolicy(this, 'TileCache', {
      comment: 'Stele tiles and bundles: immutable',
      minTtl: Duration.days(1),
      defaultTtl: Duration.days(365),
      maxTtl: Duration.days(365),
      enableAcceptEncodingGzip: true,
      enableAcceptEncodingBrotli: true,
    });
    const checkpointBehavior: cloudfront.BehaviorOptions = {
      origin: tilesOrigin,
      viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
      cachePolicy: checkpointCache,
      allowedMethods: cloudfront.AllowedMethods.ALLOW_GET_HEAD_OPTIONS,
      responseHeadersPolicy: cloudfront.ResponseHeadersPolicy.CORS_ALLOW_ALL_ORIGINS,
    };
    this.distribution = new cloudfront.Distribution(this, 'Cdn', {
      comment: 'Stele transparency log',
      priceClass: cloudfront.PriceClass.PRICE_CLASS_100,
      httpVersion: cloudfront.HttpVersion.HTTP2_AND_3,
      defaultBehavior: checkpointBehavior,
      // The explorer (dist/explorer) is published beside the tiles; / serves its page.
      defaultRootObject: 'index.html',
      enableLogging: true,
      logBucket: this.logBucket,
      logFilePrefix: 'cloudfront/',
      additionalBehaviors: {
        '/checkpoint': checkpointBehavior,
        '/checkpoint.json': checkpointBehavior,
        '/tile/*': { ...checkpointBehavior, cachePolicy: tileCache, compress: true },
        '/api/ledger/*': {
          origin: apiOrigin,
          viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
          cachePolicy: cloudfront.CachePolicy.CACHING_DISABLED,
          originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
          allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
        },
      },
      // Never remember a miss or an API error at the edge (default: 10 s).
      errorResponses: [403, 404, 500, 502, 503, 504].map((httpStatus) => ({ httpStatus, ttl: Duration.seconds(0) })),
    });
    // The public name, on an ACM certificate, SNI, TLS 1.2 at least; the web ACL.
    const cfn = this.distribution.node.defaultChild as cloudfront.CfnDistribution;
    cfn.addPropertyOverride('DistributionConfig.Aliases', [domainName.valueAsString]);
    cfn.addPropertyOverride('DistributionConfig.ViewerCertificate', {
      AcmCertificateArn: certificateArn.valueAsString,
      SslSupportMethod: 'sni-only',
      MinimumProtocolVersion: 'TLSv1.2_2021',
    });
    cfn.addPropertyOverride(
      'DistributionConfig.WebACLId',
      Fn.conditionIf(
        createWebAcl.logicalId,
        webAcl.attrArn,
        Fn.conditionIf(hasWebAclArn.logicalId, webAclArn.valueAsString, Aws.NO_VALUE),
      ),
    );
    acknowledge(
      this.distribution,
      'AwsSolutions-CFR1',
      'A transparency log is public by design: no geographic restriction.',
    );
    acknowledge(
      this.distribution,
      'AwsSolutions-CFR2',
      'The web ACL is attached through a condition (created in us-east-1, else the WebAclArn parameter), which cdk-nag cannot follow.',
    );

    // The origin-verify secret's rotation: a function that lets the load balancer accept the
    // current and the next value, switches CloudFront to the next, then makes it current.
    const rotation = new lambda.Function(this, 'OriginSecretRotation', {
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline(ROTATION_SCRIPT),
      timeout: Duration.minutes(2),
      vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      description: 'Rotates the Stele origin-verify secret (ALB rules, then CloudFront, then the secret)',
      environment: {
        HEADER_NAME: ORIGIN_VERIFY_HEADER,
        RULE_ARNS: Fn.join(',', [sequencerRule.listenerRuleArn, apiRule.listenerRuleArn]),
        DISTRIBUTION_ID: this.distribution.distributionId,
      },
    });
    rotation.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['elasticloadbalancing:ModifyRule'],
        resources: [sequencerRule.listenerRuleArn, apiRule.listenerRuleArn],
      }),
    );
    rotation.addToRolePolicy(
      new iam.PolicyStatement({
        // DescribeRules supports no resource-level permissions.
        actions: ['elasticloadbalancing:DescribeRules'],
        resources: ['*'],
      }),
    );
    rotation.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['cloudfront:GetDistributionConfig', 'cloudfront:UpdateDistribution'],
        resources: [this.distribution.distributionArn],
      }),
    );
    rotation.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['secretsmanager:GetRandomPassword'], resources: ['*'] }),
    );
    originSecret.addRotationSchedule('Rotation', {
      rotationLambda: rotation,
      automaticallyAfter: Duration.days(30),
      rotateImmediatelyOnUpdate: false,
    });
    // Secrets Manager may invoke the function for this secret only.
    for (const c of rotation.node.findAll())
      if (c instanceof lambda.CfnPermission) c.addPropertyOverride('SourceArn', originSecret.secretArn);
    acknowledge(
      rotation,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      "The function's own log group only (AWS managed basic execution policy).",
    );
    acknowledge(
      rotation,
      'AwsSolutions-IAM5[Resource::*]',
      'elasticloadbalancing:DescribeRules and secretsmanager:GetRandomPassword support no resource-level permissions.',
    );

    // The explorer's static files, next to the tiles (never pruning: the prefix holds the log).
    const explorerDir = props.explorerDir ?? fileURLToPath(new URL('../dist/explorer', import.meta.url));
    if (existsSync(path.join(explorerDir, 'index.html'))) this.deployExplorer(explorerDir);
    // ---- alarms ---------------------------------------------------------------------
    const topic = (this.alarmTopic = new sns.Topic(this, 'Alarms', { displayName: 'Stele alarms', enforceSSL: true }));
    const subscription = new sns.CfnSubscription(this, 'AlarmEmailSubscription', {
      topicArn: topic.topicArn,
      protocol: 'email',
      endpoint: alarmEmail.valueAsString,
    });
    subscription.cfnOptions.condition = hasEmail;
    const action = new cwActions.SnsAction(topic);
    // pino writes JSON lines; level 50 = error, 60 = fatal (e.g. "sequencer stopped").
    const errors = seq.logGroup.addMetricFilter('SequencerErrorFilter', {
      filterPattern: logs.FilterPattern.numberValue('$.level', '>=', 50),
      metricNamespace: 'Stele',
      metricName: 'SequencerErrors',
      metricValue: '1',
      defaultValue: 0,
    });
    new cloudwatch.Alarm(this, 'SequencerErrorAlarm', {
      alarmDescription: 'The sequencer logged an error (failed batch, lost lock, storage or KMS failure)',
      metric: errors.metric({ statistic: 'Sum', period: Duration.minutes(5) }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(action);
    // The sequencer logs a heartbeat every 10 s; stallSeconds grows while anchors wait and
    // no checkpoint is published. No heartbeat at all (sequencer down) also alarms.
    const stall = seq.logGroup.addMetricFilter('StallFilter', {
      filterPattern: logs.FilterPattern.stringValue('$.msg', '=', 'sequencer heartbeat'),
      metricNamespace: 'Stele',
      metricName: 'CheckpointStallSeconds',
      metricValue: '$.stallSeconds',
    });
    // The heartbeat's other fields and the witness rounds, for the dashboard (the services'
    // Prometheus /metrics stay inside the VPC: the ALB routes /api/ledger/* only).
    const heartbeatField = (metricName: string, field: string) =>
      seq.logGroup.addMetricFilter(`${metricName}Filter`, {
        filterPattern: logs.FilterPattern.stringValue('$.msg', '=', 'sequencer heartbeat'),
        metricNamespace: 'Stele',
        metricName,
        metricValue: `$.${field}`,
      });
    const treeSize = heartbeatField('TreeSize', 'size');
    const pending = heartbeatField('PendingAnchors', 'pending');
    const checkpointAge = heartbeatField('CheckpointAgeSeconds', 'checkpointAgeSeconds');
    const witnessMisses = seq.logGroup.addMetricFilter('WitnessPolicyNotMetFilter', {
      filterPattern: logs.FilterPattern.stringValue(
        '$.msg',
        '=',
        'witness policy not met; the checkpoint waits for the next round',
      ),
      metricNamespace: 'Stele',
      metricName: 'WitnessPolicyNotMet',
      metricValue: '1',
      defaultValue: 0,
    });
    new cloudwatch.Alarm(this, 'CheckpointStallAlarm', {
      alarmDescription: 'Anchors are waiting and no checkpoint has been published (or the sequencer is not running)',
      metric: stall.metric({ statistic: 'Maximum', period: Duration.minutes(1) }),
      threshold: stallSeconds.valueAsNumber,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 2,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    }).addAlarmAction(action);
    const api5xx = apiTargets.metrics.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, {
      period: Duration.minutes(5),
      statistic: 'Sum',
    });
    new cloudwatch.Alarm(this, 'Api5xxAlarm', {
      alarmDescription: 'The API answers with server errors',
      metric: api5xx,
      threshold: 10,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(action);

    // ---- one signer: alerts on the log key ---------------------------------------------
    // CloudTrail records every KMS call; EventBridge sees them in this region (an account or
    // organization trail logging management events must exist, README "The log key").
    // Sign is a read-only event: the rule must opt in to those.
    const cloudTrailKms = (eventNames: string[], extra: Record<string, unknown> = {}): events.EventPattern => ({
      source: ['aws.kms'],
      detailType: ['AWS API Call via CloudTrail'],
      detail: {
        eventSource: ['kms.amazonaws.com'],
        eventName: eventNames,
        resources: { ARN: [this.key.keyArn] },
        ...extra,
      },
    });
    const foreignSign = new events.Rule(this, 'ForeignSignRule', {
      description: 'kms:Sign (or an attempt) on the log key by a principal other than the sequencer role',
      eventPattern: cloudTrailKms(['Sign'], {
        $or: [
          { userIdentity: { sessionContext: { sessionIssuer: { arn: [{ 'anything-but': sequencerRole.roleArn }] } } } },
          { userIdentity: { type: [{ 'anything-but': 'AssumedRole' }] } },
        ],
      }),
    });
    (foreignSign.node.defaultChild as events.CfnRule).state = 'ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS';
    const keyLifecycle = new events.Rule(this, 'KeyLifecycleRule', {
      description: 'The log key is scheduled for deletion, disabled, or its policy or grants changed',
      eventPattern: cloudTrailKms(['ScheduleKeyDeletion', 'DisableKey', 'PutKeyPolicy', 'CreateGrant']),
    });
    for (const [id, rule] of [
      ['ForeignSignAlarm', foreignSign],
      ['KeyLifecycleAlarm', keyLifecycle],
    ] as const) {
      rule.addTarget(new eventsTargets.SnsTopic(topic));
      new cloudwatch.Alarm(this, id, {
        alarmDescription: `${rule === foreignSign ? 'Someone other than the sequencer signed (or tried to sign) with the log key' : 'The log key is being deleted, disabled or re-permissioned'}: see CloudTrail`,
        metric: new cloudwatch.Metric({
          namespace: 'AWS/Events',
          metricName: 'TriggeredRules',
          dimensionsMap: { RuleName: rule.ruleName },
          statistic: 'Sum',
          period: Duration.minutes(1),
        }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }).addAlarmAction(action);
    }

    // ---- checkpoint freshness, from outside ------------------------------------------
    const canary = new synthetics.Canary(this, 'CheckpointCanary', {
      runtime: synthetics.Runtime.SYNTHETICS_NODEJS_PUPPETEER_9_1,
      test: synthetics.Test.custom({ code: synthetics.Code.fromInline(CANARY_SCRIPT), handler: 'index.handler' }),
      schedule: synthetics.Schedule.rate(Duration.minutes(5)),
      environmentVariables: {
        CHECKPOINT_URL: `https://${domainName.valueAsString}/checkpoint.json`,
        MAX_AGE_SECONDS: checkpointMaxAge.valueAsString,
      },
      artifactsBucketLocation: { bucket: this.logBucket, prefix: 'canary' },
      provisionedResourceCleanup: true,
    });
    const canaryFailed = new cloudwatch.Alarm(this, 'CheckpointCanaryAlarm', {
      alarmDescription:
        'The checkpoint served through CloudFront is older than CheckpointMaxAgeSeconds, or cannot be fetched',
      metric: canary.metricSuccessPercent({ period: Duration.minutes(5), statistic: 'Average' }),
      threshold: 100,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 2,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });
    canaryFailed.addAlarmAction(action);
    acknowledge(
      canary,
      'AwsSolutions-IAM5[Resource::*]',
      'The Synthetics canary role CDK creates writes its metrics (cloudwatch:PutMetricData takes no resource) and lists buckets for its artifacts.',
    );

    // ---- dashboard --------------------------------------------------------------------
    const cdnMetric = (metricName: string) =>
      new cloudwatch.Metric({
        namespace: 'AWS/CloudFront',
        metricName,
        dimensionsMap: { DistributionId: this.distribution.distributionId, Region: 'Global' },
        region: 'us-east-1',
        statistic: 'Average',
        period: Duration.minutes(1),
      });
    new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: Fn.join('-', [Aws.STACK_NAME, 'stele']),
      widgets: [
        [
          new cloudwatch.GraphWidget({
            title: 'Anchor requests /s (ALB → sequencer)',
            left: [
              sequencerTargets.metrics.requestCount({ statistic: 'Sum', period: Duration.minutes(1) }).with({
                label: 'anchors per minute',
              }),
            ],
          }),
          new cloudwatch.GraphWidget({
            title: 'Anchor latency (batch wait + publish), p50/p99',
            left: [
              sequencerTargets.metrics.targetResponseTime({ statistic: 'p50' }),
              sequencerTargets.metrics.targetResponseTime({ statistic: 'p99' }),
            ],
          }),
          new cloudwatch.GraphWidget({
            title: 'Checkpoint stall (s) and sequencer errors',
            left: [stall.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
            right: [errors.metric({ statistic: 'Sum', period: Duration.minutes(5) })],
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Entries integrated /s (tree size growth) and anchors waiting',
            left: [
              new cloudwatch.MathExpression({
                expression: 'RATE(size)',
                usingMetrics: { size: treeSize.metric({ statistic: 'Maximum', period: Duration.minutes(1) }) },
                label: 'entries/s',
              }),
            ],
            right: [pending.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
          }),
          new cloudwatch.GraphWidget({
            title: 'Checkpoint age (s) at the sequencer',
            left: [checkpointAge.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
          }),
          new cloudwatch.GraphWidget({
            title: 'Witness rounds that missed the policy',
            left: [witnessMisses.metric({ statistic: 'Sum', period: Duration.minutes(5) })],
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: "API replicas' checkpoint age (s): how far behind the published log they answer",
            left: [
              new cloudwatch.Metric({
                namespace: METRICS_NAMESPACE,
                metricName: 'stele_checkpoint_age_seconds',
                dimensionsMap: { job: 'stele-api' },
                statistic: 'Maximum',
                period: Duration.minutes(1),
              }),
            ],
          }),
          new cloudwatch.GraphWidget({
            title: 'Sequencer: tree size and commit failures (/metrics)',
            left: [
              new cloudwatch.Metric({
                namespace: METRICS_NAMESPACE,
                metricName: 'stele_tree_size',
                dimensionsMap: { job: 'stele-sequencer' },
                statistic: 'Maximum',
                period: Duration.minutes(1),
              }),
            ],
            right: [
              new cloudwatch.Metric({
                namespace: METRICS_NAMESPACE,
                metricName: 'stele_commit_failures_total',
                dimensionsMap: { job: 'stele-sequencer' },
                statistic: 'Sum', // the collector sends counters as deltas
                period: Duration.minutes(5),
              }),
            ],
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Canary: checkpoint fresh through CloudFront (%)',
            left: [canary.metricSuccessPercent()],
          }),
          new cloudwatch.GraphWidget({
            title: 'CloudFront 4xx / 5xx error rate (%)',
            left: [cdnMetric('4xxErrorRate'), cdnMetric('5xxErrorRate')],
          }),
          new cloudwatch.GraphWidget({
            title: 'API 5xx, ALB 5xx',
            left: [api5xx, alb.metrics.httpCodeElb(elbv2.HttpCodeElb.ELB_5XX_COUNT)],
          }),
        ],
        [
          new cloudwatch.AlarmStatusWidget({
            title: 'Alarms',
            alarms: [canaryFailed],
          }),
        ],
      ],
    });

    // ---- outputs --------------------------------------------------------------------
    new CfnOutput(this, 'LogUrl', {
      value: `https://${domainName.valueAsString}`,
      description: 'Tiles, checkpoint and /api/ledger',
    });
    new CfnOutput(this, 'LogDomainTarget', {
      value: this.distribution.distributionDomainName,
      description: 'Point DomainName here (CNAME or alias)',
    });
    new CfnOutput(this, 'OriginAliasTarget', {
      value: alb.loadBalancerDnsName,
      description: 'Point OriginDomainName here (CNAME or alias)',
    });
    new CfnOutput(this, 'BucketName', { value: this.bucket.bucketName });
    new CfnOutput(this, 'LogBucketName', { value: this.logBucket.bucketName });
    new CfnOutput(this, 'TableName', { value: activeTableName, description: 'The table the services use' });
    new CfnOutput(this, 'StackTableName', { value: this.table.tableName, description: "The stack's own table" });
    new CfnOutput(this, 'KeyArn', { value: this.key.keyArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: topic.topicArn });

    // ---- cdk-nag findings accepted, each with its reason --------------------------------
    acknowledge(
      this.distribution,
      'AwsSolutions-CFR4',
      'ViewerCertificate is set by a property override that cdk-nag does not read: the DomainName certificate, sni-only, TLSv1.2_2021 (test/infra/stack.test.ts asserts it).',
    );
    acknowledge(
      plan,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup]',
      "AWS Backup's documented service role policy for taking backups.",
    );
    const objectKeysReason =
      'Tiles, bundles and staged batches have computed keys under a prefix; the prefix is the narrowest grant, and the bucket policy refuses overwrites and deletes of tiles (infra/immutability.ts).';
    for (const role of [sequencerRole, api.task.taskRole]) {
      acknowledge(role, `AwsSolutions-IAM5[Resource::<${this.resolveId(this.bucket)}.Arn>/log/*]`, objectKeysReason);
      acknowledge(
        role,
        `AwsSolutions-IAM5[Resource::<${this.resolveId(this.bucket)}.Arn>/private/*]`,
        objectKeysReason,
      );
    }
    acknowledge(
      tokens,
      'AwsSolutions-SMG4',
      'The anchor tokens are issued to clients and given as the AnchorTokens parameter; rotating them means reissuing them, by a deployment with new tokens.',
    );
    for (const t of [seq.task, api.task])
      acknowledge(
        t,
        'AwsSolutions-IAM5[Resource::*]',
        'The execution role CDK creates: ecr:GetAuthorizationToken supports no resource-level permissions.',
      );
    acknowledge(
      prefixList,
      'AwsSolutions-IAM5[Resource::*]',
      'ec2:DescribeManagedPrefixLists supports no resource-level permissions.',
    );
    const vpcAccess =
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]';
    const basic =
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]';
    const managedReason =
      "AWS managed Lambda execution policies: the function's own log group and its VPC network interfaces.";
    acknowledge(rotation, vpcAccess, managedReason);
    const awsCall = this.node.tryFindChild(
      cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '').replace(/^/, 'AWS'),
    );
    if (awsCall) for (const id of [basic, vpcAccess]) acknowledge(awsCall, id, managedReason);
    acknowledge(
      canary,
      `AwsSolutions-IAM5[Resource::<${this.resolveId(this.logBucket)}.Arn>/canary/*]`,
      "The canary's artifacts, under its own prefix of the log bucket.",
    );
    acknowledge(
      canary,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/lambda/cwsyn-*]',
      "The canary's own log groups (Synthetics names them cwsyn-<name>-<id>).",
    );
  }

  /** A resource's logical id, as cdk-nag writes it in a finding's id. */
  private resolveId(c: IConstruct): string {
    return this.getLogicalId(c.node.defaultChild as CfnElement);
  }

  /**
   * The load balancer's access logs, in a bucket of their own: ELB writes them as its regional
   * account in regions older than August 2022 and as a service principal in newer ones, and an
   * environment-agnostic template learns its region only at deploy time, so the bucket policy
   * chooses with a condition (CDK's logAccessLogs needs the region at synth).
   */
  private albAccessLogs(alb: elbv2.ApplicationLoadBalancer): void {
    const bucket = new s3.Bucket(this, 'AlbLogs', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      versioned: true,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy: RemovalPolicy.RETAIN,
      serverAccessLogsBucket: this.logBucket,
      serverAccessLogsPrefix: 's3-alb-logs/',
      lifecycleRules: [
        { id: 'expire', expiration: Duration.days(365), noncurrentVersionExpiration: Duration.days(30) },
      ],
    });
    const legacy = RegionInfo.regions.filter((r) => r.elbv2Account !== undefined);
    new CfnMapping(this, 'ElbAccounts', {
      mapping: Object.fromEntries(legacy.map((r) => [r.name, { account: r.elbv2Account! }])),
    });
    const equals = legacy.map((r) => Fn.conditionEquals(Aws.REGION, r.name));
    const groups: ICfnConditionExpression[] = [];
    for (let i = 0; i < equals.length; i += 10) {
      const g = equals.slice(i, i + 10);
      groups.push(g.length === 1 ? g[0]! : Fn.conditionOr(...g));
    }
    const isLegacy = new CfnCondition(this, 'ElbLegacyRegion', {
      expression: groups.length === 1 ? groups[0]! : Fn.conditionOr(...groups),
    });
    const writer = Fn.conditionIf(
      isLegacy.logicalId,
      { AWS: Fn.findInMap('ElbAccounts', Aws.REGION, 'account') },
      { Service: 'logdelivery.elasticloadbalancing.amazonaws.com' },
    );
    const policy = bucket.policy ?? new s3.BucketPolicy(this, 'AlbLogsPolicy', { bucket });
    (policy.node.defaultChild as s3.CfnBucketPolicy).addPropertyOverride('PolicyDocument.Statement.1', {
      Sid: 'ElbWritesAccessLogs',
      Effect: 'Allow',
      Principal: writer,
      Action: 's3:PutObject',
      Resource: bucket.arnForObjects(`alb/AWSLogs/${Aws.ACCOUNT_ID}/*`),
    });
    alb.setAttribute('access_logs.s3.enabled', 'true');
    alb.setAttribute('access_logs.s3.bucket', bucket.bucketName);
    alb.setAttribute('access_logs.s3.prefix', 'alb');
    alb.node.addDependency(policy);
  }

  /**
   * The explorer's files under the public prefix, written by a deployment function whose role
   * may write exactly those keys (each top-level file, each top-level folder's contents) and
   * nothing else: not a tile, not the checkpoint, no delete anywhere.
   */
  private deployExplorer(explorerDir: string): void {
    const reserved = new Set(['checkpoint', 'checkpoint.json', 'tile']);
    const keys = readdirSync(explorerDir).map((name) => {
      if (reserved.has(name)) throw new Error(`explorer: ${name} would stand where the log's own objects are`);
      return statSync(path.join(explorerDir, name)).isDirectory()
        ? `${PUBLIC_PREFIX}${name}/*`
        : `${PUBLIC_PREFIX}${name}`;
    });
    const role = new iam.Role(this, 'ExplorerDeployRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: "Stele explorer deployment: writes the explorer's files, nothing else",
      managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaBasicExecutionRole')],
    });
    const files = new s3assets.Asset(this, 'ExplorerFiles', { path: explorerDir });
    files.grantRead(role);
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:GetObject', 's3:PutObject'],
        resources: keys.map((k) => this.bucket.arnForObjects(k)),
      }),
    );
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [this.bucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [PUBLIC_PREFIX, `${PUBLIC_PREFIX}*`] } },
      }),
    );
    // The construct's own grants (read-write-delete on the whole bucket) go nowhere: the role
    // it is given takes no policy updates.
    const vpc = this.node.findChild('Vpc') as ec2.Vpc;
    new s3deploy.BucketDeployment(this, 'Explorer', {
      vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      sources: [s3deploy.Source.bucket(files.bucket, files.s3ObjectKey)],
      destinationBucket: this.bucket,
      destinationKeyPrefix: PUBLIC_PREFIX,
      prune: false,
      cacheControl: [s3deploy.CacheControl.fromString('no-cache')],
      role: role.withoutPolicyUpdates(),
    });
    acknowledge(
      role,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      "The deployment function's own log group only (AWS managed basic execution policy).",
    );
    const assetReason = "Reading the explorer's zip from the CDK assets bucket (the asset's own grant).";
    for (const id of [
      'AwsSolutions-IAM5[Action::s3:GetObject*]',
      'AwsSolutions-IAM5[Action::s3:GetBucket*]',
      'AwsSolutions-IAM5[Action::s3:List*]',
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]',
    ])
      acknowledge(role, id, assetReason);
    for (const k of keys.filter((k) => k.endsWith('/*')))
      acknowledge(
        role,
        `AwsSolutions-IAM5[Resource::<${this.resolveId(this.bucket)}.Arn>/${k}]`,
        "One of the explorer's own folders (hashed asset names), never a tile or the checkpoint.",
      );
    for (const c of this.node.children)
      if (c.node.id.startsWith('Custom::CDKBucketDeployment'))
        acknowledge(
          c,
          'AwsSolutions-L1',
          "CDK's BucketDeployment function; its runtime follows the aws-cdk-lib version.",
        );
  }
}

/** The policy text, refused here if it is not a C2SP tlog-policy; ends in a newline, as a file does. */
/** A setting the app cannot use: infra/app.ts prints it as one line and exits 2, no stack trace. */
export class AppSettingError extends Error {
  override name = 'AppSettingError';
}

function checkedPolicy(text: string): string {
  try {
    parsePolicy(text);
  } catch (e) {
    if (e instanceof PolicyError) throw new AppSettingError(`context stele:witnessPolicy: ${e.message}`);
    throw e;
  }
  return text.endsWith('\n') ? text : `${text}\n`;
}

/**
 * Key administration the account's IAM policies may grant: everything but using the key
 * (no kms:Sign, no kms:CreateGrant, which could hand Sign to anyone). kms:Get* includes
 * GetPublicKey, which the API role needs.
 */
export const KEY_ADMIN_ACTIONS = [
  'kms:Describe*',
  'kms:List*',
  'kms:Get*',
  'kms:EnableKey',
  'kms:DisableKey',
  'kms:PutKeyPolicy',
  'kms:Update*',
  'kms:RevokeGrant',
  'kms:RetireGrant',
  'kms:TagResource',
  'kms:UntagResource',
  'kms:ScheduleKeyDeletion',
  'kms:CancelKeyDeletion',
  'kms:CreateAlias',
  'kms:DeleteAlias',
  'kms:ReplicateKey',
];

/**
 * The log key's policy: the account administers it (through IAM) without being able to sign;
 * the sequencer's role is the only principal that may kms:Sign, and an explicit Deny refuses
 * Sign to every other principal whatever a later grant or policy says (short of rewriting
 * this policy, which the KeyLifecycleRule reports).
 */
export function logKeyPolicy(signerRoleArn: string): iam.PolicyDocument {
  return new iam.PolicyDocument({
    statements: [
      new iam.PolicyStatement({
        sid: 'KeyAdministrationWithoutSigning',
        principals: [new iam.AccountRootPrincipal()],
        actions: KEY_ADMIN_ACTIONS,
        resources: ['*'],
      }),
      new iam.PolicyStatement({
        sid: 'OnlyTheSequencerSigns',
        principals: [new iam.ArnPrincipal(signerRoleArn)],
        actions: ['kms:Sign', 'kms:GetPublicKey'],
        resources: ['*'],
      }),
      new iam.PolicyStatement({
        sid: 'NoOtherSigner',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['kms:Sign'],
        resources: ['*'],
        conditions: { ArnNotEquals: { 'aws:PrincipalArn': signerRoleArn } },
      }),
      new iam.PolicyStatement({
        sid: 'GrantsOnlyForAwsServices',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['kms:CreateGrant'],
        resources: ['*'],
        conditions: {
          BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' },
        },
      }),
    ],
  });
}
