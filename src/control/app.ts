// The /v1 routes. One middleware owns every path under /v1 (it answers 404/405 itself, so
// the ledger's catch-all never sees them). Each protected request goes:
//   route → authenticate (401) → authorise role/MFA (403) → validate input (400) → act
// and every decision it makes (evaluation, lease, denied operation, rotation,
// authentication failure) is anchored in the ledger and appended to the audit stream.
import { createHash } from 'node:crypto';
import type { Context, Next } from 'koa';
import { newUlid as ulid } from '../store/ids.js';
import { AuthFailureAggregator } from './auth-failures.js';
import { AuthenticationError, AuthorizationError, type Caller } from './auth.js';
import type { Operation } from './config.js';
import type { EpochView } from './epochs.js';
import { ControlError, invalid, renderControlError, shuttingDown } from './errors.js';
import { issueLease, newLeaseId } from './leases.js';
import { openApiDocument } from './openapi.js';
import type { PolicyRequest } from '../policy/cedar.js';
import type { ControlServices } from './services.js';
import { contextOf, entityRef, label, onlyFields, readJson, ttlOf } from './request-body.js';
import { auditEvents } from './audit-route.js';

interface Route {
  readonly method: 'GET' | 'POST';
  /** null: public (no token needed). */
  readonly operation: Operation | null;
  handle(ctx: Context, s: ControlServices, caller: Caller | null, role: string | null): Promise<void>;
}

const ROUTES: Record<string, Route> = {
  '/v1/openapi.json': { method: 'GET', operation: null, handle: openapi },
  '/v1/policy/evaluate': { method: 'POST', operation: 'policy.evaluate', handle: evaluate },
  '/v1/access/lease': { method: 'POST', operation: 'access.lease', handle: lease },
  '/v1/keys/rotate': { method: 'POST', operation: 'keys.rotate', handle: rotate },
  '/v1/keys/epochs': { method: 'GET', operation: 'keys.read', handle: listEpochs },
  '/v1/audit/events': { method: 'GET', operation: 'audit.read', handle: auditEvents },
};

/** The aggregator of `config`'s window and source limit, recording through `recorder`. */
export function authFailureAggregator(
  services: Pick<ControlServices, 'config' | 'recorder' | 'logger'>,
): AuthFailureAggregator {
  const c = services.config;
  return new AuthFailureAggregator(failureRecorder(services), {
    windowMs: c.authFailureWindowS * 1000,
    maxSources: c.authFailureSources,
  });
}

/** The /v1 middleware; mount it with app.use. Paths outside /v1 pass through. */
export function controlMiddleware(s: ControlServices) {
  const failures = s.authFailures;
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.path !== '/v1' && !ctx.path.startsWith('/v1/')) return next();
    try {
      ctx.set('Cache-Control', 'no-store');
      if (s.state.closing) throw shuttingDown();
      const route = Object.hasOwn(ROUTES, ctx.path) ? ROUTES[ctx.path]! : undefined;
      if (!route) throw new ControlError(404, 'not_found', `no route for ${ctx.method} ${ctx.path}`);
      if (ctx.method !== route.method && !(route.method === 'GET' && ctx.method === 'HEAD')) {
        throw new ControlError(
          405,
          'method_not_allowed',
          `${ctx.method} is not allowed on ${ctx.path}; use ${route.method}`,
          {},
          { Allow: route.method },
        );
      }
      if (route.operation === null) return await route.handle(ctx, s, null, null);
      let caller: Caller;
      try {
        caller = await s.auth.authenticate(ctx.get('Authorization') || undefined);
      } catch (e) {
        if (e instanceof AuthenticationError) noteAuthFailure(ctx, e, failures);
        throw e;
      }
      let role: string;
      try {
        role = s.roles.authorize(caller, route.operation);
      } catch (e) {
        if (e instanceof AuthorizationError) throw await recordDenied(ctx, s, caller, e);
        throw e;
      }
      await route.handle(ctx, s, caller, role);
    } catch (e) {
      renderControlError(ctx, e, s.logger);
    }
  };
}

