// The stack's CloudFormation parameters (what `cdk deploy --parameters` sets) and the
// conditions made of them, created in this order so the template keeps its order.
import { Aws, CfnCondition, CfnParameter, type CfnParameterProps, Fn, type Stack } from 'aws-cdk-lib';

const SPECS = {
  Origin: {
    type: 'String',
    description: "The log's origin: the checkpoint's first line and the key name, e.g. ledger.example.com/log",
    allowedPattern: '^[^\\s+]+$',
    constraintDescription: 'no spaces or plus signs',
  },
  // TLS ≥ 1.2 at the edge needs a certificate of one's own: CloudFront's default
  // *.cloudfront.net certificate accepts TLS 1.0.
  DomainName: {
    type: 'String',
    minLength: 1,
    description:
      "The log's public name on CloudFront, e.g. ledger.example.com (point it at the LogDomainTarget output)",
  },
  CertificateArn: {
    type: 'String',
    allowedPattern: '^arn:aws[a-z-]*:acm:us-east-1:[0-9]{12}:certificate/.+$',
    description: 'ACM certificate in us-east-1 for DomainName',
  },
  // CloudFront reaches the load balancer over HTTPS and checks its certificate against the
  // origin's name, so the origin has a name of its own (a CNAME to the ALB) and a certificate.
  OriginDomainName: {
    type: 'String',
    minLength: 1,
    description:
      "The load balancer's name for CloudFront, e.g. origin.ledger.example.com (a CNAME to the OriginAliasTarget output)",
  },
  OriginCertificateArn: {
    type: 'String',
    allowedPattern: '^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/.+$',
    description: "ACM certificate in the stack's region for OriginDomainName",
  },
  AlarmEmail: {
    type: 'String',
    default: '',
    description: 'E-mail address subscribed to the alarm topic (empty: no subscription; subscribe one yourself)',
  },
  ExistingTableName: {
    type: 'String',
    default: '',
    allowedPattern: '^[a-zA-Z0-9_.-]{0,255}$',
    description:
      "A DynamoDB table both services use instead of the stack's own, e.g. one restored from a backup or point in time (README runbook); empty: the stack's table",
  },
  AnchorRateLimit: {
    type: 'Number',
    default: 600,
    minValue: 10,
    description: 'WAF: most POST /api/ledger/anchor requests one client address may make in 5 minutes',
  },
  WebAclArn: {
    type: 'String',
    default: '',
    description:
      'A CLOUDFRONT-scope WAF web ACL to use instead of the one this stack creates (which it can only create when deployed in us-east-1)',
  },
  CheckpointMaxAgeSeconds: {
    type: 'Number',
    default: 3600,
    minValue: 60,
    description:
      'The canary alarms when the checkpoint served through CloudFront is older than this (set it above the longest quiet time of the log)',
  },
  BatchIntervalMs: {
    type: 'Number',
    default: 1000,
    minValue: 10,
    maxValue: 60000,
    description: 'Longest an anchor waits for its batch, in ms',
  },
  MinBatchSpacingMs: {
    type: 'Number',
    default: 1000,
    minValue: 0,
    maxValue: 60000,
    description:
      'Shortest time between two batch starts, in ms: each batch costs a KMS sign, S3 PUTs and two DynamoDB writes (0: back to back)',
  },
  ImageRepository: {
    type: 'String',
    default: 'stele',
    description: 'ECR repository (in this account and region) holding the Stele image',
  },
  ImageTag: {
    type: 'String',
    default: 'latest',
    description: 'Image tag to run',
  },
  ApiMinTasks: {
    type: 'Number',
    default: 2,
    minValue: 1,
    description: 'Fewest API tasks',
  },
  ApiMaxTasks: {
    type: 'Number',
    default: 10,
    minValue: 1,
    description: 'Most API tasks',
  },
  StallAlarmSeconds: {
    type: 'Number',
    default: 60,
    minValue: 5,
    description: 'Alarm when anchors have waited this long with no checkpoint published',
  },
  AnchorTokens: {
    type: 'String',
    noEcho: true,
    minLength: 1,
    description:
      'Bearer tokens of the anchor route, name=token[@tenant],… (kept in Secrets Manager, given to the sequencer only)',
  },
  // Witnesses and mirrors (src/serve/witnessing.ts): both services get them, the sequencer to
  // ask them before each publish, the API replicas to advertise the same policy. Empty: none.
  Witnesses: {
    type: 'String',
    default: '',
    description:
      'tlog-witnesses that cosign each checkpoint before it is published, <witness vkey>=<submission URL>,… (STELE_WITNESSES); empty: none, and split views go unseen',
  },
  // Left out with a witness policy (its quorum line decides).
  WitnessThreshold: {
    type: 'String',
    default: '',
    allowedPattern: '^[0-9]*$',
    description: 'Witness cosignatures a checkpoint needs (STELE_WITNESS_THRESHOLD; empty: all of them)',
  },
  Mirrors: {
    type: 'String',
    default: '',
    description: 'tlog-mirrors the entries are pushed to, <mirror vkey>=<URL>,… (STELE_MIRRORS)',
  },
  MirrorQuorum: {
    type: 'String',
    default: '',
    allowedPattern: '^[0-9]*$',
    description: 'Mirror cosignatures a checkpoint needs before it is published (STELE_MIRROR_QUORUM; empty: 0)',
  },
  // The sequencer stores the witness and mirror settings it starts with in the bucket's private
  // prefix and refuses a start that changes them (src/serve/log-settings.ts): changing them is
  // a deployment with this set to true (then back to false; the same settings start as before).
  ReconfigureLogSettings: {
    type: 'String',
    default: 'false',
    allowedValues: ['false', 'true'],
    description:
      "true: the sequencer replaces the witness and mirror settings stored with the log by this deployment's (STELE_RECONFIGURE); false refuses a change, so clients that pinned the witnesses never see checkpoints they reject",
  },
} satisfies Record<string, CfnParameterProps>;

