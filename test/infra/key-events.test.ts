// The two EventBridge rules on the log key (infra/stack/signing.ts), their synthesized patterns
// matched against CloudTrail events shaped as KMS records them. EventBridge is AWS-only, so
// `standInEventBridgeMatch` is a thin stand-in for its pattern matching, for the forms these
// patterns use (value lists, anything-but, nested fields, arrays of objects in the event,
// $or), with EventBridge's rule that a missing field matches nothing, anything-but included.
// It shows what the $or is for: a role session carries sessionContext.sessionIssuer, an IAM
// user or the root user does not, so anything-but on the issuer alone would miss them.
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { SteleStack } from '../../infra/stack.js';
import type { JsonObject } from '../helpers/json.js';
import { resolve } from './iam-eval.js';

type Json = JsonObject;

const ACCOUNT = '111122223333';
const KEY = `arn:aws:kms:us-east-1:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;
const OTHER_KEY = `arn:aws:kms:us-east-1:${ACCOUNT}:key/99999999-12ab-34cd-56ef-1234567890ab`;
const SEQUENCER = `arn:aws:iam::${ACCOUNT}:role/stele-sequencer`;

/** EventBridge's matching of an event pattern, for the forms used here. */
function standInEventBridgeMatch(pattern: Json, event: unknown): boolean {
  if (event === undefined || event === null) return false;
  for (const [key, want] of Object.entries(pattern)) {
    if (key === '$or') {
      if (!(want as Json[]).some((p) => standInEventBridgeMatch(p, event))) return false;
      continue;
    }
    const value = (event as Json)[key];
    if (value === undefined) return false;
    if (Array.isArray(want)) {
      const values = Array.isArray(value) ? value : [value];
      const leaf = (v: unknown) =>
        want.some((w) =>
          typeof w === 'object' && w !== null && 'anything-but' in w
            ? ![w['anything-but']].flat().includes(v)
            : w === v,
        );
      if (!values.some(leaf)) return false;
    } else if (Array.isArray(value)) {
      if (!value.some((v) => standInEventBridgeMatch(want as Json, v))) return false;
    } else if (!standInEventBridgeMatch(want as Json, value)) return false;
  }
  return true;
}

/** A CloudTrail record of a KMS call, as EventBridge delivers it. */
function kmsEvent(eventName: string, userIdentity: Json, keyArn = KEY): Json {
  return {
    source: 'aws.kms',
    'detail-type': 'AWS API Call via CloudTrail',
    detail: {
      eventSource: 'kms.amazonaws.com',
      eventName,
      userIdentity,
      resources: [{ accountId: ACCOUNT, type: 'AWS::KMS::Key', ARN: keyArn }],
    },
  };
}
const roleSession = (role: string): Json => ({
  type: 'AssumedRole',
  arn: `arn:aws:sts::${ACCOUNT}:assumed-role/${role.split('/').pop()}/session`,
  sessionContext: { sessionIssuer: { type: 'Role', arn: role } },
});

let foreignSign: Json;
let lifecycle: Json;

beforeAll(() => {
  const resources = Template.fromStack(new SteleStack(new App(), 'KeyEvents')).toJSON().Resources as Record<
    string,
    Json
  >;
  const id = (prefix: string, type: string) =>
    Object.keys(resources).find((k) => k.startsWith(prefix) && resources[k]!.Type === type)!;
  const refs = {
    [`${id('LogKey', 'AWS::KMS::Key')}.Arn`]: KEY,
    [`${id('SequencerTaskRole', 'AWS::IAM::Role')}.Arn`]: SEQUENCER,
  };
  foreignSign = resolve(resources[id('ForeignSignRule', 'AWS::Events::Rule')]!.Properties.EventPattern, refs) as Json;
  lifecycle = resolve(resources[id('KeyLifecycleRule', 'AWS::Events::Rule')]!.Properties.EventPattern, refs) as Json;
}, 120_000);

describe('alerts on the log key (CloudTrail through EventBridge)', () => {
  it("a Sign by the sequencer's role is quiet; by any other role, an IAM user or root it alerts", () => {
    expect(standInEventBridgeMatch(foreignSign, kmsEvent('Sign', roleSession(SEQUENCER)))).toBe(false);
    for (const who of [
      roleSession(`arn:aws:iam::${ACCOUNT}:role/Admin`),
      roleSession(`arn:aws:iam::${ACCOUNT}:role/stele-api`),
      { type: 'IAMUser', arn: `arn:aws:iam::${ACCOUNT}:user/mallory` },
      { type: 'Root', arn: `arn:aws:iam::${ACCOUNT}:root` },
    ])
      expect(standInEventBridgeMatch(foreignSign, kmsEvent('Sign', who)), JSON.stringify(who)).toBe(true);
    // Another key, or another call on this key, is not this rule's business.
    const admin = roleSession(`arn:aws:iam::${ACCOUNT}:role/Admin`);
    expect(standInEventBridgeMatch(foreignSign, kmsEvent('Sign', admin, OTHER_KEY))).toBe(false);
    expect(standInEventBridgeMatch(foreignSign, kmsEvent('GetPublicKey', admin))).toBe(false);
  });

  it('scheduling deletion, disabling, a new key policy or a grant on the log key alerts, whoever does it', () => {
    const admin = roleSession(`arn:aws:iam::${ACCOUNT}:role/Admin`);
    for (const name of ['ScheduleKeyDeletion', 'DisableKey', 'PutKeyPolicy', 'CreateGrant']) {
      expect(standInEventBridgeMatch(lifecycle, kmsEvent(name, admin)), name).toBe(true);
      expect(standInEventBridgeMatch(lifecycle, kmsEvent(name, roleSession(SEQUENCER))), name).toBe(true);
      expect(standInEventBridgeMatch(lifecycle, kmsEvent(name, admin, OTHER_KEY)), name).toBe(false);
    }
    expect(standInEventBridgeMatch(lifecycle, kmsEvent('EnableKey', admin))).toBe(false);
    expect(standInEventBridgeMatch(lifecycle, kmsEvent('Sign', admin))).toBe(false);
  });

  it('the stand-in matcher itself: anything-but on the issuer alone would miss an IAM user (why the rule has $or)', () => {
    const issuerOnly = {
      detail: { userIdentity: { sessionContext: { sessionIssuer: { arn: [{ 'anything-but': SEQUENCER }] } } } },
    };
    const user = { type: 'IAMUser', arn: `arn:aws:iam::${ACCOUNT}:user/mallory` };
    expect(standInEventBridgeMatch(issuerOnly, kmsEvent('Sign', user))).toBe(false);
    expect(standInEventBridgeMatch(issuerOnly, kmsEvent('Sign', roleSession(`arn:aws:iam::${ACCOUNT}:role/x`)))).toBe(
      true,
    );
  });
});
