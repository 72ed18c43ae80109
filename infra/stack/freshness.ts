// Checkpoint freshness, from outside: a Synthetics canary fetches the checkpoint through
// CloudFront (infra/canary.ts's script) and an alarm fires when it is stale or unreachable.
import { Duration, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as synthetics from 'aws-cdk-lib/aws-synthetics';
import { CANARY_SCRIPT } from '../canary.js';
import { acknowledge } from './nag-acknowledgements.js';
import type { StackParameters } from './parameters.js';

export function checkpointCanary(
  stack: Stack,
  p: StackParameters,
  logBucket: s3.IBucket,
  action: cwActions.SnsAction,
): { canary: synthetics.Canary; canaryFailed: cloudwatch.Alarm } {
  const canary = new synthetics.Canary(stack, 'CheckpointCanary', {
    runtime: synthetics.Runtime.SYNTHETICS_NODEJS_PUPPETEER_9_1,
    test: synthetics.Test.custom({ code: synthetics.Code.fromInline(CANARY_SCRIPT), handler: 'index.handler' }),
    schedule: synthetics.Schedule.rate(Duration.minutes(5)),
    environmentVariables: {
      CHECKPOINT_URL: `https://${p.DomainName.valueAsString}/checkpoint.json`,
      MAX_AGE_SECONDS: p.CheckpointMaxAgeSeconds.valueAsString,
    },
    artifactsBucketLocation: { bucket: logBucket, prefix: 'canary' },
    provisionedResourceCleanup: true,
  });
  const canaryFailed = new cloudwatch.Alarm(stack, 'CheckpointCanaryAlarm', {
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
  return { canary, canaryFailed };
}
