// The load balancer, CloudFront's origin for /api/ledger/*: only CloudFront gets through.
// Reachable on 443 only, only from CloudFront's origin-facing addresses (its managed prefix
// list, looked up in the deploy region), and it forwards only requests carrying the
// origin-verify secret (Secrets Manager, rotated every 30 days; see
// infra/origin-secret-rotation.ts).
import { Duration, Fn, type Stack } from 'aws-cdk-lib';
import type * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as cr from 'aws-cdk-lib/custom-resources';
import { ROTATION_SCRIPT } from '../origin-secret-rotation.js';
import { albAccessLogs } from './alb-access-logs.js';
import { ANCHOR_PATH, CLOUDFRONT_ORIGIN_FACING, ORIGIN_VERIFY_HEADER, PORT } from './constants.js';
import { acknowledge } from './nag-acknowledgements.js';
import { PRIVATE_SUBNETS } from './network.js';
import type { StackParameters } from './parameters.js';
import type { Services } from './services.js';

/** The load balancer, its security group open to CloudFront's prefix list only, and its access logs. */
export function cloudFrontOnlyAlb(
  stack: Stack,
  vpc: ec2.IVpc,
  logBucket: s3.IBucket,
): { prefixList: cr.AwsCustomResource; alb: elbv2.ApplicationLoadBalancer } {
  const prefixList = new cr.AwsCustomResource(stack, 'CloudFrontPrefixList', {
    onUpdate: {
      service: 'EC2',
      action: 'describeManagedPrefixLists',
      parameters: { Filters: [{ Name: 'prefix-list-name', Values: [CLOUDFRONT_ORIGIN_FACING] }] },
      physicalResourceId: cr.PhysicalResourceId.of(CLOUDFRONT_ORIGIN_FACING),
      outputPaths: ['PrefixLists.0.PrefixListId'],
    },
    policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: cr.AwsCustomResourcePolicy.ANY_RESOURCE }),
    installLatestAwsSdk: false,
    vpc,
    vpcSubnets: PRIVATE_SUBNETS,
  });
  const cloudFrontPrefixList = prefixList.getResponseField('PrefixLists.0.PrefixListId');
  const albSecurityGroup = new ec2.SecurityGroup(stack, 'AlbSecurityGroup', {
    vpc,
    description: 'Stele ALB: HTTPS from CloudFront origin-facing addresses only',
    allowAllOutbound: false,
  });
  albSecurityGroup.addIngressRule(ec2.Peer.prefixList(cloudFrontPrefixList), ec2.Port.tcp(443), 'CloudFront');
  const alb = new elbv2.ApplicationLoadBalancer(stack, 'Alb', {
    vpc,
    internetFacing: true,
    securityGroup: albSecurityGroup,
    deletionProtection: true,
    dropInvalidHeaderFields: true,
  });
  albAccessLogs(stack, alb, logBucket);
  return { prefixList, alb };
}

/** The HTTPS listener's routes to the services, each requiring the origin-verify secret. */
export interface OriginRouting {
  readonly originSecret: secretsmanager.Secret;
  /** Resolved by CloudFormation at deploy time: the value never appears in the template. */
  readonly originSecretValue: string;
  readonly sequencerTargets: elbv2.ApplicationTargetGroup;
  readonly apiTargets: elbv2.ApplicationTargetGroup;
  readonly sequencerRule: elbv2.ApplicationListenerRule;
  readonly apiRule: elbv2.ApplicationListenerRule;
}

