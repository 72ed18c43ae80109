// Control-plane errors: the ledger's JSON shape {"error":{"code","message"}} (src/http/errors.ts),
// with optional extra fields inside `error` (a decision id, a reason) where they help the caller.
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.js';
import {
  AnchorTimeoutError,
  PoolFullError,
  SequencerStoppedError,
  StorageUnavailableError,
} from '../sequencer/contract.js';

export class ControlError extends ApiError {
  override name = 'ControlError';
  constructor(
    status: number,
    code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(status, code, message, headers);
  }
}

/** 503 for a request that arrives (or reaches the ledger) while the control plane closes. */
export const shuttingDown = () =>
  new ControlError(
    503,
    'shutting_down',
    'the control plane is shutting down; retry against another instance',
    {},
    { 'Retry-After': '1', Connection: 'close' },
  );

export const invalid = (code: string, message: string, extra: Record<string, unknown> = {}) =>
  new ControlError(400, code, message, extra);

/** Renders any error thrown below the /v1 router into the JSON error shape. */
export function renderControlError(ctx: Context, e: unknown, logger: Logger): void {
  let err: ApiError;
  if (e instanceof ApiError) err = e;
  else if (e instanceof PoolFullError)
    err = new ApiError(503, 'ledger_busy', 'the ledger is busy; retry later', { 'Retry-After': '1' });
  else if (e instanceof SequencerStoppedError)
    err = new ApiError(503, 'ledger_unavailable', 'the ledger is not accepting entries');
  else if (e instanceof StorageUnavailableError || e instanceof AnchorTimeoutError)
    err = new ApiError(503, 'ledger_unavailable', e.message, { 'Retry-After': '5' });
  else {
    const h = e as { status?: number; type?: string; message?: string };
    if (h?.status === 413 || h?.type === 'entity.too.large')
      err = new ApiError(413, 'body_too_large', 'request body is too large');
    // The client went away mid-body (raw-body says aborted, or not readable once the socket
    // is gone): its doing, answered if anyone still listens, not a server error.
    else if (h?.type === 'request.aborted' || h?.type === 'stream.not.readable')
      err = new ApiError(400, 'request_aborted', 'request body was not received in full');
    else {
      logger.error(
        { err: e instanceof Error ? { name: e.name, message: e.message, stack: e.stack } : String(e), path: ctx.path },
        'control-plane request failed',
      );
      err = new ApiError(500, 'internal', 'internal error');
    }
  }
  ctx.status = err.status;
  ctx.set(err.headers);
  ctx.set('Cache-Control', 'no-store');
  const extra = err instanceof ControlError ? err.extra : {};
  ctx.body = { error: { code: err.code, message: err.message, ...extra } };
}
