// Authentication (docs/interface.md §5): OIDC access tokens (JWT, RFC 9068) verified with jose against
// the issuer's discovery document and JWKS, then authorised by role with an MFA rule.
//
// - Discovery: <issuer>/.well-known/openid-configuration is fetched once (retried after a
//   failure with a short back-off); its `issuer` must equal the configured issuer exactly
//   and its `jwks_uri` names the key set.
// - JWKS: jose's createRemoteJWKSet caches the key set for `jwks_cache_max_age_s` and
//   refetches it early when a token names an unknown `kid` (at most once per
//   `jwks_cooldown_s`), so an IdP key rotation is picked up without a restart and a key the
//   IdP has withdrawn stops verifying once the cache has been refreshed.
// - Checks: signature by a JWKS key; `alg` in the allowed list (asymmetric only, never
//   `none`); `typ` (at+jwt by default); `iss`; `aud`; `exp` (required); `nbf`; `sub`
//   (required); all times with `clock_tolerance_s`.
// - Verified-token cache: a token that verified is remembered by the SHA-256 of its exact
//   bytes for at most `token_cache_ttl_s` (≤ the JWKS cache age), only while the JWKS it was
//   verified against is the current, fresh one; expiry and not-before are re-checked on
//   every use. A changed byte is a different token, so tampering always misses the cache.
// - Roles come from a configurable claim; MFA from `amr` / `acr` against configured values.
import { createHash } from 'node:crypto';
import {
  type JWTPayload,
  type JWTVerifyResult,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwksCache,
  jwtVerify,
} from 'jose';
import { LRUCache } from 'lru-cache';
import { checkLabel } from '../core/labels.js';
import type { Operation, OidcSettings } from './config.js';
import { ControlError } from './errors.js';
import { UnreachableError, asUnreachable } from '../store/unreachable.js';

/** Who is calling, as the verified token says. */
export interface Caller {
  readonly sub: string;
  readonly issuer: string;
  readonly clientId?: string;
  readonly roles: readonly string[];
  /** True when amr/acr shows phishing-resistant MFA. */
  readonly mfa: boolean;
  readonly tenant?: string;
  /** Token expiry, unix seconds. */
  readonly exp: number;
}