// ---------------------------------------------------------------- helpers
function actorOf(c: Caller, role: string | null): Record<string, unknown> {
  return {
    sub: c.sub,
    issuer: c.issuer,
    ...(c.clientId ? { client_id: c.clientId } : {}),
    roles: c.roles,
    mfa: c.mfa,
    ...(role ? { role } : {}),
  };
}

// ---------------------------------------------------------------- recording failures

/** Anchors one authentication-failure record (a single failure or a window's summary) in the background. */
function failureRecorder(s: Pick<ControlServices, 'recorder' | 'logger'>): (record: Record<string, unknown>) => void {
  return (record) => {
    const failureId = `auf_${ulid()}`;
    s.recorder
      .record('authentication_failure', 'Rejected', { ...record, failure_id: failureId }, { artifact: failureId })
      .catch((err: unknown) => {
        s.logger.error({ err: (err as Error).message }, 'recording an authentication failure failed');
      });
  };
}

/** Counts a 401 towards its source's window (the response does not wait for the ledger). */
function noteAuthFailure(ctx: Context, e: AuthenticationError, failures: AuthFailureAggregator): void {
  const token = /^Bearer +(\S+)$/i.exec(ctx.get('Authorization'))?.[1];
  failures.add({
    address: ctx.request.ip || 'unknown',
    reason: e.reason,
    method: ctx.method,
    path: ctx.path,
    // A fingerprint lets analysts correlate repeats; it reveals nothing of the token.
    ...(token ? { tokenSha256: createHash('sha256').update(token).digest('hex') } : {}),
  });
}

/** Records a 403 (role or MFA) as a denied access decision; returns the error to throw. */
async function recordDenied(
  ctx: Context,
  s: ControlServices,
  caller: Caller,
  e: AuthorizationError,
): Promise<ControlError> {
  const decisionId = `dec_${ulid()}`;
  const record = {
    v: 1,
    kind: 'operation_denied',
    decision_id: decisionId,
    time: new Date().toISOString(),
    actor: actorOf(caller, null),
    operation: e.operation,
    method: ctx.method,
    path: ctx.path,
    decision: 'deny',
    reason: e.reason,
  };
  const r = await s.recorder.record('access_decision', 'Denied', record, {
    artifact: decisionId,
    tenant: caller.tenant,
  });
  return new ControlError(
    e.status,
    e.code,
    e.message,
    { ...e.extra, decision_id: decisionId, ledger_entry_id: r.ledgerEntryId },
    e.headers,
  );
}

// ---------------------------------------------------------------- routes

async function openapi(ctx: Context, s: ControlServices): Promise<void> {
  ctx.set('Cache-Control', 'public, max-age=300');
  ctx.body = openApiDocument(s.config, s.roles);
}

async function evaluate(ctx: Context, s: ControlServices, caller: Caller | null, role: string | null): Promise<void> {
  const body = await readJson(ctx, s);
  onlyFields(body, ['principal', 'action', 'resource', 'context']);
  const req: PolicyRequest = {
    principal: entityRef(body.principal, 'principal'),
    action: entityRef(body.action, 'action'),
    resource: entityRef(body.resource, 'resource'),
    context: contextOf(body.context),
  };
  if (!/(^|::)Action$/.test(req.action.type))
    throw invalid('invalid_action', 'action.type must be Action (or <Namespace>::Action)');
  const d = s.policy.evaluate(req);
  const decisionId = `dec_${ulid()}`;
  const record = {
    v: 1,
    kind: 'policy_evaluation',
    decision_id: decisionId,
    time: new Date().toISOString(),
    actor: actorOf(caller!, role),
    request: { principal: req.principal, action: req.action, resource: req.resource, context: req.context },
    decision: d.decision,
    policy_version: d.policyVersion,
    reasons: d.reasons,
    ...(d.errors.length > 0 ? { errors: d.errors } : {}),
  };
  const r = await s.recorder.record('policy_evaluation', d.decision === 'allow' ? 'Allow' : 'Deny', record, {
    artifact: decisionId,
    tenant: caller!.tenant,
  });
  ctx.body = {
    decision: d.decision,
    decision_id: decisionId,
    policy_version: d.policyVersion,
    reasons: d.reasons,
    ...(d.errors.length > 0 ? { errors: d.errors } : {}),
    ledger_entry_id: r.ledgerEntryId,
    audit_event_id: r.event.id,
  };
}

