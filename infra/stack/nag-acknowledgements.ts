// cdk-nag (AwsSolutions) runs at every synth (infra/nag.ts, infra/app.ts): a finding fails it
// unless acknowledged on its construct with the reason written beside it. Findings that
// belong to one part are acknowledged where that part is made; those spanning parts, here.
import { type CfnElement, Stack, Validations } from 'aws-cdk-lib';
import type * as backup from 'aws-cdk-lib/aws-backup';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as synthetics from 'aws-cdk-lib/aws-synthetics';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { IConstruct } from 'constructs';

/** A cdk-nag finding acknowledged on a construct (and its children), with the reason written there. */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

/** A resource's logical id, as cdk-nag writes it in a finding's id. */
export function logicalIdOf(c: IConstruct): string {
  return Stack.of(c).getLogicalId(c.node.defaultChild as CfnElement);
}

/** The constructs the stack-wide acknowledgements name. */
export interface AcknowledgedParts {
  readonly distribution: cloudfront.Distribution;
  readonly plan: backup.BackupPlan;
  readonly bucket: s3.IBucket;
  readonly logBucket: s3.IBucket;
  readonly tokens: secretsmanager.ISecret;
  readonly sequencerTask: ecs.TaskDefinition;
  readonly apiTask: ecs.TaskDefinition;
  readonly prefixList: cr.AwsCustomResource;
  readonly rotation: lambda.IFunction;
  readonly canary: synthetics.Canary;
}

export function acknowledgeAcceptedFindings(stack: Stack, a: AcknowledgedParts): void {
  acknowledge(
    a.distribution,
    'AwsSolutions-CFR4',
    'ViewerCertificate is set by a property override that cdk-nag does not read: the DomainName certificate, sni-only, TLSv1.2_2021 (test/infra/stack.test.ts asserts it).',
  );
  acknowledge(
    a.plan,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup]',
    "AWS Backup's documented service role policy for taking backups.",
  );
  const objectKeysReason =
    'Tiles, bundles and staged batches have computed keys under a prefix; the prefix is the narrowest grant, and the bucket policy refuses overwrites and deletes of tiles (infra/immutability.ts).';
  for (const role of [a.sequencerTask.taskRole, a.apiTask.taskRole]) {
    acknowledge(role, `AwsSolutions-IAM5[Resource::<${logicalIdOf(a.bucket)}.Arn>/log/*]`, objectKeysReason);
    acknowledge(role, `AwsSolutions-IAM5[Resource::<${logicalIdOf(a.bucket)}.Arn>/private/*]`, objectKeysReason);
  }
  acknowledge(
    a.tokens,
    'AwsSolutions-SMG4',
    'The anchor tokens are issued to clients and given as the AnchorTokens parameter; rotating them means reissuing them, by a deployment with new tokens.',
  );
  for (const t of [a.sequencerTask, a.apiTask])
    acknowledge(
      t,
      'AwsSolutions-IAM5[Resource::*]',
      'The execution role CDK creates: ecr:GetAuthorizationToken supports no resource-level permissions.',
    );
  acknowledge(
    a.prefixList,
    'AwsSolutions-IAM5[Resource::*]',
    'ec2:DescribeManagedPrefixLists supports no resource-level permissions.',
  );
  acknowledgeFunctionPolicies(stack, a.rotation);
  acknowledge(
    a.canary,
    `AwsSolutions-IAM5[Resource::<${logicalIdOf(a.logBucket)}.Arn>/canary/*]`,
    "The canary's artifacts, under its own prefix of the log bucket.",
  );
  acknowledge(
    a.canary,
    'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/lambda/cwsyn-*]',
    "The canary's own log groups (Synthetics names them cwsyn-<name>-<id>).",
  );
}

/** The AWS managed execution policies of the rotation function and of CDK's AwsCustomResource function. */
function acknowledgeFunctionPolicies(stack: Stack, rotation: lambda.IFunction): void {
  const vpcAccess =
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]';
  const basic =
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]';
  const managedReason =
    "AWS managed Lambda execution policies: the function's own log group and its VPC network interfaces.";
  acknowledge(rotation, vpcAccess, managedReason);
  const awsCall = stack.node.tryFindChild(
    cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '').replace(/^/, 'AWS'),
  );
  if (awsCall) for (const id of [basic, vpcAccess]) acknowledge(awsCall, id, managedReason);
}