/** A 401 with the RFC 6750 challenge; `reason` is recorded in the authentication-failure record. */
export class AuthenticationError extends ControlError {
  override name = 'AuthenticationError';
  constructor(
    readonly reason: string,
    message: string,
  ) {
    const desc = message.replace(/["\\]/g, '');
    super(
      401,
      reason === 'missing_token' ? 'missing_token' : 'invalid_token',
      message,
      { reason },
      {
        'WWW-Authenticate':
          reason === 'missing_token'
            ? 'Bearer realm="stele-control"'
            : `Bearer realm="stele-control", error="invalid_token", error_description="${desc}"`,
      },
    );
  }
}

/** A 403 for an operation the caller's roles do not grant, or that needs MFA the token lacks. */
export class AuthorizationError extends ControlError {
  override name = 'AuthorizationError';
  constructor(
    readonly reason: 'role_not_permitted' | 'mfa_required',
    readonly operation: Operation,
    message: string,
  ) {
    super(
      403,
      reason === 'mfa_required' ? 'mfa_required' : 'forbidden',
      message,
      { reason, operation },
      reason === 'mfa_required'
        ? {
            'WWW-Authenticate':
              'Bearer realm="stele-control", error="insufficient_user_authentication", error_description="phishing-resistant MFA required"',
          }
        : { 'WWW-Authenticate': 'Bearer realm="stele-control", error="insufficient_scope"' },
    );
  }
}

/** Largest bearer token accepted, in bytes. */
export const MAX_TOKEN_BYTES = 8 * 1024;

interface Discovered {
  readonly jwks: ReturnType<typeof createRemoteJWKSet>;
  /** jose writes the time of each successful JWKS fetch here (its `jwksCache` hook). */
  readonly jwksState: { uat?: number };
}

interface CachedToken {
  readonly caller: Caller;
  readonly nbf?: number;
  readonly verifiedAt: number;
  /** JWKS fetch time the token was verified against. */
  readonly jwksUat: number | undefined;
}

export interface AuthStats {
  verifications: number;
  cacheHits: number;
  failures: number;
}

/** The setting that names the issuer, for messages. */
function issuerSetting(s: OidcSettings): string {
  return s.issuerSetting ?? '[control.oidc] issuer';
}

export class OidcAuthenticator {
  readonly stats: AuthStats = { verifications: 0, cacheHits: 0, failures: 0 };
  private discovered: Promise<Discovered> | undefined;
  private discoveryFailedAt = 0;
  private readonly cache: LRUCache<string, CachedToken> | undefined;

  constructor(
    private readonly s: OidcSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.cache = s.tokenCacheSize > 0 ? new LRUCache({ max: s.tokenCacheSize }) : undefined;
  }

  /** Fetches the discovery document and sets up the JWKS (once; retried 5 s after a failure). */
  private discover(): Promise<Discovered> {
    if (this.discovered) return this.discovered;
    if (this.now() - this.discoveryFailedAt < 5_000) {
      return Promise.reject(
        new ControlError(
          503,
          'idp_unavailable',
          'the identity provider could not be reached; retry later',
          {},
          { 'Retry-After': '5' },
        ),
      );
    }
    const p = (async (): Promise<Discovered> => {
      const url = `${this.s.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
      let doc: { issuer?: unknown; jwks_uri?: unknown };
      try {
        const res = await fetch(url, {
          signal: AbortSignal.timeout(this.s.httpTimeoutMs),
          headers: { accept: 'application/json' },
          redirect: 'error',
        });
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        doc = (await res.json()) as typeof doc;
      } catch (e) {
        // Not reached at all: which issuer, the setting naming it and why (src/store/unreachable.ts).
        const unreachable = asUnreachable(e, `the OIDC identity provider ${url}`, issuerSetting(this.s));
        const err = new ControlError(
          503,
          'idp_unavailable',
          unreachable instanceof UnreachableError
            ? unreachable.message
            : `the identity provider's discovery document could not be fetched (${(e as Error).message})`,
          {},
          { 'Retry-After': '5' },
        );
        if (unreachable instanceof UnreachableError) err.cause = unreachable;
        throw err;
      }
      if (doc.issuer !== this.s.issuer) {
        throw new ControlError(
          503,
          'idp_misconfigured',
          `the discovery document names issuer ${JSON.stringify(doc.issuer)}, not the configured ${JSON.stringify(this.s.issuer)}`,
        );
      }
      let jwksUri: URL;
      try {
        jwksUri = new URL(String(doc.jwks_uri));
      } catch {
        throw new ControlError(503, 'idp_misconfigured', 'the discovery document has no valid jwks_uri');
      }
      const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(jwksUri.hostname);
      if (jwksUri.protocol !== 'https:' && !(jwksUri.protocol === 'http:' && loopback)) {
        throw new ControlError(503, 'idp_misconfigured', 'the jwks_uri must be https');
      }
      const jwksState: { uat?: number } = {};
      const jwks = createRemoteJWKSet(jwksUri, {
        cacheMaxAge: this.s.jwksCacheMaxAgeS * 1000,
        cooldownDuration: this.s.jwksCooldownS * 1000,
        timeoutDuration: this.s.httpTimeoutMs,
        // jose records each successful fetch's time in this object.
        [jwksCache]: jwksState as Record<string, never>,
      });
      return { jwks, jwksState };
    })();
    this.discovered = p;
    p.catch(() => {
      this.discovered = undefined;
      this.discoveryFailedAt = this.now();
    });
    return p;
  }

  /**
   * Fetches the discovery document now, at start: an issuer that cannot be reached is an
   * UnreachableError (one line; the CLI exits 3). Any other failure (an HTTP error, a
   * discovery document naming another issuer) is returned, for a warning: a request
   * retries the discovery and answers 503 with it.
   */
  async checkReachable(): Promise<string | null> {
    try {
      await this.discover();
      return null;
    } catch (e) {
      if (e instanceof ControlError && e.cause instanceof UnreachableError) throw e.cause;
      return (e as Error).message;
    }
  }

