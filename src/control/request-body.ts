// The /v1 request bodies: read within the configured limits, then each field checked with a
// 400 naming it (unknown fields, labels, Cedar entity references, contexts, lease TTLs).
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { ControlError, invalid } from './errors.js';
import type { EntityRef } from '../policy/cedar.js';
import type { ControlServices } from './services.js';

const ENTITY_TYPE = /^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$/;
const ENTITY_STRING = /^([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)::"((?:[^"\\]|\\.)*)"$/;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/u;

export async function readJson(ctx: Context, s: ControlServices, optional = false): Promise<Record<string, unknown>> {
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

export function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).find((k) => !allowed.includes(k));
  if (unknown !== undefined)
    throw invalid('unknown_field', `unknown field ${JSON.stringify(unknown)}; allowed: ${allowed.join(', ')}`);
}

export function label(v: unknown, field: string, maxBytes: number, required = true): string | undefined {
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
export function entityRef(v: unknown, field: string): EntityRef {
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

export function contextOf(v: unknown): Record<string, unknown> {
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
export function ttlOf(v: unknown, s: ControlServices): number {
  const { ttlDefaultS, ttlMinS, ttlMaxS } = s.config.lease;
  if (v === undefined) return ttlDefaultS;
  const bounds = `from ${ttlMinS}s to ${ttlMaxS}s (default ${ttlDefaultS}s)`;
  const m = typeof v === 'string' ? /^([0-9]{1,10})s$/.exec(v) : null;
  if (!m) throw invalid('invalid_ttl', `ttl must be a duration in seconds like "300s", ${bounds}`);
  const n = Number(m[1]);
  if (n < ttlMinS || n > ttlMaxS) throw invalid('invalid_ttl', `ttl ${v} is out of bounds: it must be ${bounds}`);
  return n;
}
