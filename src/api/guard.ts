// Guards for the anchor route (spec §4.1 rule 2, §5.3): bearer-token authentication and
// per-client rate limiting. Both are off in demo mode and on in production mode.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { ApiError } from './errors.js';

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
    const m = /^Bearer ([^\s]+)$/.exec(ctx.get('Authorization'));
    if (!m) return null;
    const h = digest(m[1]!);
    let found: AnchorClient | null = null;
    for (const g of hashed) if (timingSafeEqual(g.hash, h)) found = { client: g.name, ...(g.tenant ? { tenant: g.tenant } : {}) };
    return found;
  };
}

export interface GuardOptions {
  /** Authentication; undefined lets everyone anchor (demo mode). */
  readonly authenticate?: Authenticator;
  /** Anchors per second per client; undefined disables rate limiting. */
  readonly ratePerSecond?: number;
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
        throw new ApiError(401, 'unauthorized', 'a valid bearer token is required to anchor', { 'WWW-Authenticate': 'Bearer realm="stele"' });
      }
      who = found;
    }
    if (limiter) {
      try {
        await limiter.consume(who.client);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        throw new ApiError(429, 'rate_limited', 'too many anchors; slow down', { 'Retry-After': String(Math.max(1, Math.ceil(e.msBeforeNext / 1000))) });
      }
    }
    ctx.state.client = who.client;
    ctx.state.tenant = who.tenant;
    await next();
  };
}
