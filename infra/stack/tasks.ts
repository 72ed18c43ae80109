// The two task definitions (sequencer and API): the image, its command, environment and
// secret, the read-only root file system, and the /metrics collector beside it.
import * as path from 'node:path';
import { Aws, Duration, RemovalPolicy, SecretValue, type Stack } from 'aws-cdk-lib';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { COLLECTOR_IMAGE, COLLECTOR_MEMORY_MIB, collectorConfig } from '../metrics-collector.js';
import { PORT, PUBLIC_PREFIX, STAGING_PREFIX, WITNESS_POLICY_FILE } from './constants.js';
import { acknowledge } from './nag-acknowledgements.js';
import type { StackParameters } from './parameters.js';
import type { ActiveTable } from './storage.js';

export type ServiceRole = 'sequencer' | 'api';

/** What both services are told about the log they serve. */
export interface ServiceSettings {
  readonly params: StackParameters;
  readonly bucket: s3.IBucket;
  readonly table: ActiveTable;
  readonly key: kms.IKey;
  readonly lock: 'dynamodb' | 'bucket';
  /** The checked witness policy text, if the app was given one. */
  readonly policy: string | undefined;
}

/** A task definition and the log group its containers write to. */
export interface ServiceTask {
  readonly task: ecs.FargateTaskDefinition;
  readonly logGroup: logs.LogGroup;
}

/** The image built from `imageAsset`'s Dockerfile, or else the ImageRepository/ImageTag parameters' (ECR). */
export function containerImage(stack: Stack, p: StackParameters, imageAsset: string | undefined): ecs.ContainerImage {
  return imageAsset
    ? ecs.ContainerImage.fromAsset(path.resolve(imageAsset), {
        file: 'infra/Dockerfile',
        exclude: ['node_modules', 'cdk.out', '.git', 'dist', '.stele', '.scratch'],
      })
    : ecs.ContainerImage.fromEcrRepository(
        ecr.Repository.fromRepositoryName(stack, 'Repository', p.ImageRepository.valueAsString),
        p.ImageTag.valueAsString,
      );
}

export function anchorTokensSecret(stack: Stack, p: StackParameters): secretsmanager.Secret {
  return new secretsmanager.Secret(stack, 'AnchorTokensSecret', {
    description: 'Stele anchor-route bearer tokens (STELE_ANCHOR_TOKENS)',
    secretStringValue: SecretValue.cfnParameter(p.AnchorTokens),
  });
}

function environment(role: ServiceRole, s: ServiceSettings): Record<string, string> {
  const p = s.params;
  return {
    STELE_BACKEND: 'aws',
    STELE_ROLE: role,
    STELE_ORIGIN: p.Origin.valueAsString,
    STELE_HOST: '0.0.0.0',
    STELE_PORT: String(PORT),
    STELE_S3_BUCKET: s.bucket.bucketName,
    STELE_S3_PREFIX: PUBLIC_PREFIX,
    STELE_S3_STAGING_PREFIX: STAGING_PREFIX,
    STELE_DYNAMO_TABLE: s.table.name,
    STELE_LOCK: s.lock,
    STELE_KMS_KEY_ID: s.key.keyArn,
    STELE_BATCH_INTERVAL_MS: p.BatchIntervalMs.valueAsString,
    STELE_MIN_BATCH_SPACING_MS: p.MinBatchSpacingMs.valueAsString,
    STELE_MODE: 'production',
    STELE_WITNESSES: p.Witnesses.valueAsString,
    ...(p.WitnessThreshold ? { STELE_WITNESS_THRESHOLD: p.WitnessThreshold.valueAsString } : {}),
    ...(s.policy ? { STELE_WITNESS_POLICY: WITNESS_POLICY_FILE, WITNESS_POLICY_TEXT: s.policy } : {}),
    STELE_MIRRORS: p.Mirrors.valueAsString,
    STELE_MIRROR_QUORUM: p.MirrorQuorum.valueAsString,
    ...(role === 'sequencer' ? { STELE_RECONFIGURE: p.ReconfigureLogSettings.valueAsString } : {}),
    AWS_REGION: Aws.REGION,
  };
}

/**
 * A task definition carries environment variables, not files: with a policy, the container
 * writes the text to the file it names, then becomes `stele serve`.
 */
function command(policy: string | undefined): string[] {
  return policy
    ? ['sh', '-c', 'printf %s "$WITNESS_POLICY_TEXT" > "$STELE_WITNESS_POLICY" && exec node dist/cli/main.js serve']
    : ['node', 'dist/cli/main.js', 'serve'];
}

/** What the two task definitions share. */
export interface TaskSettings {
  readonly log: ServiceSettings;
  readonly image: ecs.ContainerImage;
  readonly tokens: secretsmanager.ISecret;
  readonly sequencerRole: iam.IRole;
  /** Embedded-metric-format lines of the /metrics collectors (both services). */
  readonly metricsLogGroup: logs.ILogGroup;
}

export function metricsLogGroup(stack: Stack): logs.LogGroup {
  return new logs.LogGroup(stack, 'PrometheusMetrics', {
    retention: logs.RetentionDays.ONE_YEAR,
    removalPolicy: RemovalPolicy.DESTROY,
  });
}

/** One service's task definition (`name` prefixes its logical ids), with its own log group. */
export function serviceTask(
  stack: Stack,
  name: 'Sequencer' | 'Api',
  role: ServiceRole,
  size: { cpu: number; memoryLimitMiB: number },
  t: TaskSettings,
): ServiceTask {
  const { cpu, memoryLimitMiB } = size;
  const logGroup = new logs.LogGroup(stack, `${name}Logs`, {
    retention: logs.RetentionDays.ONE_YEAR,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const task = new ecs.FargateTaskDefinition(stack, `${name}Task`, {
    cpu,
    memoryLimitMiB,
    ...(role === 'sequencer' ? { taskRole: t.sequencerRole } : {}),
  });
  // The root file system is read-only; /tmp (the witness policy file, Node's scratch) and
  // the image's data directory /data (STELE_DATA_DIR: the production anchor policy's
  // directory) are task volumes, which Fargate fills from the image (owner included).
  task.addVolume({ name: 'tmp' });
  task.addVolume({ name: 'data' });
  const container = task.addContainer('stele', {
    image: t.image,
    command: command(t.log.policy),
    environment: environment(role, t.log),
    // The anchor route is served by the sequencer only (the ALB routes it there).
    secrets: role === 'sequencer' ? { STELE_ANCHOR_TOKENS: ecs.Secret.fromSecretsManager(t.tokens) } : {},
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
      AOT_CONFIG_CONTENT: collectorConfig(`stele-${role}`, PORT, t.metricsLogGroup.logGroupName),
    },
    logging: ecs.LogDrivers.awsLogs({ logGroup, streamPrefix: `${role}-metrics` }),
  });
  t.metricsLogGroup.grantWrite(task.taskRole);
  acknowledge(
    task,
    'AwsSolutions-ECS2',
    'The environment holds configuration only (bucket, table, key ARN, origin, witness URLs, the collector configuration); the one secret, the anchor tokens, comes from Secrets Manager.',
  );
  return { task, logGroup };
}
