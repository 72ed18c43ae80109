// The services' Prometheus /metrics (src/api/app.ts), collected by a sidecar in each task:
// the AWS Distro for OpenTelemetry collector scrapes localhost:8080/metrics every minute and
// writes CloudWatch embedded-metric-format lines to a log group, which CloudWatch turns into
// metrics in METRICS_NAMESPACE (dimension `job`: stele-sequencer or stele-api). /metrics is
// never public: the load balancer forwards /api/ledger/* only.
// Its configuration is given as AOT_CONFIG_CONTENT (the collector reads it from the
// environment, so the sidecar writes nothing and runs on a read-only root file system).

export const METRICS_NAMESPACE = 'Stele/Prometheus';
/** The collector image (public ECR); `latest` tracks AWS's supported release. */
export const COLLECTOR_IMAGE = 'public.ecr.aws/aws-observability/aws-otel-collector:latest';
/** Memory the sidecar is given out of its task's (MiB). */
export const COLLECTOR_MEMORY_MIB = 128;

/** The collector's configuration for one service (`job` names it in the metrics' dimension). */
export function collectorConfig(job: string, port: number, logGroupName: string): string {
  return [
    'receivers:',
    '  prometheus:',
    '    config:',
    '      scrape_configs:',
    `        - job_name: ${job}`,
    '          scrape_interval: 60s',
    '          metrics_path: /metrics',
    '          static_configs:',
    `            - targets: ['127.0.0.1:${port}']`,
    'exporters:',
    '  awsemf:',
    `    namespace: ${METRICS_NAMESPACE}`,
    `    log_group_name: '${logGroupName}'`,
    '    dimension_rollup_option: NoDimensionRollup',
    '    metric_declarations:',
    '      - dimensions: [[job]]',
    "        metric_name_selectors: ['^stele_']",
    'service:',
    '  pipelines:',
    '    metrics:',
    '      receivers: [prometheus]',
    '      exporters: [awsemf]',
    '',
  ].join('\n');
}
