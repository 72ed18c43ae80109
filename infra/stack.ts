// The Stele production stack (aws-cdk-lib v2), environment-agnostic and lookup-free so
// `npx cdk synth` works offline:
//   S3 bucket (private, versioned, TLS only) ── CloudFront (OAC, origin path /log)
//       /checkpoint, /checkpoint.json   cached ≤ 2 s at the edge
//       /tile/*                         cached a year (immutable objects)
//       /api/ledger/*                   → ALB, no caching, all methods
//   ALB (accepts only requests carrying CloudFront's origin-verify header)
//       /api/ledger/anchor → the sequencer service (one Fargate task, never two at once)
//       /api/ledger/*      → the API service (Fargate, autoscaled)
//   KMS key ECC_NIST_EDWARDS25519 (SIGN_VERIFY) — the log key; DynamoDB table (on demand,
//   PITR) — lock, lookup index, sweeper mark; alarms on sequencer errors, stalled
//   checkpoints and API 5xx, sent to an SNS topic.
// Least privilege: the API role reads the public prefix and the table and may fetch the
// public key; only the sequencer role may write objects, write the table or kms:Sign.
import * as path from 'node:path';
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
} from 'aws-cdk-lib';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3deploy from 'aws-cdk-lib/aws-s3-deployment';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { PolicyError, parsePolicy } from '../src/core/tlog-policy.js';

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
}

/** Where the services write the witness policy at start (a path of the container's own, writable by its user). */
export const WITNESS_POLICY_FILE = '/tmp/witnesses.policy';

/** Object prefixes in the bucket; must match the services' STELE_S3_PREFIX / STELE_S3_STAGING_PREFIX. */
export const PUBLIC_PREFIX = 'log/';
export const STAGING_PREFIX = 'private/';
const PORT = 8080;
const ORIGIN_VERIFY_HEADER = 'X-Stele-Origin-Verify';

export class SteleStack extends Stack {
  readonly bucket: s3.Bucket;
  readonly table: dynamodb.Table;
  readonly key: kms.Key;
  readonly distribution: cloudfront.Distribution;
  readonly sequencerService: ecs.FargateService;
  readonly apiService: ecs.FargateService;

