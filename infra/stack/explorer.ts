// The explorer's static files, next to the tiles (never pruning: the prefix holds the log),
// written by a function that may write nothing else.
import { readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';
import type { Stack } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import * as s3deploy from 'aws-cdk-lib/aws-s3-deployment';
import { PUBLIC_PREFIX } from './constants.js';
import { acknowledge, logicalIdOf } from './nag-acknowledgements.js';
import { PRIVATE_SUBNETS } from './network.js';

/**
 * The explorer's files under the public prefix, written by a deployment function whose role
 * may write exactly those keys (each top-level file, each top-level folder's contents) and
 * nothing else: not a tile, not the checkpoint, no delete anywhere.
 */
export function deployExplorer(stack: Stack, explorerDir: string, bucket: s3.Bucket, vpc: ec2.IVpc): void {
  const reserved = new Set(['checkpoint', 'checkpoint.json', 'tile']);
  const keys = readdirSync(explorerDir).map((name) => {
    if (reserved.has(name)) throw new Error(`explorer: ${name} would stand where the log's own objects are`);
    return statSync(path.join(explorerDir, name)).isDirectory()
      ? `${PUBLIC_PREFIX}${name}/*`
      : `${PUBLIC_PREFIX}${name}`;
  });
  const role = new iam.Role(stack, 'ExplorerDeployRole', {
    assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    description: "Stele explorer deployment: writes the explorer's files, nothing else",
    managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaBasicExecutionRole')],
  });
  const files = new s3assets.Asset(stack, 'ExplorerFiles', { path: explorerDir });
  files.grantRead(role);
  role.addToPolicy(
    new iam.PolicyStatement({
      actions: ['s3:GetObject', 's3:PutObject'],
      resources: keys.map((k) => bucket.arnForObjects(k)),
    }),
  );
  role.addToPolicy(
    new iam.PolicyStatement({
      actions: ['s3:ListBucket'],
      resources: [bucket.bucketArn],
      conditions: { StringLike: { 's3:prefix': [PUBLIC_PREFIX, `${PUBLIC_PREFIX}*`] } },
    }),
  );
  // The construct's own grants (read-write-delete on the whole bucket) go nowhere: the role
  // it is given takes no policy updates.
  new s3deploy.BucketDeployment(stack, 'Explorer', {
    vpc,
    vpcSubnets: PRIVATE_SUBNETS,
    sources: [s3deploy.Source.bucket(files.bucket, files.s3ObjectKey)],
    destinationBucket: bucket,
    destinationKeyPrefix: PUBLIC_PREFIX,
    prune: false,
    cacheControl: [s3deploy.CacheControl.fromString('no-cache')],
    role: role.withoutPolicyUpdates(),
  });
  acknowledgeExplorerFindings(stack, role, bucket, keys);
}

function acknowledgeExplorerFindings(stack: Stack, role: iam.Role, bucket: s3.Bucket, keys: string[]): void {
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
      `AwsSolutions-IAM5[Resource::<${logicalIdOf(bucket)}.Arn>/${k}]`,
      "One of the explorer's own folders (hashed asset names), never a tile or the checkpoint.",
    );
  for (const c of stack.node.children)
    if (c.node.id.startsWith('Custom::CDKBucketDeployment'))
      acknowledge(
        c,
        'AwsSolutions-L1',
        "CDK's BucketDeployment function; its runtime follows the aws-cdk-lib version.",
      );
}