  /** Verifies the Authorization header; throws AuthenticationError (401) or a 503. */
  async authenticate(header: string | undefined): Promise<Caller> {
    if (!header)
      throw new AuthenticationError('missing_token', 'an Authorization: Bearer <access token> header is required');
    const m = /^Bearer +([A-Za-z0-9_.~+/=-]+)$/i.exec(header);
    if (!m)
      throw new AuthenticationError('malformed_header', 'the Authorization header must be "Bearer <access token>"');
    const token = m[1]!;
    if (token.length > MAX_TOKEN_BYTES)
      throw new AuthenticationError('malformed_token', `the access token exceeds ${MAX_TOKEN_BYTES} bytes`);
    const key = this.cache ? createHash('sha256').update(token).digest('base64') : '';
    const hit = this.cache?.get(key);
    // A remembered token passed the screen when it was verified (same bytes).
    if (!hit) this.screen(token);
    const { jwks, jwksState } = await this.discover();
    const nowS = this.now() / 1000;
    if (hit) {
      const tol = this.s.clockToleranceS;
      const usable =
        jwks.fresh &&
        hit.jwksUat === jwksState.uat &&
        this.now() - hit.verifiedAt < this.s.tokenCacheTtlS * 1000 &&
        nowS < hit.caller.exp + tol &&
        (hit.nbf === undefined || nowS >= hit.nbf - tol);
      if (usable) {
        this.stats.cacheHits++;
        return hit.caller;
      }
      this.cache!.delete(key);
    }

    let verified: JWTVerifyResult;
    this.stats.verifications++;
    try {
      verified = await jwtVerify(token, jwks, {
        issuer: this.s.issuer,
        audience: [...this.s.audience],
        algorithms: [...this.s.algorithms],
        clockTolerance: this.s.clockToleranceS,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(this.now()),
      });
    } catch (e) {
      throw this.describe(e);
    }
    const caller = this.callerOf(verified.payload);
    this.cache?.set(key, {
      caller,
      ...(typeof verified.payload.nbf === 'number' ? { nbf: verified.payload.nbf } : {}),
      verifiedAt: this.now(),
      jwksUat: jwksState.uat,
    });
    return caller;
  }

  /**
   * Refuses a token that can never verify (not a JWS, alg none or not allowed, a wrong typ,
   * no usable kid, a payload that is not JSON) before the identity provider is asked
   * anything: an unreachable issuer must not turn junk into a 503. The refusal also says
   * why, where jose would only say that verification failed (it enforces the same).
   */
  private screen(token: string): void {
    let header_: { alg?: unknown; typ?: unknown; kid?: unknown };
    try {
      header_ = decodeProtectedHeader(token);
    } catch {
      throw this.fail('malformed_token', 'the access token is not a JWS compact serialisation');
    }
    if (
      typeof header_.alg !== 'string' ||
      header_.alg.toLowerCase() === 'none' ||
      !this.s.algorithms.includes(header_.alg)
    ) {
      throw this.fail(
        'algorithm_not_allowed',
        `token algorithm ${JSON.stringify(header_.alg)} is not allowed (allowed: ${this.s.algorithms.join(', ')})`,
      );
    }
    if (this.s.tokenTypes.length > 0) {
      const typ = typeof header_.typ === 'string' ? header_.typ.toLowerCase() : '';
      if (!this.s.tokenTypes.some((t) => t.toLowerCase() === typ)) {
        throw this.fail(
          'invalid_token_type',
          `token type ${JSON.stringify(header_.typ ?? null)} is not an access token (expected ${this.s.tokenTypes.join(' or ')})`,
        );
      }
    }
    if (
      header_.kid !== undefined &&
      (typeof header_.kid !== 'string' || header_.kid === '' || header_.kid.length > 256)
    ) {
      throw this.fail('malformed_token', 'the access token names no usable key id (kid)');
    }
    try {
      decodeJwt(token);
    } catch {
      throw this.fail('malformed_token', 'the access token payload is not a JSON claims set');
    }
  }

  private fail(reason: string, message: string): AuthenticationError {
    this.stats.failures++;
    return new AuthenticationError(reason, message);
  }

