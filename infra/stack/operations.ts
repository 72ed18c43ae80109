// What an operator watches, composed in the template's order: the alarm topic, the alarms
// on the services, the alerts on the log key, the freshness canary and the dashboard.
import type { Stack } from 'aws-cdk-lib';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import type * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as synthetics from 'aws-cdk-lib/aws-synthetics';
import { alarmTopic, sequencerLogMetrics, serviceAlarms } from './alarms.js';
import { dashboard } from './dashboard.js';
import { checkpointCanary } from './freshness.js';
import type { OriginRouting } from './origin.js';
import type { StackConditions, StackParameters } from './parameters.js';
import { keyAlerts } from './signing.js';

export interface Watched {
  readonly params: StackParameters;
  readonly conditions: StackConditions;
  readonly sequencerLogs: logs.LogGroup;
  readonly key: kms.IKey;
  readonly sequencerRole: iam.IRole;
  readonly logBucket: s3.IBucket;
  readonly routing: OriginRouting;
  readonly alb: elbv2.ApplicationLoadBalancer;
  readonly distribution: cloudfront.IDistribution;
}

export function operations(stack: Stack, w: Watched): { topic: sns.Topic; canary: synthetics.Canary } {
  const { topic, action } = alarmTopic(stack, w.params, w.conditions);
  const log = sequencerLogMetrics(w.sequencerLogs);
  const api5xx = serviceAlarms(stack, w.params, action, log, w.routing.apiTargets);
  keyAlerts(stack, w.key, w.sequencerRole, topic, action);
  const { canary, canaryFailed } = checkpointCanary(stack, w.params, w.logBucket, action);
  const { sequencerTargets } = w.routing;
  dashboard(stack, { log, sequencerTargets, alb: w.alb, api5xx, distribution: w.distribution, canary, canaryFailed });
  return { topic, canary };
}
