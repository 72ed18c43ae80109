// The rotation function of the origin-verify secret (Secrets Manager calls it with the four
// rotation steps). CloudFront sends the secret in X-Stele-Origin-Verify; the load balancer's
// rules forward only requests carrying it. Rotation never drops a request:
//   createSecret  a new random value, staged AWSPENDING;
//   setSecret     the load balancer rules accept the current AND the pending value, then the
//                 distribution's API origin sends the pending one (edges switch over minutes);
//   finishSecret  the pending value becomes AWSCURRENT; the rules keep accepting the previous
//                 one until the next rotation replaces it.
// The template resolves the secret at deploy time ({{resolve:secretsmanager:…}}), so a later
// deployment sends and accepts the value rotation left current: no drift to undo.
// Runs on AWS only (Secrets Manager, ELBv2, CloudFront APIs); the tests check its wiring.
export const ROTATION_SCRIPT = `
const sm = new (require('@aws-sdk/client-secrets-manager').SecretsManagerClient)({});
const SM = require('@aws-sdk/client-secrets-manager');
const ELB = require('@aws-sdk/client-elastic-load-balancing-v2');
const CF = require('@aws-sdk/client-cloudfront');
const elb = new ELB.ElasticLoadBalancingV2Client({});
const cf = new CF.CloudFrontClient({});
const HEADER = process.env.HEADER_NAME;
const value = async (SecretId, stage, VersionId) =>
  (await sm.send(new SM.GetSecretValueCommand({ SecretId, VersionStage: stage, VersionId }))).SecretString;
exports.handler = async ({ SecretId, ClientRequestToken: token, Step }) => {
  if (Step === 'createSecret') {
    try { await value(SecretId, 'AWSPENDING', token); return; } catch {}
    const p = await sm.send(new SM.GetRandomPasswordCommand({ PasswordLength: 48, ExcludePunctuation: true }));
    await sm.send(new SM.PutSecretValueCommand({ SecretId, ClientRequestToken: token, SecretString: p.RandomPassword, VersionStages: ['AWSPENDING'] }));
  } else if (Step === 'setSecret') {
    const current = await value(SecretId, 'AWSCURRENT');
    const pending = await value(SecretId, 'AWSPENDING', token);
    const arns = process.env.RULE_ARNS.split(',');
    const { Rules } = await elb.send(new ELB.DescribeRulesCommand({ RuleArns: arns }));
    for (const rule of Rules) {
      const Conditions = rule.Conditions.map((c) =>
        c.Field === 'http-header' && c.HttpHeaderConfig.HttpHeaderName === HEADER
          ? { Field: c.Field, HttpHeaderConfig: { HttpHeaderName: HEADER, Values: [current, pending] } }
          : { Field: c.Field, PathPatternConfig: c.PathPatternConfig });
      await elb.send(new ELB.ModifyRuleCommand({ RuleArn: rule.RuleArn, Conditions }));
    }
    const Id = process.env.DISTRIBUTION_ID;
    const got = await cf.send(new CF.GetDistributionConfigCommand({ Id }));
    for (const o of got.DistributionConfig.Origins.Items)
      for (const h of (o.CustomHeaders && o.CustomHeaders.Items) || []) if (h.HeaderName === HEADER) h.HeaderValue = pending;
    await cf.send(new CF.UpdateDistributionCommand({ Id, IfMatch: got.ETag, DistributionConfig: got.DistributionConfig }));
  } else if (Step === 'finishSecret') {
    const meta = await sm.send(new SM.DescribeSecretCommand({ SecretId }));
    const current = Object.keys(meta.VersionIdsToStages).find((v) => meta.VersionIdsToStages[v].includes('AWSCURRENT'));
    if (current === token) return;
    await sm.send(new SM.UpdateSecretVersionStageCommand({ SecretId, VersionStage: 'AWSCURRENT', MoveToVersionId: token, RemoveFromVersionId: current }));
  }
};
`;
