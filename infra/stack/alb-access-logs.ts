// The load balancer's access logs, in a bucket of their own.
import {
  Aws,
  CfnCondition,
  CfnMapping,
  Duration,
  Fn,
  type ICfnConditionExpression,
  RemovalPolicy,
  type Stack,
} from 'aws-cdk-lib';
import type * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { RegionInfo } from 'aws-cdk-lib/region-info';

/**
 * ELB writes access logs as its regional account in regions older than August 2022 and as a
 * service principal in newer ones, and an environment-agnostic template learns its region
 * only at deploy time, so the bucket policy chooses with a condition (CDK's logAccessLogs
 * needs the region at synth).
 */
export function albAccessLogs(stack: Stack, alb: elbv2.ApplicationLoadBalancer, logBucket: s3.IBucket): void {
  const bucket = new s3.Bucket(stack, 'AlbLogs', {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    versioned: true,
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    removalPolicy: RemovalPolicy.RETAIN,
    serverAccessLogsBucket: logBucket,
    serverAccessLogsPrefix: 's3-alb-logs/',
    lifecycleRules: [{ id: 'expire', expiration: Duration.days(365), noncurrentVersionExpiration: Duration.days(30) }],
  });
  const legacy = RegionInfo.regions.filter((r) => r.elbv2Account !== undefined);
  new CfnMapping(stack, 'ElbAccounts', {
    mapping: Object.fromEntries(legacy.map((r) => [r.name, { account: r.elbv2Account! }])),
  });
  const equals = legacy.map((r) => Fn.conditionEquals(Aws.REGION, r.name));
  const groups: ICfnConditionExpression[] = [];
  for (let i = 0; i < equals.length; i += 10) {
    const g = equals.slice(i, i + 10);
    groups.push(g.length === 1 ? g[0]! : Fn.conditionOr(...g));
  }
  const isLegacy = new CfnCondition(stack, 'ElbLegacyRegion', {
    expression: groups.length === 1 ? groups[0]! : Fn.conditionOr(...groups),
  });
  const writer = Fn.conditionIf(
    isLegacy.logicalId,
    { AWS: Fn.findInMap('ElbAccounts', Aws.REGION, 'account') },
    { Service: 'logdelivery.elasticloadbalancing.amazonaws.com' },
  );
  const policy = bucket.policy ?? new s3.BucketPolicy(stack, 'AlbLogsPolicy', { bucket });
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
