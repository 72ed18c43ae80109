// The origin-verify secret's rotation function (infra/origin-secret-rotation.ts), the very
// text the stack deploys, run through Secrets Manager's four steps. Secrets Manager, ELBv2
// and CloudFront are AWS-only, so each is a thin in-memory stand-in (the `standIn*` classes
// below) that keeps the state those steps read and change: secret versions and their
// stages, listener rules' conditions, the distribution's origin headers with its ETag. It
// shows the order that drops no request: the rules accept the current AND the new value
// before CloudFront sends the new one, path conditions are kept, and only finishSecret makes
// the new value current; a step repeated by Secrets Manager changes nothing more.
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { ROTATION_SCRIPT } from '../../infra/origin-secret-rotation.js';

const HEADER = 'X-Stele-Origin-Verify';
type Command = { name: string; input: Record<string, unknown> };
type Condition = {
  Field: string;
  HttpHeaderConfig?: { HttpHeaderName: string; Values: string[] };
  PathPatternConfig?: { Values: string[] };
  Values?: string[];
};

/** Stand-in for Secrets Manager: versions with their stages. */
class StandInSecretsManager {
  versions = new Map<string, { value: string; stages: string[] }>([['v0', { value: 'old', stages: ['AWSCURRENT'] }]]);
  send({ name, input }: Command): unknown {
    const byStage = (stage: string) => [...this.versions].find(([, v]) => v.stages.includes(stage));
    switch (name) {
      case 'GetSecretValueCommand': {
        const v = input.VersionId
          ? this.versions.get(input.VersionId as string)
          : byStage(input.VersionStage as string)?.[1];
        if (!v || (input.VersionStage && !v.stages.includes(input.VersionStage as string)))
          throw Object.assign(new Error('not found'), { name: 'ResourceNotFoundException' });
        return { SecretString: v.value };
      }
      case 'GetRandomPasswordCommand':
        return { RandomPassword: `new-${this.versions.size}` };
      case 'PutSecretValueCommand':
        this.versions.set(input.ClientRequestToken as string, {
          value: input.SecretString as string,
          stages: input.VersionStages as string[],
        });
        return {};
      case 'DescribeSecretCommand':
        return { VersionIdsToStages: Object.fromEntries([...this.versions].map(([id, v]) => [id, v.stages])) };
      case 'UpdateSecretVersionStageCommand': {
        const from = this.versions.get(input.RemoveFromVersionId as string)!;
        from.stages = from.stages.filter((s) => s !== input.VersionStage).concat('AWSPREVIOUS');
        const to = this.versions.get(input.MoveToVersionId as string)!;
        to.stages = [...to.stages.filter((s) => s !== 'AWSPENDING'), input.VersionStage as string];
        return {};
      }
    }
    throw new Error(`stand-in Secrets Manager: ${name}`);
  }
}

/** Stand-in for ELBv2: listener rules and their conditions (DescribeRules returns legacy Values too, as ELB does). */
class StandInElb {
  rules = new Map<string, Condition[]>();
  constructor(arns: string[]) {
    for (const [i, arn] of arns.entries())
      this.rules.set(arn, [
        { Field: 'http-header', HttpHeaderConfig: { HttpHeaderName: HEADER, Values: ['old'] } },
        { Field: 'path-pattern', PathPatternConfig: { Values: [`/path${i}`] }, Values: [`/path${i}`] },
      ]);
  }
  send({ name, input }: Command): unknown {
    if (name === 'DescribeRulesCommand')
      return {
        Rules: (input.RuleArns as string[]).map((RuleArn) => ({
          RuleArn,
          Conditions: structuredClone(this.rules.get(RuleArn)),
        })),
      };
    if (name === 'ModifyRuleCommand') {
      const conditions = input.Conditions as Condition[];
      for (const c of conditions)
        if (c.Values && c.PathPatternConfig) throw new Error('ValidationError: Values and PathPatternConfig both set');
      this.rules.set(input.RuleArn as string, conditions);
      return {};
    }
    throw new Error(`stand-in ELBv2: ${name}`);
  }
}

