// The /v1 routes. One middleware owns every path under /v1 (it answers 404/405 itself, so
// the ledger's catch-all never sees them). Each protected request goes:
//   route → authenticate (401) → authorise role/MFA (403) → validate input (400) → act
// and every decision it makes (evaluation, lease, denied operation, rotation,
// authentication failure) is anchored in the ledger and appended to the audit stream.
import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import getRawBody from 'raw-body';
import { newUlid as ulid } from '../store/ids.js';
import { type AuditFilter, type AuditLog, type StoredEvent, matches } from './audit.js';
import { AuthFailureAggregator } from './auth-failures.js';
import {
  AuthenticationError,
  AuthorizationError,
  type Caller,
  type OidcAuthenticator,
  type RoleTable,
} from './auth.js';
import type { ControlConfig, Operation } from './config.js';
import type { EpochView, KeyEpochs } from './epochs.js';
import { ControlError, invalid, renderControlError, shuttingDown } from './errors.js';
import { issueLease, newLeaseId } from './leases.js';
import { openApiDocument } from './openapi.js';
import type { EntityRef, PolicyEngine, PolicyRequest } from '../policy/cedar.js';
import { CONTROL_ENTRY_TYPES, type Recorder } from './recorder.js';
import type { ControlSigner } from './signing.js';

export interface ControlServices {
  readonly config: ControlConfig;
  readonly auth: OidcAuthenticator;
  readonly roles: RoleTable;
  readonly policy: PolicyEngine;
  readonly epochs: KeyEpochs;
  readonly audit: AuditLog;
  readonly recorder: Recorder;
  readonly signer: ControlSigner;
  readonly logger: Logger;
  /** Open SSE streams, ended on close (an open stream would keep the HTTP server from closing). */
  readonly streams: Set<() => void>;
  /** Authentication failures, aggregated per source and window before they are recorded. */
  readonly authFailures: AuthFailureAggregator;
  /** Set when the control plane is closing: new requests get 503. */
  readonly state: { closing: boolean };
}

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

const ENTITY_TYPE = /^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$/;
const ENTITY_STRING = /^([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)::"((?:[^"\\]|\\.)*)"$/;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/u;

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

async function readJson(ctx: Context, s: ControlServices, optional = false): Promise<Record<string, unknown>> {
  const length = ctx.get('Content-Length');
  const empty = length === '0' || (!length && !ctx.get('Transfer-Encoding'));
  if (empty) {
    if (optional) return {};
    throw invalid('missing_body', 'a JSON request body is required');
  }
  if (!ctx.is('application/json'))
    throw new ControlError(415, 'unsupported_media_type', 'request body must be application/json');
  let text: string;
  try {
    text = await getRawBody(ctx.req, { limit: s.config.bodyLimitBytes, length: length || undefined, encoding: 'utf8' });
  } catch (e) {
    const t = (e as { type?: string }).type;
    if (t === 'entity.too.large')
      throw new ControlError(413, 'body_too_large', `request body exceeds ${s.config.bodyLimitBytes} bytes`);
    if (t === 'request.size.invalid')
      throw invalid('invalid_body', 'request body length does not match Content-Length');
    throw e;
  }
  if (text.trim() === '' && optional) return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalid('invalid_json', 'request body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('invalid_body', 'request body must be a JSON object');
  return body as Record<string, unknown>;
}

function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).find((k) => !allowed.includes(k));
  if (unknown !== undefined)
    throw invalid('unknown_field', `unknown field ${JSON.stringify(unknown)}; allowed: ${allowed.join(', ')}`);
}

function label(v: unknown, field: string, maxBytes: number, required = true): string | undefined {
  if (v === undefined && !required) return undefined;
  if (v === undefined) throw invalid(`missing_${field}`, `${field} is required`);
  if (typeof v !== 'string' || v === '') throw invalid(`invalid_${field}`, `${field} must be a non-empty string`);
  if (Buffer.byteLength(v) > maxBytes)
    throw invalid(`invalid_${field}`, `${field} must be at most ${maxBytes} UTF-8 bytes`);
  if (CONTROL_CHARS.test(v) || !v.isWellFormed())
    throw invalid(`invalid_${field}`, `${field} must not contain control characters`);
  return v;
}

