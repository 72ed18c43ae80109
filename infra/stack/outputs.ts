// The stack's outputs: where to point the two names, and what the runbooks need.
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { StackParameters } from './parameters.js';
import type { ActiveTable } from './storage.js';

export interface OutputSources {
  readonly params: StackParameters;
  readonly distribution: cloudfront.IDistribution;
  readonly alb: elbv2.IApplicationLoadBalancer;
  readonly bucket: s3.IBucket;
  readonly logBucket: s3.IBucket;
  readonly active: ActiveTable;
  readonly table: dynamodb.ITable;
  readonly key: kms.IKey;
  readonly topic: sns.ITopic;
}

export function stackOutputs(stack: Stack, o: OutputSources): void {
  new CfnOutput(stack, 'LogUrl', {
    value: `https://${o.params.DomainName.valueAsString}`,
    description: 'Tiles, checkpoint and /api/ledger',
  });
  new CfnOutput(stack, 'LogDomainTarget', {
    value: o.distribution.distributionDomainName,
    description: 'Point DomainName here (CNAME or alias)',
  });
  new CfnOutput(stack, 'OriginAliasTarget', {
    value: o.alb.loadBalancerDnsName,
    description: 'Point OriginDomainName here (CNAME or alias)',
  });
  new CfnOutput(stack, 'BucketName', { value: o.bucket.bucketName });
  new CfnOutput(stack, 'LogBucketName', { value: o.logBucket.bucketName });
  new CfnOutput(stack, 'TableName', { value: o.active.name, description: 'The table the services use' });
  new CfnOutput(stack, 'StackTableName', { value: o.table.tableName, description: "The stack's own table" });
  new CfnOutput(stack, 'KeyArn', { value: o.key.keyArn });
  new CfnOutput(stack, 'AlarmTopicArn', { value: o.topic.topicArn });
}