  constructor(scope: Construct, id: string, props: SteleStackProps = {}) {
    super(scope, id, props);

    // ---- parameters -----------------------------------------------------------------
    const origin = new CfnParameter(this, 'Origin', {
      type: 'String',
      description: "The log's origin: the checkpoint's first line and the key name, e.g. ledger.example.com/log",
      allowedPattern: '^[^\\s+]+$',
      constraintDescription: 'no spaces or plus signs',
    });
    const domainName = new CfnParameter(this, 'DomainName', {
      type: 'String',
      default: '',
      description: 'Optional custom domain for CloudFront (leave empty for the *.cloudfront.net name)',
    });
    const certificateArn = new CfnParameter(this, 'CertificateArn', {
      type: 'String',
      default: '',
      description: 'ACM certificate in us-east-1 for DomainName (required when DomainName is set)',
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
    const hasDomain = new CfnCondition(this, 'HasDomain', {
      expression: Fn.conditionNot(Fn.conditionEquals(domainName.valueAsString, '')),
    });

    // ---- storage, key, table --------------------------------------------------------
    this.bucket = new s3.Bucket(this, 'Tiles', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      encryption: s3.BucketEncryption.S3_MANAGED, // ETags stay content MD5s; CloudFront needs no key grant
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        // Full tiles are never overwritten or deleted, so the only noncurrent versions under
        // tile/ are swept partials, and under private/ applied staged batches: gone after a day.
        { id: 'swept-partials', prefix: `${PUBLIC_PREFIX}tile/`, noncurrentVersionExpiration: Duration.days(1) },
        { id: 'applied-staging', prefix: STAGING_PREFIX, noncurrentVersionExpiration: Duration.days(1) },
        // Replaced checkpoints stay recoverable for 30 days.
        {
          id: 'noncurrent',
          noncurrentVersionExpiration: Duration.days(30),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
        { id: 'delete-markers', expiredObjectDeleteMarker: true },
      ],
    });

    this.key = new kms.Key(this, 'LogKey', {
      keySpec: kms.KeySpec.ECC_NIST_EDWARDS25519,
      keyUsage: kms.KeyUsage.SIGN_VERIFY,
      description: 'Stele log signing key (Ed25519; checkpoints are signed with ED25519_SHA_512, RAW)',
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // ---- network and compute --------------------------------------------------------
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 1,
      gatewayEndpoints: {
        S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
        DynamoDB: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
      },
    });
    const cluster = new ecs.Cluster(this, 'Cluster', { vpc });
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
      STELE_DYNAMO_TABLE: this.table.tableName,
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

    const service = (name: 'Sequencer' | 'Api', role: 'sequencer' | 'api', cpu: number, memoryLimitMiB: number) => {
      const logGroup = new logs.LogGroup(this, `${name}Logs`, {
        retention: logs.RetentionDays.ONE_MONTH,
        removalPolicy: RemovalPolicy.DESTROY,
      });
      const task = new ecs.FargateTaskDefinition(this, `${name}Task`, {
        cpu,
        memoryLimitMiB,
      });
      task.addContainer('stele', {
        image,
        command,
        environment: environment(role),
        secrets: secrets(role),
        logging: ecs.LogDrivers.awsLogs({ logGroup, streamPrefix: role }),
        portMappings: [{ containerPort: PORT }],
        stopTimeout: Duration.seconds(30), // time to integrate the anchors already accepted
      });
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
    seq.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [this.table.tableArn],
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
        resources: [this.table.tableArn],
      }),
    );
    api.task.taskRole.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['kms:GetPublicKey'], resources: [this.key.keyArn] }),
    );

    // ---- load balancer: only CloudFront gets through ----------------------------------
    // The origin-verify value is the stack's UUID: not guessable from outside the account.
    const originSecret = Fn.select(2, Fn.split('/', Aws.STACK_ID));
    const alb = new elbv2.ApplicationLoadBalancer(this, 'Alb', { vpc, internetFacing: true });
    const listener = alb.addListener('Http', {
      port: 80,
      open: true,
      defaultAction: elbv2.ListenerAction.fixedResponse(403, { contentType: 'text/plain', messageBody: 'forbidden' }),
    });
    const healthCheck = { path: '/api/ledger/checkpoint', healthyHttpCodes: '200', interval: Duration.seconds(15) };
    const viaCloudFront = elbv2.ListenerCondition.httpHeader(ORIGIN_VERIFY_HEADER, [originSecret]);
    listener.addTargets('Sequencer', {
      priority: 10,
      conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns(['/api/ledger/anchor'])],
      port: PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [this.sequencerService],
      healthCheck,
      deregistrationDelay: Duration.seconds(10),
    });
    const apiTargets = listener.addTargets('Api', {
      priority: 20,
      conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns(['/api/ledger/*'])],
      port: PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [this.apiService],
      healthCheck,
      deregistrationDelay: Duration.seconds(10),
    });

    // ---- CloudFront -------------------------------------------------------------------
    // OAC grants the distribution (only it: AWS:SourceArn) GetObject and ListBucket. With
    // ListBucket S3 answers 404, not 403, for a missing tile, so tlog clients fall back from
    // a swept partial to the full tile. The origin path keeps requests inside the public prefix.
    const tilesOrigin = origins.S3BucketOrigin.withOriginAccessControl(this.bucket, {
      originPath: `/${PUBLIC_PREFIX.slice(0, -1)}`,
      originAccessLevels: [cloudfront.AccessLevel.READ, cloudfront.AccessLevel.LIST],
    });
    const apiOrigin = new origins.LoadBalancerV2Origin(alb, {
      protocolPolicy: cloudfront.OriginProtocolPolicy.HTTP_ONLY,
      customHeaders: { [ORIGIN_VERIFY_HEADER]: originSecret },
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
    // The explorer's static files, next to the tiles (never pruning: the prefix holds the log).
    const explorerDir = props.explorerDir ?? fileURLToPath(new URL('../dist/explorer', import.meta.url));
    if (existsSync(path.join(explorerDir, 'index.html'))) {
      new s3deploy.BucketDeployment(this, 'Explorer', {
        sources: [s3deploy.Source.asset(explorerDir)],
        destinationBucket: this.bucket,
        destinationKeyPrefix: PUBLIC_PREFIX,
        prune: false,
        cacheControl: [s3deploy.CacheControl.fromString('no-cache')],
      });
    }
    // Optional custom domain, chosen at deploy time.
    const cfn = this.distribution.node.defaultChild as cloudfront.CfnDistribution;
    cfn.addPropertyOverride(
      'DistributionConfig.Aliases',
      Fn.conditionIf(hasDomain.logicalId, [domainName.valueAsString], Aws.NO_VALUE),
    );
    const ifDomain = (yes: unknown, no: unknown) => Fn.conditionIf(hasDomain.logicalId, yes, no);
    cfn.addPropertyOverride('DistributionConfig.ViewerCertificate', {
      AcmCertificateArn: ifDomain(certificateArn.valueAsString, Aws.NO_VALUE),
      SslSupportMethod: ifDomain('sni-only', Aws.NO_VALUE),
      MinimumProtocolVersion: ifDomain('TLSv1.2_2021', Aws.NO_VALUE),
      CloudFrontDefaultCertificate: ifDomain(Aws.NO_VALUE, true),
    });

    // ---- alarms ---------------------------------------------------------------------
    const topic = new sns.Topic(this, 'Alarms', { displayName: 'Stele alarms' });
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
    new cloudwatch.Alarm(this, 'CheckpointStallAlarm', {
      alarmDescription: 'Anchors are waiting and no checkpoint has been published (or the sequencer is not running)',
      metric: stall.metric({ statistic: 'Maximum', period: Duration.minutes(1) }),
      threshold: stallSeconds.valueAsNumber,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 2,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    }).addAlarmAction(action);
    new cloudwatch.Alarm(this, 'Api5xxAlarm', {
      alarmDescription: 'The API answers with server errors',
      metric: apiTargets.metrics.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, {
        period: Duration.minutes(5),
        statistic: 'Sum',
      }),
      threshold: 10,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(action);

    // ---- outputs --------------------------------------------------------------------
    new CfnOutput(this, 'LogUrl', {
      value: `https://${this.distribution.distributionDomainName}`,
      description: 'Tiles, checkpoint and /api/ledger',
    });
    new CfnOutput(this, 'BucketName', { value: this.bucket.bucketName });
    new CfnOutput(this, 'TableName', { value: this.table.tableName });
    new CfnOutput(this, 'KeyArn', { value: this.key.keyArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: topic.topicArn });
  }
}

/** The policy text, refused here if it is not a C2SP tlog-policy; ends in a newline, as a file does. */
function checkedPolicy(text: string): string {
  try {
    parsePolicy(text);
  } catch (e) {
    if (e instanceof PolicyError) throw new Error(`witness policy: ${e.message}`);
    throw e;
  }
  return text.endsWith('\n') ? text : `${text}\n`;
}
