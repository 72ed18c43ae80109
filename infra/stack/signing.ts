// The log key and the rule that only the sequencer signs with it: the key policy allows
// kms:Sign to the sequencer's role alone and refuses it to everyone else; EventBridge rules
// raise an alarm on a Sign by anyone else and on a change to the key's life or policy.
import { Duration, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventsTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as sns from 'aws-cdk-lib/aws-sns';

/** The sequencer's task role and the log key whose policy names it as the only signer. */
export function signingKey(stack: Stack, multiRegion: boolean): { sequencerRole: iam.Role; key: kms.Key } {
  // The sequencer's role exists before the key, whose policy names it as the only signer.
  const sequencerRole = new iam.Role(stack, 'SequencerTaskRole', {
    assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
    description: 'Stele sequencer task: writes the log, the only principal that may kms:Sign with the log key',
  });
  const key = new kms.Key(stack, 'LogKey', {
    keySpec: kms.KeySpec.ECC_NIST_EDWARDS25519,
    keyUsage: kms.KeyUsage.SIGN_VERIFY,
    description: 'Stele log signing key (Ed25519; checkpoints are signed with ED25519_SHA_512, RAW)',
    removalPolicy: RemovalPolicy.RETAIN,
    multiRegion,
    policy: logKeyPolicy(sequencerRole.roleArn),
  });
  return { sequencerRole, key };
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

/**
 * Alerts on the log key. CloudTrail records every KMS call; EventBridge sees them in this
 * region (an account or organization trail logging management events must exist, README
 * "The log key"). Sign is a read-only event: the rule must opt in to those.
 */
export function keyAlerts(
  stack: Stack,
  key: kms.IKey,
  sequencerRole: iam.IRole,
  topic: sns.ITopic,
  action: cwActions.SnsAction,
): void {
  const cloudTrailKms = (eventNames: string[], extra: Record<string, unknown> = {}): events.EventPattern => ({
    source: ['aws.kms'],
    detailType: ['AWS API Call via CloudTrail'],
    detail: {
      eventSource: ['kms.amazonaws.com'],
      eventName: eventNames,
      resources: { ARN: [key.keyArn] },
      ...extra,
    },
  });
  const foreignSign = new events.Rule(stack, 'ForeignSignRule', {
    description: 'kms:Sign (or an attempt) on the log key by a principal other than the sequencer role',
    eventPattern: cloudTrailKms(['Sign'], {
      $or: [
        { userIdentity: { sessionContext: { sessionIssuer: { arn: [{ 'anything-but': sequencerRole.roleArn }] } } } },
        { userIdentity: { type: [{ 'anything-but': 'AssumedRole' }] } },
      ],
    }),
  });
  (foreignSign.node.defaultChild as events.CfnRule).state = 'ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS';
  const keyLifecycle = new events.Rule(stack, 'KeyLifecycleRule', {
    description: 'The log key is scheduled for deletion, disabled, or its policy or grants changed',
    eventPattern: cloudTrailKms(['ScheduleKeyDeletion', 'DisableKey', 'PutKeyPolicy', 'CreateGrant']),
  });
  for (const [id, rule] of [
    ['ForeignSignAlarm', foreignSign],
    ['KeyLifecycleAlarm', keyLifecycle],
  ] as const) {
    rule.addTarget(new eventsTargets.SnsTopic(topic));
    new cloudwatch.Alarm(stack, id, {
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
}