type Id = keyof typeof SPECS;

/** Every parameter by its logical id; WitnessThreshold only without a witness policy. */
export type StackParameters = { readonly [K in Exclude<Id, 'WitnessThreshold'>]: CfnParameter } & {
  readonly WitnessThreshold?: CfnParameter;
};

/** The parameters, in the template's order; `withThreshold` false leaves WitnessThreshold out. */
export function stackParameters(stack: Stack, withThreshold: boolean): StackParameters {
  const made: Partial<Record<Id, CfnParameter>> = {};
  for (const [id, props] of Object.entries(SPECS) as [Id, CfnParameterProps][]) {
    if (id === 'WitnessThreshold' && !withThreshold) continue;
    made[id] = new CfnParameter(stack, id, props);
  }
  return made as StackParameters;
}

export interface StackConditions {
  readonly hasEmail: CfnCondition;
  readonly hasTableName: CfnCondition;
  readonly hasWebAclArn: CfnCondition;
  /** No WebAclArn given and deployed in us-east-1, the only region a CLOUDFRONT-scope web ACL can be made in. */
  readonly createWebAcl: CfnCondition;
}

export function stackConditions(stack: Stack, p: StackParameters): StackConditions {
  const given = (id: string, parameter: CfnParameter) =>
    new CfnCondition(stack, id, {
      expression: Fn.conditionNot(Fn.conditionEquals(parameter.valueAsString, '')),
    });
  return {
    hasEmail: given('HasAlarmEmail', p.AlarmEmail),
    hasTableName: given('HasTableName', p.ExistingTableName),
    hasWebAclArn: given('HasWebAclArn', p.WebAclArn),
    createWebAcl: new CfnCondition(stack, 'CreateWebAcl', {
      expression: Fn.conditionAnd(
        Fn.conditionEquals(p.WebAclArn.valueAsString, ''),
        Fn.conditionEquals(Aws.REGION, 'us-east-1'),
      ),
    }),
  };
}
