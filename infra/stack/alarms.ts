// Alarms to an SNS topic (with an optional e-mail subscriber) on what the sequencer logs and
// what the API answers; the metrics drawn from the sequencer's log for the dashboard.
import { Duration, type Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { StackConditions, StackParameters } from './parameters.js';

export function alarmTopic(
  stack: Stack,
  p: StackParameters,
  c: StackConditions,
): { topic: sns.Topic; action: cwActions.SnsAction } {
  const topic = new sns.Topic(stack, 'Alarms', { displayName: 'Stele alarms', enforceSSL: true });
  const subscription = new sns.CfnSubscription(stack, 'AlarmEmailSubscription', {
    topicArn: topic.topicArn,
    protocol: 'email',
    endpoint: p.AlarmEmail.valueAsString,
  });
  subscription.cfnOptions.condition = c.hasEmail;
  return { topic, action: new cwActions.SnsAction(topic) };
}

/** Metrics drawn from the sequencer's JSON log lines. */
export interface SequencerLogMetrics {
  readonly errors: logs.MetricFilter;
  readonly stall: logs.MetricFilter;
  readonly treeSize: logs.MetricFilter;
  readonly pending: logs.MetricFilter;
  readonly checkpointAge: logs.MetricFilter;
  readonly witnessMisses: logs.MetricFilter;
}

export function sequencerLogMetrics(logGroup: logs.LogGroup): SequencerLogMetrics {
  // pino writes JSON lines; level 50 = error, 60 = fatal (e.g. "sequencer stopped").
  const errors = logGroup.addMetricFilter('SequencerErrorFilter', {
    filterPattern: logs.FilterPattern.numberValue('$.level', '>=', 50),
    metricNamespace: 'Stele',
    metricName: 'SequencerErrors',
    metricValue: '1',
    defaultValue: 0,
  });
  // The sequencer logs a heartbeat every 10 s; stallSeconds grows while anchors wait and
  // no checkpoint is published. No heartbeat at all (sequencer down) also alarms.
  const stall = logGroup.addMetricFilter('StallFilter', {
    filterPattern: logs.FilterPattern.stringValue('$.msg', '=', 'sequencer heartbeat'),
    metricNamespace: 'Stele',
    metricName: 'CheckpointStallSeconds',
    metricValue: '$.stallSeconds',
  });
  // The heartbeat's other fields and the witness rounds, for the dashboard (the services'
  // Prometheus /metrics stay inside the VPC: the ALB routes /api/ledger/* only).
  const heartbeatField = (metricName: string, field: string) =>
    logGroup.addMetricFilter(`${metricName}Filter`, {
      filterPattern: logs.FilterPattern.stringValue('$.msg', '=', 'sequencer heartbeat'),
      metricNamespace: 'Stele',
      metricName,
      metricValue: `$.${field}`,
    });
  const treeSize = heartbeatField('TreeSize', 'size');
  const pending = heartbeatField('PendingAnchors', 'pending');
  const checkpointAge = heartbeatField('CheckpointAgeSeconds', 'checkpointAgeSeconds');
  const witnessMisses = logGroup.addMetricFilter('WitnessPolicyNotMetFilter', {
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
  return { errors, stall, treeSize, pending, checkpointAge, witnessMisses };
}

/** The sequencer's errors and stalls, the API's server errors; returns the API 5xx metric for the dashboard. */
export function serviceAlarms(
  stack: Stack,
  p: StackParameters,
  action: cwActions.SnsAction,
  m: SequencerLogMetrics,
  apiTargets: elbv2.ApplicationTargetGroup,
): cloudwatch.IMetric {
  new cloudwatch.Alarm(stack, 'SequencerErrorAlarm', {
    alarmDescription: 'The sequencer logged an error (failed batch, lost lock, storage or KMS failure)',
    metric: m.errors.metric({ statistic: 'Sum', period: Duration.minutes(5) }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  }).addAlarmAction(action);
  new cloudwatch.Alarm(stack, 'CheckpointStallAlarm', {
    alarmDescription: 'Anchors are waiting and no checkpoint has been published (or the sequencer is not running)',
    metric: m.stall.metric({ statistic: 'Maximum', period: Duration.minutes(1) }),
    threshold: p.StallAlarmSeconds.valueAsNumber,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 2,
    treatMissingData: cloudwatch.TreatMissingData.BREACHING,
  }).addAlarmAction(action);
  const api5xx = apiTargets.metrics.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, {
    period: Duration.minutes(5),
    statistic: 'Sum',
  });
  new cloudwatch.Alarm(stack, 'Api5xxAlarm', {
    alarmDescription: 'The API answers with server errors',
    metric: api5xx,
    threshold: 10,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  }).addAlarmAction(action);
  return api5xx;
}