async function lease(ctx: Context, s: ControlServices, caller: Caller | null, role: string | null): Promise<void> {
  const c = caller!;
  const body = await readJson(ctx, s);
  onlyFields(body, ['doc_id', 'compartment', 'ttl']);
  const docId = label(body.doc_id, 'doc_id', 256)!;
  const compartment = label(body.compartment, 'compartment', 128)!;
  const ttl = ttlOf(body.ttl, s);
  const L = s.config.lease;
  const context = {
    compartment,
    ttl_seconds: ttl,
    roles: [...c.roles],
    mfa: c.mfa,
    ...(c.clientId ? { client_id: c.clientId } : {}),
  };
  const d = s.policy.evaluate({
    principal: { type: L.principalType, id: c.sub },
    action: { type: 'Action', id: L.action },
    resource: { type: L.resourceType, id: docId },
    context,
  });
  const decisionId = `dec_${ulid()}`;
  const base = {
    v: 1,
    kind: 'access_lease',
    decision_id: decisionId,
    time: new Date().toISOString(),
    actor: actorOf(c, role),
    request: { doc_id: docId, compartment, ttl_seconds: ttl },
    decision: d.decision,
    policy_version: d.policyVersion,
    reasons: d.reasons,
    ...(d.errors.length > 0 ? { errors: d.errors } : {}),
  };
  if (d.decision !== 'allow') {
    const r = await s.recorder.record('access_decision', 'Denied', base, { artifact: decisionId, tenant: c.tenant });
    throw new ControlError(
      403,
      'access_denied',
      `policy ${d.policyVersion} denies a lease on ${docId} in ${compartment}`,
      {
        decision_id: decisionId,
        policy_version: d.policyVersion,
        reasons: d.reasons,
        ledger_entry_id: r.ledgerEntryId,
      },
    );
  }
  const leaseId = newLeaseId();
  const issued = await issueLease(s.epochs, leaseId, new Date(Date.now() + ttl * 1000));
  const record = {
    ...base,
    lease: { lease_id: leaseId, expires: issued.expires.toISOString(), epoch: issued.epoch, kek_id: issued.kekId },
  };
  const r = await s.recorder.record('access_decision', 'Granted', record, { artifact: leaseId, tenant: c.tenant });
  ctx.status = 201;
  ctx.body = {
    lease_id: leaseId,
    wrapped_dek: issued.wrappedDek,
    expires: issued.expires.toISOString(),
    epoch: issued.epoch,
    kek_id: issued.kekId,
    decision_id: decisionId,
    policy_version: d.policyVersion,
    ledger_entry_id: r.ledgerEntryId,
    audit_event_id: r.event.id,
  };
}

async function rotate(ctx: Context, s: ControlServices, caller: Caller | null): Promise<void> {
  const body = await readJson(ctx, s, true);
  onlyFields(body, ['retire_before']);
  const rb = body.retire_before;
  if (rb !== undefined && (typeof rb !== 'number' || !Number.isSafeInteger(rb)))
    throw invalid('invalid_retire_before', 'retire_before must be an integer epoch number');
  const view: EpochView = await s.epochs.rotate(caller!.sub, rb as number | undefined);
  ctx.status = 201;
  ctx.body = { epoch: view, ledger_entry_id: view.ledger_entry_id };
}

async function listEpochs(ctx: Context, s: ControlServices): Promise<void> {
  if (Object.keys(ctx.query).length > 0)
    throw invalid('unknown_parameter', `unknown query parameter ${JSON.stringify(Object.keys(ctx.query)[0])}`);
  const epochs = s.epochs.list();
  ctx.body = { signer: s.signer.describe(), current: epochs.at(-1)?.epoch ?? null, epochs };
}
