// A small evaluator of IAM policy statements as AWS evaluates them within one account: any
// matching Deny wins; otherwise an Allow in the identity policy or in the resource policy
// grants; otherwise the request is implicitly denied. It knows the statement elements and the
// condition operators the Stele templates use and throws on any other, so a template that
// grows a construct it cannot judge fails the test instead of being misjudged.
// Templates are resolved first: Ref / Fn::GetAtt / Fn::Join / Fn::Select / Fn::Split with
// the values a test gives (`refs`), everything else left as a `<token>`.
import type { JsonObject } from '../helpers/json.js';

type Json = JsonObject;

export interface Statement {
  Sid?: string;
  Effect: 'Allow' | 'Deny';
  Principal?: '*' | { AWS?: string | string[]; Service?: string | string[] };
  Action?: string | string[];
  NotAction?: string | string[];
  Resource?: string | string[];
  NotResource?: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

export interface Request {
  /** The calling principal: a role ARN (its sessions are evaluated as the role, aws:PrincipalArn). */
  principalArn: string;
  action: string;
  resource: string;
  /** Condition keys present in the request (e.g. s3:if-none-match), with their values. */
  keys?: Record<string, string>;
}

export type Decision = 'allow' | 'explicit-deny' | 'implicit-deny';

/** Replaces the template's intrinsic functions with test values (`refs`: logical id or `id.Attr` → value). */
export function resolve(value: unknown, refs: Record<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => resolve(v, refs));
  if (value === null || typeof value !== 'object') return value;
  const o = value as Json;
  if ('Ref' in o) return refs[o.Ref] ?? `<${o.Ref}>`;
  if ('Fn::GetAtt' in o) {
    const [id, attr] = o['Fn::GetAtt'] as [string, string];
    return refs[`${id}.${attr}`] ?? `<${id}.${attr}>`;
  }
  if ('Fn::Join' in o) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return (resolve(parts, refs) as unknown[]).map(String).join(sep);
  }
  if ('Fn::Split' in o) {
    const [sep, s] = o['Fn::Split'] as [string, unknown];
    return String(resolve(s, refs)).split(sep);
  }
  if ('Fn::Select' in o) {
    const [i, list] = o['Fn::Select'] as [number, unknown];
    return (resolve(list, refs) as unknown[])[Number(i)];
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, resolve(v, refs)]));
}

const list = (v: string | string[] | undefined): string[] => (v === undefined ? [] : [v].flat());

/** IAM wildcard match: `*` any run of characters (also `/`), `?` one character. */
export function wildcard(pattern: string, value: string, ignoreCase = false): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`, ignoreCase ? 'i' : '').test(value);
}

function principalMatches(s: Statement, arn: string): boolean {
  if (s.Principal === undefined) return true; // an identity policy: its own principal
  if (s.Principal === '*') return true;
  const aws = list(s.Principal.AWS);
  return aws.some((p) => p === '*' || p === arn || (p.endsWith(':root') && arn.split(':')[4] === p.split(':')[4]));
}

function conditionsMatch(cond: Statement['Condition'], keys: Record<string, string>): boolean {
  for (const [op, entries] of Object.entries(cond ?? {})) {
    for (const [key, expected] of Object.entries(entries)) {
      const values = list(expected);
      const actual = keys[key];
      const ifExists = op.endsWith('IfExists');
      const base = ifExists ? op.slice(0, -'IfExists'.length) : op;
      if (ifExists && actual === undefined && base !== 'Null') continue;
      let ok: boolean;
      switch (base) {
        case 'Null':
          ok = values.includes(String(actual === undefined));
          break;
        case 'Bool':
        case 'StringEquals':
        case 'ArnEquals':
          ok = actual !== undefined && values.includes(actual);
          break;
        case 'StringNotEquals':
        case 'ArnNotEquals':
          ok = actual === undefined || !values.includes(actual);
          break;
        case 'StringLike':
        case 'ArnLike':
          ok = actual !== undefined && values.some((v) => wildcard(v, actual));
          break;
        default:
          throw new Error(`iam-eval: condition operator ${op} is not implemented`);
      }
      if (!ok) return false;
    }
  }
  return true;
}

function matches(s: Statement, req: Request): boolean {
  for (const k of Object.keys(s))
    if (!['Sid', 'Effect', 'Principal', 'Action', 'NotAction', 'Resource', 'NotResource', 'Condition'].includes(k))
      throw new Error(`iam-eval: statement element ${k} is not implemented`);
  if (!principalMatches(s, req.principalArn)) return false;
  if (s.Action !== undefined && !list(s.Action).some((a) => wildcard(a, req.action, true))) return false;
  if (s.NotAction !== undefined && list(s.NotAction).some((a) => wildcard(a, req.action, true))) return false;
  if (s.Resource !== undefined && !list(s.Resource).some((r) => wildcard(r, req.resource))) return false;
  if (s.NotResource !== undefined && list(s.NotResource).some((r) => wildcard(r, req.resource))) return false;
  return conditionsMatch(s.Condition, { 'aws:PrincipalArn': req.principalArn, ...req.keys });
}

/** The decision for `req` under the caller's identity statements and the resource's policy. */
export function evaluate(identity: Statement[], resourcePolicy: Statement[], req: Request): Decision {
  const all = [...identity.map((s) => ({ ...s, Principal: undefined })), ...resourcePolicy];
  if (all.some((s) => s.Effect === 'Deny' && matches(s, req))) return 'explicit-deny';
  if (all.some((s) => s.Effect === 'Allow' && matches(s, req))) return 'allow';
  return 'implicit-deny';
}