/** An entity reference: {"type": "User", "id": "alice"} or the Cedar form `User::"alice"`. */
function entityRef(v: unknown, field: string): EntityRef {
  if (v === undefined) throw invalid(`missing_${field}`, `${field} is required`);
  let type: unknown;
  let id: unknown;
  if (typeof v === 'string') {
    const m = ENTITY_STRING.exec(v);
    if (!m) throw invalid(`invalid_${field}`, `${field} must be {"type","id"} or a Cedar entity like User::"alice"`);
    type = m[1];
    id = m[2]!.replace(/\\(.)/g, '$1');
  } else if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    const extra = Object.keys(o).find((k) => k !== 'type' && k !== 'id');
    if (extra)
      throw invalid(
        `invalid_${field}`,
        `${field} has unknown field ${JSON.stringify(extra)}; an entity is {"type","id"}`,
      );
    type = o.type;
    id = o.id;
  } else {
    throw invalid(`invalid_${field}`, `${field} must be {"type","id"} or a Cedar entity like User::"alice"`);
  }
  if (typeof type !== 'string' || !ENTITY_TYPE.test(type) || type.length > 256)
    throw invalid(`invalid_${field}`, `${field}.type must be a Cedar entity type name (e.g. User, Acme::Document)`);
  if (typeof id !== 'string' || id === '' || Buffer.byteLength(id) > 1024 || CONTROL_CHARS.test(id)) {
    throw invalid(
      `invalid_${field}`,
      `${field}.id must be a non-empty string of at most 1024 bytes without control characters`,
    );
  }
  return { type, id };
}

function contextOf(v: unknown): Record<string, unknown> {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalid('invalid_context', 'context must be a JSON object');
  let depth = 0;
  const walk = (x: unknown, d: number) => {
    depth = Math.max(depth, d);
    if (depth > 16) throw invalid('invalid_context', 'context is nested too deeply (more than 16 levels)');
    if (typeof x === 'number' && !Number.isSafeInteger(x))
      throw invalid(
        'invalid_context',
        'context numbers must be integers (Cedar has no floating point; use decimal("…"))',
      );
    if (x === null) throw invalid('invalid_context', 'context must not contain null (Cedar has no null)');
    if (typeof x === 'object') for (const y of Object.values(x as object)) walk(y, d + 1);
  };
  walk(v, 0);
  return v as Record<string, unknown>;
}

/** `<seconds>s` within the configured bounds. */
function ttlOf(v: unknown, s: ControlServices): number {
  const { ttlDefaultS, ttlMinS, ttlMaxS } = s.config.lease;
  if (v === undefined) return ttlDefaultS;
  const bounds = `from ${ttlMinS}s to ${ttlMaxS}s (default ${ttlDefaultS}s)`;
  const m = typeof v === 'string' ? /^([0-9]{1,10})s$/.exec(v) : null;
  if (!m) throw invalid('invalid_ttl', `ttl must be a duration in seconds like "300s", ${bounds}`);
  const n = Number(m[1]);
  if (n < ttlMinS || n > ttlMaxS) throw invalid('invalid_ttl', `ttl ${v} is out of bounds: it must be ${bounds}`);
  return n;
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

const AUDIT_PARAMS = ['type', 'since', 'until', 'after', 'follow'];
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function timeParam(v: unknown, name: string): number | undefined {
  if (v === undefined) return undefined;
  const ms = typeof v === 'string' && ISO_TIME.test(v) ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms))
    throw invalid(`invalid_${name}`, `${name} must be an ISO 8601 time like 2025-01-31T12:00:00Z`);
  return ms;
}

function single(ctx: Context, name: string): string | undefined {
  const v = ctx.query[name];
  if (Array.isArray(v)) throw invalid(`invalid_${name}`, `${name} may be given once`);
  return v;
}

