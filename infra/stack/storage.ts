// The stack's storage: the access-log bucket, the tiles bucket (its policy makes tiles
// create-only and undeletable, infra/immutability.ts), the DynamoDB table (lock, lookup
// index, sweeper mark) and its backups.
import { Duration, Fn, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as backup from 'aws-cdk-lib/aws-backup';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { HOT_KEY_VERSIONS, hotKeys, immutabilityStatements } from '../immutability.js';
import { PUBLIC_PREFIX, STAGING_PREFIX } from './constants.js';
import { acknowledge } from './nag-acknowledgements.js';
import type { StackConditions, StackParameters } from './parameters.js';

/**
 * Access logs of CloudFront, the tiles bucket, the load balancer and the VPC. CloudFront's
 * standard logs are written with an ACL, so this bucket keeps ACLs (bucket owner preferred).
 */
export function accessLogBucket(stack: Stack): s3.Bucket {
  const logBucket = new s3.Bucket(stack, 'AccessLogs', {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    versioned: true,
    enforceSSL: true,
    encryption: s3.BucketEncryption.S3_MANAGED, // ALB access logs accept SSE-S3 only
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
    removalPolicy: RemovalPolicy.RETAIN,
    lifecycleRules: [{ id: 'expire', expiration: Duration.days(365), noncurrentVersionExpiration: Duration.days(30) }],
  });
  acknowledge(logBucket, 'AwsSolutions-S1', 'The access-log bucket does not log its own accesses (a loop).');
  return logBucket;
}

/** The log's bucket: tiles, bundles and checkpoints under PUBLIC_PREFIX, staged batches under STAGING_PREFIX. */
export function tilesBucket(stack: Stack, logBucket: s3.IBucket): s3.Bucket {
  const bucket = new s3.Bucket(stack, 'Tiles', {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    versioned: true,
    encryption: s3.BucketEncryption.S3_MANAGED, // ETags stay content MD5s; CloudFront needs no key grant
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    removalPolicy: RemovalPolicy.RETAIN,
    serverAccessLogsBucket: logBucket,
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
    (pattern) => bucket.arnForObjects(pattern),
    PUBLIC_PREFIX,
    STAGING_PREFIX,
  ))
    bucket.addToResourcePolicy(statement);
  return bucket;
}

/** The table the services use: the stack's own, or a restored one named by ExistingTableName. */
export interface ActiveTable {
  readonly name: string;
  readonly arn: string;
}

/** The stack's own table, and the one the services use (see ActiveTable). */
export function logTable(
  stack: Stack,
  p: StackParameters,
  c: StackConditions,
): { table: dynamodb.Table; active: ActiveTable } {
  const table = new dynamodb.Table(stack, 'Table', {
    partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
    sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    deletionProtection: true,
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const name = Fn.conditionIf(c.hasTableName.logicalId, p.ExistingTableName.valueAsString, table.tableName).toString();
  const arn = stack.formatArn({ service: 'dynamodb', resource: 'table', resourceName: name });
  return { table, active: { name, arn } };
}

/**
 * Monthly backups kept a year of the table in use (AWS Backup). The last 35 days are
 * point-in-time recovery's; a DynamoDB backup is a full copy, billed per GB-month, so
 * daily ones would duplicate PITR at 35 times the storage.
 */
export function tableBackup(stack: Stack, active: ActiveTable): backup.BackupPlan {
  const plan = new backup.BackupPlan(stack, 'TableBackup', {
    backupPlanRules: [backup.BackupPlanRule.monthly1Year()],
  });
  plan.addSelection('Table', {
    resources: [backup.BackupResource.fromArn(active.arn)],
  });
  return plan;
}
