// One JSON error shape for every route: {"error":{"code","message"}} with its HTTP status.
// Unexpected errors become a 500 with a generic message; details go to the log only.
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { CorruptObjectError } from '../read/reader.js';

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
    /** Further members of the `error` object (a decision's reasons), beside code and message. */
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

export const badRequest = (code: string, message: string) => new ApiError(400, code, message);
export const notFound = (code: string, message: string) => new ApiError(404, code, message);

/** Errors thrown by koa internals and middleware (body parser, router) carry a status. */
interface HttpishError {
  status?: number;
  statusCode?: number;
  type?: string;
  expose?: boolean;
  message?: string;
}

/**
 * A stored object failed authentication (the reader logged and counted it): a 500, so a
 * client never takes a wrong proof or record for an answer. Not a 502: the object is the
 * server's own storage, which another replica of the same bucket would read the same way.
 */
export const CORRUPT_STORAGE_STATUS = 500;

function classify(e: unknown): ApiError | null {
  if (e instanceof ApiError) return e;
  if (e instanceof CorruptObjectError) {
    return new ApiError(
      CORRUPT_STORAGE_STATUS,
      'corrupt_storage',
      `${e.key} in the log's storage does not match the signed checkpoint; the operator has been alerted`,
    );
  }
  const h = e as HttpishError;
  const status = h?.status ?? h?.statusCode;
  // 501 is the client's doing (a method no route implements); every other 5xx an
  // http-error carries is a fault of the server's own, answered as `internal`.
  if (status === 501) return new ApiError(501, 'not_implemented', 'method not implemented');
  if (typeof status !== 'number' || status < 400 || status >= 500) return null;
  if (status === 413 || h.type === 'entity.too.large')
    return new ApiError(413, 'body_too_large', 'request body is too large');
  if (status === 405) return new ApiError(405, 'method_not_allowed', h.message ?? 'method not allowed');
  if (status === 415) return new ApiError(415, 'unsupported_media_type', 'request body must be application/json');
  // The JSON parser (bourne) refuses prototype poisoning outright.
  if (/forbidden prototype property/i.test(h.message ?? ''))
    return new ApiError(400, 'forbidden_field', 'request body must not contain __proto__ or constructor.prototype');
  if (h.type === 'entity.parse.failed' || /JSON|Unexpected token/i.test(h.message ?? '')) {
    return new ApiError(400, 'invalid_json', 'request body is not valid JSON');
  }
  return new ApiError(status, 'bad_request', h.expose && h.message ? h.message : 'bad request');
}

/** The refusal `e` is answered with; an unexpected error is a 500 `internal`, logged (name and message only). */
export function answerableError(e: unknown, logger: Logger, path: string): ApiError {
  const known = classify(e);
  if (known) return known;
  logger.error({ err: e instanceof Error ? { name: e.name, message: e.message } : String(e), path }, 'request failed');
  return new ApiError(500, 'internal', 'internal error');
}

/** The JSON error shape of a refusal. */
export const errorBody = (err: ApiError): { error: Record<string, unknown> } => ({
  error: { code: err.code, message: err.message, ...err.details },
});

/** Answers `e` as the JSON error shape (see answerableError). */
export function respondWithError(ctx: Context, e: unknown, logger: Logger): void {
  const err = answerableError(e, logger, ctx.path);
  ctx.status = err.status;
  ctx.set(err.headers);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = errorBody(err);
}

/**
 * A request nothing answered is a JSON 404; a status the router set without a body (405,
 * 501, with its Allow header) gets its JSON body here.
 */
export function throwIfUnanswered(ctx: Context): void {
  if (ctx.body !== undefined && ctx.body !== null) return;
  if (ctx.status === 404) throw new ApiError(404, 'not_found', `no route for ${ctx.method} ${ctx.path}`);
  const allow = ctx.response.get('Allow');
  const headers: Record<string, string> = allow ? { Allow: allow } : {};
  if (ctx.status === 405)
    throw new ApiError(
      405,
      'method_not_allowed',
      `${ctx.method} is not allowed on ${ctx.path}${allow ? `; use ${allow}` : ''}`,
      headers,
    );
  if (ctx.status === 501) throw new ApiError(501, 'not_implemented', `${ctx.method} is not implemented`, headers);
}
