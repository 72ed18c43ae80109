// Guards for the anchor route (docs/interface.md §4.1 rule 2, §5.3): bearer-token authentication,
// per-client rate limiting, the tenant an anchor is recorded under, and the anchor policy.
// Authentication and rate limits are off in demo mode and on in production mode.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { AnchorRequest } from '../core/anchor.js';
import { ApiError } from '../http/errors.js';
import type { AnchorAdmission } from './ledger.js';

export interface AnchorClient {
  /** Who is calling: the token's name, or the remote address when unauthenticated. */
  readonly client: string;
  /** Tenant recorded in the entries this client anchors. */
  readonly tenant?: string;
}

/** The authentication hook: resolves a request to a client, or null to refuse it. */
export type Authenticator = (ctx: Context) => Promise<AnchorClient | null>;

export interface TokenGrant {
  readonly name: string;
  readonly token: string;
  readonly tenant?: string;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Parses `name=token[@tenant],…` (STELE_ANCHOR_TOKENS); tokens are never logged. */
export function parseTokenGrants(spec: string): TokenGrant[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const m = /^([A-Za-z0-9._-]{1,64})=([^@\s]{16,512})(?:@([A-Za-z0-9._-]{1,256}))?$/.exec(item);
      if (!m) throw new Error('anchor tokens must be name=token[@tenant] with tokens of at least 16 characters');
      return { name: m[1]!, token: m[2]!, ...(m[3] ? { tenant: m[3] } : {}) };
    });
}

/** Bearer-token authentication in constant time per configured token. */
export function bearerTokens(grants: readonly TokenGrant[]): Authenticator {
  const hashed = grants.map((g) => ({ ...g, hash: digest(g.token) }));
  return async (ctx) => {
    // RFC 7235 §2.1: the scheme is case-insensitive.
    const m = /^bearer +(\S+)$/i.exec(ctx.get('Authorization'));
    if (!m) return null;
    const h = digest(m[1]!);
    let found: AnchorClient | null = null;
    for (const g of hashed)
      if (timingSafeEqual(g.hash, h)) found = { client: g.name, ...(g.tenant ? { tenant: g.tenant } : {}) };
    return found;
  };
}

/**
 * Who decides the tenant an entry records. `token` (production): the token's tenant, and a
 * client may name no other (a token bound to no tenant writes none). `client` (demo): the
 * tenant the client names, unless its token is bound to one.
 */
export type TenantRule = 'token' | 'client';

/** Decides one anchor (the anchor policy): allowed or not, with the policies that decided it. */
export type AnchorDecider = (
  who: AnchorClient,
  request: AnchorRequest,
) => { readonly allowed: boolean; readonly reasons: readonly string[]; readonly policyVersion: string };

export interface GuardOptions {
  /** Authentication; undefined lets everyone anchor (demo mode). */
  readonly authenticate?: Authenticator;
  /** Anchors per second per client; undefined disables rate limiting. */
  readonly ratePerSecond?: number;
  /** Default `client`. */
  readonly tenants?: TenantRule;
  /** The anchor policy; undefined admits every valid anchor (demo mode). */
  readonly decide?: AnchorDecider;
}

/** The request with the tenant `rule` records for `who`; a tenant the client may not use is a 403. */
export function withTenant(request: AnchorRequest, who: AnchorClient, rule: TenantRule): AnchorRequest {
  const sent = request.tenant;
  const bound = who.tenant;
  if (bound !== undefined) {
    if (sent !== undefined && sent !== bound) {
      throw new ApiError(
        403,
        'tenant_mismatch',
        `token ${who.client} is bound to tenant ${JSON.stringify(bound)} and cannot write tenant ${JSON.stringify(sent)}`,
      );
    }
    return sent === bound ? request : { ...request, tenant: bound };
  }
  if (sent !== undefined && rule === 'token') {
    throw new ApiError(
      403,
      'tenant_not_granted',
      `token ${who.client} is bound to no tenant and cannot write tenant ${JSON.stringify(sent)} (bind it on the server: ${who.client}=<secret>@<tenant> in STELE_ANCHOR_TOKENS; or anchor without a tenant)`,
    );
  }
  return request;
}

/** What the anchor route does with a validated request before submitting it: tenant, then policy. */
export function anchorAdmission(options: GuardOptions, onDecision?: (allowed: boolean) => void): AnchorAdmission {
  const rule = options.tenants ?? 'client';
  const decide = options.decide;
  return (ctx, request) => {
    const who = ctx.state.anchorClient as AnchorClient;
    const admitted = withTenant(request, who, rule);
    if (!decide) return admitted;
    const d = decide(who, admitted);
    onDecision?.(d.allowed);
    if (!d.allowed) {
      const why = d.reasons.length > 0 ? `refused by ${d.reasons.join(', ')}` : 'no policy permits it';
      throw new ApiError(
        403,
        'anchor_denied',
        `the anchor policy does not allow this anchor (${why})`,
        {},
        { reasons: d.reasons, policyVersion: d.policyVersion },
      );
    }
    return admitted;
  };
}

export function anchorGuard(options: GuardOptions) {
  const limiter = options.ratePerSecond
    ? new RateLimiterMemory({ points: options.ratePerSecond, duration: 1 })
    : undefined;
  return async (ctx: Context, next: Next): Promise<void> => {
    let who: AnchorClient = { client: ctx.ip };
    if (options.authenticate) {
      const found = await options.authenticate(ctx);
      if (!found) {
        throw new ApiError(
          401,
          'unauthorized',
          'a valid bearer token is required to anchor (Authorization: Bearer <token>; the stele CLI sends STELE_LEDGER_TOKEN)',
          {
            'WWW-Authenticate': 'Bearer realm="stele"',
          },
        );
      }
      who = found;
    }
    if (limiter) {
      try {
        await limiter.consume(who.client);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        throw new ApiError(429, 'rate_limited', 'too many anchors; slow down', {
          'Retry-After': String(Math.max(1, Math.ceil(e.msBeforeNext / 1000))),
        });
      }
    }
    ctx.state.client = who.client;
    ctx.state.anchorClient = who;
    await next();
  };
}