async function auditEvents(ctx: Context, s: ControlServices): Promise<void> {
  const unknown = Object.keys(ctx.query).find((k) => !AUDIT_PARAMS.includes(k));
  if (unknown)
    throw invalid(
      'unknown_parameter',
      `unknown query parameter ${JSON.stringify(unknown)}; allowed: ${AUDIT_PARAMS.join(', ')}`,
    );
  const typeParam = single(ctx, 'type');
  let types: Set<string> | undefined;
  if (typeParam !== undefined) {
    types = new Set(typeParam.split(',').map((t) => t.trim()));
    const bad = [...types].find((t) => !(CONTROL_ENTRY_TYPES as readonly string[]).includes(t));
    if (bad !== undefined)
      throw invalid(
        'invalid_type',
        `unknown event type ${JSON.stringify(bad)}; types: ${CONTROL_ENTRY_TYPES.join(', ')}`,
      );
  }
  const since = timeParam(single(ctx, 'since'), 'since');
  const until = timeParam(single(ctx, 'until'), 'until');
  if (since !== undefined && until !== undefined && until <= since)
    throw invalid('invalid_until', 'until must be later than since');
  const followParam = single(ctx, 'follow');
  if (followParam !== undefined && followParam !== 'true' && followParam !== 'false')
    throw invalid('invalid_follow', 'follow must be true or false');
  const headerId = ctx.get('Last-Event-ID');
  const afterRaw = headerId !== '' ? headerId : single(ctx, 'after');
  let after = 0;
  if (afterRaw !== undefined) {
    if (!/^(0|[1-9][0-9]{0,15})$/.test(afterRaw.trim()))
      throw invalid('invalid_last_event_id', 'Last-Event-ID (or after) must be an event id: a non-negative integer');
    after = Number(afterRaw.trim());
    if (after > s.audit.lastId)
      throw invalid('invalid_last_event_id', `event ${after} does not exist (the last event is ${s.audit.lastId})`);
  }
  const filter: AuditFilter = {
    ...(types ? { types } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
  };
  const follow = followParam !== 'false' && (until === undefined || until > Date.now());
  if (ctx.method === 'HEAD') {
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    return;
  }
  streamEvents(ctx, s, after, filter, follow);
}

/** Largest backlog kept for a slow live SSE client before its stream is ended (it resumes with Last-Event-ID). */
const MAX_SSE_BUFFER = 16 * 1024 * 1024;
/** Replay pauses for the client above this much unsent output. */
const REPLAY_HIGH_WATER = 1024 * 1024;

function streamEvents(ctx: Context, s: ControlServices, after: number, filter: AuditFilter, follow: boolean): void {
  const socket = ctx.req.socket;
  socket.setTimeout(0);
  socket.setNoDelay(true);
  socket.setKeepAlive(true);
  const out = new PassThrough();
  ctx.status = 200;
  ctx.set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Accel-Buffering': 'no',
    Connection: 'keep-alive',
  });
  ctx.body = out;

  let last = after;
  let replaying = true;
  let done = false;
  const buffered: StoredEvent[] = [];
  const timers: NodeJS.Timeout[] = [];
  const send = (e: StoredEvent) => {
    if (done || e.id <= last) return;
    last = e.id;
    if (!matches(e, filter)) return;
    out.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${e.json}\n\n`);
    if (out.writableLength > MAX_SSE_BUFFER)
      finish(': the client is too slow; reconnect with Last-Event-ID to resume\n\n');
  };
  const finish = (comment?: string) => {
    if (done) return;
    done = true;
    unsubscribe();
    s.streams.delete(closer);
    for (const t of timers) clearTimeout(t);
    if (comment) out.write(comment);
    out.end();
  };
  const unsubscribe = s.audit.subscribe((e) => (replaying ? buffered.push(e) : send(e)));
  const closer = () => finish(': the server is shutting down\n\n');
  s.streams.add(closer);
  // The response's 'close' fires when the client goes away (or the response ends).
  ctx.res.once('close', () => finish());
  out.on('error', () => finish());
  out.write(`retry: 2000\n: stele audit stream; resuming after event ${after}\n\n`);

  // Replay and the live events queued meanwhile are written at the client's pace (waiting
  // for 'drain'); only a live client that falls far behind is cut off.
  const paced = async (e: StoredEvent) => {
    send(e);
    if (!done && out.writableLength > REPLAY_HIGH_WATER) {
      await new Promise<void>((resolve) => {
        out.once('drain', resolve);
        out.once('close', resolve);
      });
    }
  };
  void (async () => {
    try {
      for await (const e of s.audit.since(after)) {
        if (done) return;
        await paced(e);
      }
      while (buffered.length > 0 && !done) await paced(buffered.shift()!);
      replaying = false;
      if (!follow) return finish();
      const ping = setInterval(() => out.write(': keep-alive\n\n'), 15_000);
      ping.unref();
      timers.push(ping as unknown as NodeJS.Timeout);
      if (filter.until !== undefined) {
        const t = setTimeout(() => finish(), Math.max(0, filter.until - Date.now()));
        t.unref();
        timers.push(t);
      }
    } catch (e) {
      s.logger.error({ err: (e as Error).message }, 'audit stream replay failed');
      finish(': replay failed; reconnect to resume\n\n');
    }
  })();
}