  private describe(e: unknown): Error {
    if (e instanceof errors.JWTExpired) return this.fail('token_expired', 'the access token has expired');
    if (e instanceof errors.JWTClaimValidationFailed) {
      if (e.claim === 'iss')
        return this.fail('invalid_issuer', 'the access token was not issued by the configured issuer');
      if (e.claim === 'aud')
        return this.fail('invalid_audience', 'the access token is not meant for this service (audience)');
      if (e.claim === 'nbf') return this.fail('token_not_yet_valid', 'the access token is not valid yet (nbf)');
      return this.fail('invalid_claims', `the access token's ${e.claim} claim is missing or invalid`);
    }
    if (e instanceof errors.JWSSignatureVerificationFailed)
      return this.fail('invalid_signature', 'the access token signature does not verify');
    if (e instanceof errors.JWKSNoMatchingKey)
      return this.fail('unknown_signing_key', "the access token's signing key is not in the issuer's key set");
    if (e instanceof errors.JWKSMultipleMatchingKeys)
      return this.fail('ambiguous_signing_key', "the access token's key id matches several keys");
    if (e instanceof errors.JOSEAlgNotAllowed)
      return this.fail('algorithm_not_allowed', 'the access token algorithm is not allowed');
    if (e instanceof errors.JWKSTimeout || e instanceof errors.JWKSInvalid) {
      return new ControlError(
        503,
        'idp_unavailable',
        "the identity provider's key set could not be fetched; retry later",
        {},
        { 'Retry-After': '5' },
      );
    }
    if (e instanceof errors.JOSEError) return this.fail('malformed_token', 'the access token is malformed');
    if (e instanceof TypeError && /fetch/i.test(e.message)) {
      return new ControlError(
        503,
        'idp_unavailable',
        "the identity provider's key set could not be fetched; retry later",
        {},
        { 'Retry-After': '5' },
      );
    }
    return e instanceof Error ? e : new Error(String(e));
  }

  private callerOf(p: JWTPayload): Caller {
    if (typeof p.sub !== 'string' || p.sub === '' || Buffer.byteLength(p.sub) > 256)
      throw this.fail('invalid_claims', "the access token's sub claim is missing or invalid");
    const roles = stringsOf(claimAt(p, this.s.rolesClaim));
    const amr = stringsOf(p.amr);
    const acr = typeof p.acr === 'string' ? p.acr : undefined;
    const mfa = amr.some((a) => this.s.mfaAmr.includes(a)) || (acr !== undefined && this.s.mfaAcr.includes(acr));
    const clientId = typeof p.client_id === 'string' ? p.client_id : typeof p.azp === 'string' ? p.azp : undefined;
    const tenantValue = this.s.tenantClaim ? claimAt(p, this.s.tenantClaim) : undefined;
    // The ledger records a tenant only by the label rule (src/core/labels.ts), in NFC.
    const checked =
      typeof tenantValue === 'string' && tenantValue !== '' ? checkLabel('tenant', tenantValue) : undefined;
    const tenant = checked?.ok ? checked.value : undefined;
    return {
      sub: p.sub,
      issuer: String(p.iss),
      ...(clientId ? { clientId: clientId.slice(0, 256) } : {}),
      roles: roles.slice(0, 64),
      mfa,
      ...(tenant ? { tenant } : {}),
      exp: p.exp!,
    };
  }
}

/** `a.b.c` inside the claims set. */
function claimAt(p: JWTPayload, path: string): unknown {
  let v: unknown = p;
  for (const part of path.split('.')) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/** An array of strings, or a space/comma-separated string, as a list. */
function stringsOf(v: unknown): string[] {
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === 'string' && x.length <= 256);
  if (typeof v === 'string') return v.split(/[\s,]+/).filter(Boolean);
  return [];
}

/** The role-to-operation table and the MFA rule. */
export class RoleTable {
  constructor(
    private readonly roles: Readonly<Record<string, readonly Operation[]>>,
    private readonly mfaRoles: readonly string[],
  ) {}

  /** The role that grants `op` to `caller`; throws AuthorizationError (403) otherwise. */
  authorize(caller: Caller, op: Operation): string {
    const granting = caller.roles.filter((r) => Object.hasOwn(this.roles, r) && this.roles[r]!.includes(op));
    if (granting.length === 0) {
      const held = caller.roles.length > 0 ? `roles ${caller.roles.join(', ')}` : 'no roles';
      throw new AuthorizationError(
        'role_not_permitted',
        op,
        `${op} is not granted to the caller (${held}); roles that grant it: ${this.rolesFor(op).join(', ') || 'none'}`,
      );
    }
    const withoutMfa = granting.find((r) => !this.mfaRoles.includes(r));
    if (withoutMfa) return withoutMfa;
    if (caller.mfa) return granting[0]!;
    throw new AuthorizationError(
      'mfa_required',
      op,
      `${op} by role ${granting.join('/')} requires phishing-resistant MFA, and the token's amr/acr claims do not show it`,
    );
  }

  rolesFor(op: Operation): string[] {
    return Object.keys(this.roles).filter((r) => this.roles[r]!.includes(op));
  }

  table(): Record<string, { operations: readonly Operation[]; mfa: boolean }> {
    return Object.fromEntries(
      Object.entries(this.roles).map(([r, ops]) => [r, { operations: ops, mfa: this.mfaRoles.includes(r) }]),
    );
  }
}
