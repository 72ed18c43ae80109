// The operator's dashboard: anchors and their latency, the log's growth and freshness, the
// witnesses, the replicas, the edge, and the alarm that matters most.
import { Aws, Duration, Fn, type Stack } from 'aws-cdk-lib';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import type * as synthetics from 'aws-cdk-lib/aws-synthetics';
import { METRICS_NAMESPACE } from '../metrics-collector.js';
import type { SequencerLogMetrics } from './alarms.js';

export interface DashboardSources {
  readonly log: SequencerLogMetrics;
  readonly sequencerTargets: elbv2.ApplicationTargetGroup;
  readonly alb: elbv2.ApplicationLoadBalancer;
  readonly api5xx: cloudwatch.IMetric;
  readonly distribution: cloudfront.IDistribution;
  readonly canary: synthetics.Canary;
  readonly canaryFailed: cloudwatch.IAlarm;
}

export function dashboard(stack: Stack, s: DashboardSources): cloudwatch.Dashboard {
  return new cloudwatch.Dashboard(stack, 'Dashboard', {
    dashboardName: Fn.join('-', [Aws.STACK_NAME, 'stele']),
    widgets: [
      anchorRow(s),
      growthRow(s.log),
      collectorRow(),
      edgeRow(s),
      [
        new cloudwatch.AlarmStatusWidget({
          title: 'Alarms',
          alarms: [s.canaryFailed],
        }),
      ],
    ],
  });
}

function anchorRow(s: DashboardSources): cloudwatch.IWidget[] {
  const { sequencerTargets } = s;
  return [
    new cloudwatch.GraphWidget({
      title: 'Anchor requests /s (ALB → sequencer)',
      left: [
        sequencerTargets.metrics.requestCount({ statistic: 'Sum', period: Duration.minutes(1) }).with({
          label: 'anchors per minute',
        }),
      ],
    }),
    new cloudwatch.GraphWidget({
      title: 'Anchor latency (batch wait + publish), p50/p99',
      left: [
        sequencerTargets.metrics.targetResponseTime({ statistic: 'p50' }),
        sequencerTargets.metrics.targetResponseTime({ statistic: 'p99' }),
      ],
    }),
    new cloudwatch.GraphWidget({
      title: 'Checkpoint stall (s) and sequencer errors',
      left: [s.log.stall.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
      right: [s.log.errors.metric({ statistic: 'Sum', period: Duration.minutes(5) })],
    }),
  ];
}

function growthRow(m: SequencerLogMetrics): cloudwatch.IWidget[] {
  return [
    new cloudwatch.GraphWidget({
      title: 'Entries integrated /s (tree size growth) and anchors waiting',
      left: [
        new cloudwatch.MathExpression({
          expression: 'RATE(size)',
          usingMetrics: { size: m.treeSize.metric({ statistic: 'Maximum', period: Duration.minutes(1) }) },
          label: 'entries/s',
        }),
      ],
      right: [m.pending.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
    }),
    new cloudwatch.GraphWidget({
      title: 'Checkpoint age (s) at the sequencer',
      left: [m.checkpointAge.metric({ statistic: 'Maximum', period: Duration.minutes(1) })],
    }),
    new cloudwatch.GraphWidget({
      title: 'Witness rounds that missed the policy',
      left: [m.witnessMisses.metric({ statistic: 'Sum', period: Duration.minutes(5) })],
    }),
  ];
}

/** What the /metrics collectors (infra/metrics-collector.ts) send. */
function collectorRow(): cloudwatch.IWidget[] {
  return [
    new cloudwatch.GraphWidget({
      title: "API replicas' checkpoint age (s): how far behind the published log they answer",
      left: [
        new cloudwatch.Metric({
          namespace: METRICS_NAMESPACE,
          metricName: 'stele_checkpoint_age_seconds',
          dimensionsMap: { job: 'stele-api' },
          statistic: 'Maximum',
          period: Duration.minutes(1),
        }),
      ],
    }),
    new cloudwatch.GraphWidget({
      title: 'Sequencer: tree size and commit failures (/metrics)',
      left: [
        new cloudwatch.Metric({
          namespace: METRICS_NAMESPACE,
          metricName: 'stele_tree_size',
          dimensionsMap: { job: 'stele-sequencer' },
          statistic: 'Maximum',
          period: Duration.minutes(1),
        }),
      ],
      right: [
        new cloudwatch.Metric({
          namespace: METRICS_NAMESPACE,
          metricName: 'stele_commit_failures_total',
          dimensionsMap: { job: 'stele-sequencer' },
          statistic: 'Sum', // the collector sends counters as deltas
          period: Duration.minutes(5),
        }),
      ],
    }),
  ];
}

function edgeRow(s: DashboardSources): cloudwatch.IWidget[] {
  const cdnMetric = (metricName: string) =>
    new cloudwatch.Metric({
      namespace: 'AWS/CloudFront',
      metricName,
      dimensionsMap: { DistributionId: s.distribution.distributionId, Region: 'Global' },
      region: 'us-east-1',
      statistic: 'Average',
      period: Duration.minutes(1),
    });
  return [
    new cloudwatch.GraphWidget({
      title: 'Canary: checkpoint fresh through CloudFront (%)',
      left: [s.canary.metricSuccessPercent()],
    }),
    new cloudwatch.GraphWidget({
      title: 'CloudFront 4xx / 5xx error rate (%)',
      left: [cdnMetric('4xxErrorRate'), cdnMetric('5xxErrorRate')],
    }),
    new cloudwatch.GraphWidget({
      title: 'API 5xx, ALB 5xx',
      left: [s.api5xx, s.alb.metrics.httpCodeElb(elbv2.HttpCodeElb.ELB_5XX_COUNT)],
    }),
  ];
}