export function originRouting(
  stack: Stack,
  vpc: ec2.IVpc,
  alb: elbv2.ApplicationLoadBalancer,
  p: StackParameters,
  svc: Services,
): OriginRouting {
  const listener = alb.addListener('Https', {
    port: 443,
    protocol: elbv2.ApplicationProtocol.HTTPS,
    certificates: [elbv2.ListenerCertificate.fromArn(p.OriginCertificateArn.valueAsString)],
    sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS,
    open: false,
    defaultAction: elbv2.ListenerAction.fixedResponse(403, { contentType: 'text/plain', messageBody: 'forbidden' }),
  });
  const originSecret = new secretsmanager.Secret(stack, 'OriginVerifySecret', {
    description: `Stele: the ${ORIGIN_VERIFY_HEADER} value CloudFront sends and the load balancer requires`,
    generateSecretString: { passwordLength: 48, excludePunctuation: true },
  });
  const originSecretValue = originSecret.secretValue.unsafeUnwrap();
  const healthCheck = { path: '/api/ledger/checkpoint', healthyHttpCodes: '200', interval: Duration.seconds(15) };
  const viaCloudFront = elbv2.ListenerCondition.httpHeader(ORIGIN_VERIFY_HEADER, [originSecretValue]);
  const targetGroup = (id: string, service: ecs.FargateService, drain: Duration) =>
    new elbv2.ApplicationTargetGroup(stack, id, {
      vpc,
      port: PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [service],
      healthCheck,
      deregistrationDelay: drain,
    });
  // A sequencer deployment drains: the ALB stops sending anchors to the old task and lets
  // those in flight finish (an anchor waits at most a batch interval and a publish), then
  // ECS stops it (SIGTERM: it integrates what it accepted, within stopTimeout) and starts
  // the new one. Anchors sent in between get 503 and are retried by clients; none accepted
  // is lost.
  const sequencerTargets = targetGroup('SequencerTargets', svc.sequencerService, Duration.seconds(35));
  const apiTargets = targetGroup('ApiTargets', svc.apiService, Duration.seconds(10));
  const sequencerRule = new elbv2.ApplicationListenerRule(stack, 'SequencerRule', {
    listener,
    priority: 10,
    conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns([ANCHOR_PATH])],
    targetGroups: [sequencerTargets],
  });
  const apiRule = new elbv2.ApplicationListenerRule(stack, 'ApiRule', {
    listener,
    priority: 20,
    conditions: [viaCloudFront, elbv2.ListenerCondition.pathPatterns(['/api/ledger/*'])],
    targetGroups: [apiTargets],
  });
  alb.connections.allowTo(svc.sequencerService, ec2.Port.tcp(PORT));
  alb.connections.allowTo(svc.apiService, ec2.Port.tcp(PORT));
  return { originSecret, originSecretValue, sequencerTargets, apiTargets, sequencerRule, apiRule };
}

/**
 * The origin-verify secret's rotation: a function that lets the load balancer accept the
 * current and the next value, switches CloudFront to the next, then makes it current.
 */
export function originSecretRotation(
  stack: Stack,
  vpc: ec2.IVpc,
  routing: OriginRouting,
  distribution: cloudfront.IDistribution,
): lambda.Function {
  const { sequencerRule, apiRule, originSecret } = routing;
  const rotation = new lambda.Function(stack, 'OriginSecretRotation', {
    runtime: lambda.Runtime.NODEJS_24_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline(ROTATION_SCRIPT),
    timeout: Duration.minutes(2),
    vpc,
    vpcSubnets: PRIVATE_SUBNETS,
    description: 'Rotates the Stele origin-verify secret (ALB rules, then CloudFront, then the secret)',
    environment: {
      HEADER_NAME: ORIGIN_VERIFY_HEADER,
      RULE_ARNS: Fn.join(',', [sequencerRule.listenerRuleArn, apiRule.listenerRuleArn]),
      DISTRIBUTION_ID: distribution.distributionId,
    },
  });
  rotation.addToRolePolicy(
    new iam.PolicyStatement({
      actions: ['elasticloadbalancing:ModifyRule'],
      resources: [sequencerRule.listenerRuleArn, apiRule.listenerRuleArn],
    }),
  );
  rotation.addToRolePolicy(
    new iam.PolicyStatement({
      // DescribeRules supports no resource-level permissions.
      actions: ['elasticloadbalancing:DescribeRules'],
      resources: ['*'],
    }),
  );
  rotation.addToRolePolicy(
    new iam.PolicyStatement({
      actions: ['cloudfront:GetDistributionConfig', 'cloudfront:UpdateDistribution'],
      resources: [distribution.distributionArn],
    }),
  );
  rotation.addToRolePolicy(
    new iam.PolicyStatement({ actions: ['secretsmanager:GetRandomPassword'], resources: ['*'] }),
  );
  originSecret.addRotationSchedule('Rotation', {
    rotationLambda: rotation,
    automaticallyAfter: Duration.days(30),
    rotateImmediatelyOnUpdate: false,
  });
  // Secrets Manager may invoke the function for this secret only.
  for (const c of rotation.node.findAll())
    if (c instanceof lambda.CfnPermission) c.addPropertyOverride('SourceArn', originSecret.secretArn);
  acknowledge(
    rotation,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    "The function's own log group only (AWS managed basic execution policy).",
  );
  acknowledge(
    rotation,
    'AwsSolutions-IAM5[Resource::*]',
    'elasticloadbalancing:DescribeRules and secretsmanager:GetRandomPassword support no resource-level permissions.',
  );
  return rotation;
}
