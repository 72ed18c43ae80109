// The two Fargate services, the sequencer (the single writer) and the API (autoscaled), on
// their task definitions (tasks.ts).
import type { Stack } from 'aws-cdk-lib';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { StackParameters } from './parameters.js';
import {
  anchorTokensSecret,
  containerImage,
  metricsLogGroup,
  type ServiceSettings,
  type ServiceTask,
  serviceTask,
} from './tasks.js';

export interface Services {
  readonly sequencerService: ecs.FargateService;
  readonly apiService: ecs.FargateService;
}

export interface LogServices extends Services {
  readonly seq: ServiceTask;
  readonly api: ServiceTask;
  readonly tokens: secretsmanager.Secret;
}

/** Both task definitions and both services (`imageAsset`: see SteleStackProps). */
export function logServices(
  stack: Stack,
  log: ServiceSettings,
  cluster: ecs.ICluster,
  sequencerRole: iam.IRole,
  imageAsset: string | undefined,
): LogServices {
  const image = containerImage(stack, log.params, imageAsset);
  const tokens = anchorTokensSecret(stack, log.params);
  const tasks = { log, image, tokens, sequencerRole, metricsLogGroup: metricsLogGroup(stack) };
  const seq = serviceTask(stack, 'Sequencer', 'sequencer', { cpu: 1024, memoryLimitMiB: 2048 }, tasks);
  const api = serviceTask(stack, 'Api', 'api', { cpu: 512, memoryLimitMiB: 1024 }, tasks);
  return { seq, api, tokens, ...services(stack, log.params, cluster, seq, api) };
}

function services(
  stack: Stack,
  p: StackParameters,
  cluster: ecs.ICluster,
  seq: ServiceTask,
  api: ServiceTask,
): Services {
  // The single writer: one task, and a deployment stops the old task before starting the
  // new one, so two sequencers never run at once (if they did, the lock — DynamoDB or
  // the bucket's — makes the second one stop rather than fork the log).
  const sequencerService = new ecs.FargateService(stack, 'SequencerService', {
    cluster,
    taskDefinition: seq.task,
    desiredCount: 1,
    minHealthyPercent: 0,
    maxHealthyPercent: 100,
    circuitBreaker: { rollback: true },
  });
  const apiService = new ecs.FargateService(stack, 'ApiService', {
    cluster,
    taskDefinition: api.task,
    desiredCount: p.ApiMinTasks.valueAsNumber,
    minHealthyPercent: 100,
    maxHealthyPercent: 200,
    circuitBreaker: { rollback: true },
  });
  const scaling = apiService.autoScaleTaskCount({
    minCapacity: p.ApiMinTasks.valueAsNumber,
    maxCapacity: p.ApiMaxTasks.valueAsNumber,
  });
  scaling.scaleOnCpuUtilization('Cpu', { targetUtilizationPercent: 60 });
  scaling.scaleOnMemoryUtilization('Memory', { targetUtilizationPercent: 75 });
  return { sequencerService, apiService };
}
