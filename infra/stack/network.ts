// The network the tasks, the load balancer and the functions run in, and the ECS cluster.
import type { Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as s3 from 'aws-cdk-lib/aws-s3';

/**
 * A NAT gateway per AZ: losing one AZ's gateway does not cut the other AZ's tasks off
 * KMS, ECR, Secrets Manager, CloudWatch and the witnesses.
 */
export function network(stack: Stack, logBucket: s3.IBucket): { vpc: ec2.Vpc; cluster: ecs.Cluster } {
  const vpc = new ec2.Vpc(stack, 'Vpc', {
    maxAzs: 2,
    natGateways: 2,
    // Public subnets hold the NAT gateways and the load balancer only (both get their own
    // addresses); nothing launched there gets a public IP by default.
    subnetConfiguration: [
      { name: 'Public', subnetType: ec2.SubnetType.PUBLIC, mapPublicIpOnLaunch: false },
      { name: 'Private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
    ],
    gatewayEndpoints: {
      S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
      DynamoDB: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
    },
    flowLogs: {
      ToLogBucket: {
        destination: ec2.FlowLogDestination.toS3(logBucket, 'vpc-flow/'),
        trafficType: ec2.FlowLogTrafficType.ALL,
      },
    },
  });
  const cluster = new ecs.Cluster(stack, 'Cluster', {
    vpc,
    containerInsightsV2: ecs.ContainerInsights.ENABLED,
  });
  return { vpc, cluster };
}

/** Where the stack's functions run: the private subnets, out through the NAT gateways. */
export const PRIVATE_SUBNETS: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS };
