// The AWS Control Tower proactive controls (cfn-guard rules bundled with
// @cdklabs/cdk-validator-cfnguard) this stack does not meet, each with the reason.
// test/infra/guard.test.ts runs every bundled rule on the synthesized templates and requires
// that each violation be one of these; any other fails the test.

/**
 * Rules switched off for the whole template: they accept only a literal certificate ARN, and
 * here the certificates are parameters (constrained to ACM ARNs by their AllowedPattern); the
 * plugin also cannot read these rules' results for a Ref. test/infra/stack.test.ts asserts the
 * certificates, SNI and the TLS policies instead.
 */
export const GUARD_DISABLED_RULES: Record<string, string> = {
  'ct-cloudfront-pr-6':
    'CT.CLOUDFRONT.PR.6 (custom certificate): ViewerCertificate.AcmCertificateArn is the CertificateArn parameter, an ACM ARN in us-east-1 by its AllowedPattern.',
  'ct-cloudfront-pr-7':
    'CT.CLOUDFRONT.PR.7 (SNI): SslSupportMethod is sni-only, on the CertificateArn parameter, which the rule cannot resolve.',
  'ct-elasticloadbalancing-pr-2':
    'CT.ELASTICLOADBALANCING.PR.2 (ACM certificate on the listener): the HTTPS listener uses the OriginCertificateArn parameter, an ACM ARN by its AllowedPattern.',
};

export interface GuardException {
  /** The cfn-guard rule name as reported (e.g. s3_bucket_logging_enabled_check). */
  readonly rule: string;
  /** Logical ids of the resources it applies to, by prefix (CDK appends a hash). */
  readonly resources: readonly string[];
  readonly reason: string;
}

export const GUARD_EXCEPTIONS: readonly GuardException[] = [
  {
    rule: 'cloudfront_origin_failover_enabled_check',
    resources: ['Cdn'],
    reason:
      'Origin groups fail over GET and HEAD only and need a second origin: the API behaviour takes POST, and a second tiles origin would be a replica bucket in another region, which this stack does not provision (README "Recovery").',
  },
  {
    rule: 'cloudwatch_log_group_encrypted_check',
    resources: ['SequencerLogs', 'ApiLogs', 'PrometheusMetrics'],
    reason:
      'The service logs and the metrics lines hold no secrets (bearer tokens are never logged) and CloudWatch Logs encrypts them at rest; a customer key would only add a key policy to maintain.',
  },
  {
    rule: 's3_bucket_default_encryption_kms_check',
    resources: ['Tiles', 'AccessLogs', 'AlbLogs'],
    reason:
      'SSE-S3: the tiles are public by design and served through CloudFront OAC (no key grant, ETags stay content MD5s); ALB access logs support SSE-S3 only; CloudFront and S3 log delivery write without a key grant.',
  },
  {
    rule: 's3_bucket_logging_enabled_check',
    resources: ['AccessLogs'],
    reason: 'The access-log bucket does not log its own accesses (a loop); every other bucket logs into it.',
  },
  {
    rule: 's3_event_notifications_enabled_check',
    resources: ['Tiles', 'AccessLogs', 'AlbLogs'],
    reason:
      'Nothing consumes object events: the log is read through CloudFront and monitored by the canary and alarms.',
  },
  {
    rule: 's3_bucket_acl_prohibited_check',
    resources: ['AccessLogs'],
    reason:
      'CloudFront standard logging writes its log files with an ACL, so this bucket keeps ACLs (bucket owner preferred; Block Public Access stays on).',
  },
  {
    rule: 's3_bucket_object_lock_enabled_check',
    resources: ['Tiles', 'AccessLogs', 'AlbLogs'],
    reason:
      'Tiles: the bucket policy makes them create-only and undeletable (infra/immutability.ts); Object Lock default retention would also lock every version of the hot keys (up to one a second). Logs: they expire after a year, with no retention obligation.',
  },
];