/** Stand-in for CloudFront: one distribution's config, updated only with its current ETag. */
class StandInCloudFront {
  etag = 'E1';
  config = {
    Origins: {
      Items: [
        { Id: 'tiles' },
        { Id: 'api', CustomHeaders: { Quantity: 1, Items: [{ HeaderName: HEADER, HeaderValue: 'old' }] } },
      ],
    },
  };
  send({ name, input }: Command): unknown {
    if (name === 'GetDistributionConfigCommand')
      return { ETag: this.etag, DistributionConfig: structuredClone(this.config) };
    if (name === 'UpdateDistributionCommand') {
      if (input.IfMatch !== this.etag) throw new Error('PreconditionFailed');
      this.config = input.DistributionConfig as typeof this.config;
      this.etag = `E${Number(this.etag.slice(1)) + 1}`;
      return {};
    }
    throw new Error(`stand-in CloudFront: ${name}`);
  }
}

/** The SDK modules the script requires, each command class naming itself. */
function sdk(clients: Record<string, { send(c: Command): unknown }>) {
  const commands = (names: string[]) =>
    Object.fromEntries(
      names.map((name) => [
        name,
        class {
          name = name;
          constructor(public input: Record<string, unknown>) {}
        },
      ]),
    );
  const client = (target: { send(c: Command): unknown }) =>
    class {
      send = async (c: Command) => target.send(c);
    };
  return {
    '@aws-sdk/client-secrets-manager': {
      SecretsManagerClient: client(clients.sm!),
      ...commands([
        'GetSecretValueCommand',
        'GetRandomPasswordCommand',
        'PutSecretValueCommand',
        'DescribeSecretCommand',
        'UpdateSecretVersionStageCommand',
      ]),
    },
    '@aws-sdk/client-elastic-load-balancing-v2': {
      ElasticLoadBalancingV2Client: client(clients.elb!),
      ...commands(['DescribeRulesCommand', 'ModifyRuleCommand']),
    },
    '@aws-sdk/client-cloudfront': {
      CloudFrontClient: client(clients.cf!),
      ...commands(['GetDistributionConfigCommand', 'UpdateDistributionCommand']),
    },
  } as Record<string, unknown>;
}

describe('the origin-verify secret rotation', () => {
  it('accepts old and new at the ALB before CloudFront switches; finish makes the new value current', async () => {
    const arns = ['arn:rule/seq', 'arn:rule/api'];
    const sm = new StandInSecretsManager();
    const elb = new StandInElb(arns);
    const cf = new StandInCloudFront();
    const modules = sdk({ sm, elb, cf });
    const module = { exports: {} as { handler?: (e: Record<string, string>) => Promise<void> } };
    runInNewContext(ROTATION_SCRIPT, {
      module,
      exports: module.exports,
      require: (m: string) => modules[m],
      process: { env: { HEADER_NAME: HEADER, RULE_ARNS: arns.join(','), DISTRIBUTION_ID: 'D1' } },
      Object,
    });
    const step = (Step: string) => module.exports.handler!({ SecretId: 'secret', ClientRequestToken: 'v1', Step });
    const headerValues = () =>
      arns.map((a) => elb.rules.get(a)!.find((c) => c.Field === 'http-header')!.HttpHeaderConfig!.Values);
    const sent = () => cf.config.Origins.Items[1]!.CustomHeaders!.Items[0]!.HeaderValue;

    await step('createSecret');
    await step('createSecret'); // repeated by Secrets Manager: the pending value stays
    expect(sm.versions.get('v1')).toEqual({ value: 'new-1', stages: ['AWSPENDING'] });
    expect(headerValues()).toEqual([['old'], ['old']]);
    expect(sent()).toBe('old');

    await step('setSecret');
    expect(headerValues()).toEqual([
      ['old', 'new-1'],
      ['old', 'new-1'],
    ]);
    expect(arns.map((a) => elb.rules.get(a)!.find((c) => c.Field === 'path-pattern'))).toEqual([
      { Field: 'path-pattern', PathPatternConfig: { Values: ['/path0'] } },
      { Field: 'path-pattern', PathPatternConfig: { Values: ['/path1'] } },
    ]);
    expect(sent()).toBe('new-1');
    expect(cf.config.Origins.Items[0]).toEqual({ Id: 'tiles' });
    expect(sm.versions.get('v0')!.stages).toEqual(['AWSCURRENT']); // not yet current

    await step('testSecret');
    await step('finishSecret');
    expect(sm.versions.get('v1')!.stages).toEqual(['AWSCURRENT']);
    expect(sm.versions.get('v0')!.stages).toEqual(['AWSPREVIOUS']);
    await step('finishSecret'); // repeated: nothing moves
    expect(sm.versions.get('v1')!.stages).toEqual(['AWSCURRENT']);
  });
});
