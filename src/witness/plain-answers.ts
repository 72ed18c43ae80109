// Plain-text answers of the tlog-witness and tlog-mirror servers: their texts fix the
// bodies of several responses, so these servers answer text, not the API's JSON errors.
import type Koa from 'koa';
import type { Logger } from 'pino';

export const TEXT = 'text/plain; charset=utf-8';

/** False (after answering 405 with `Allow`) unless the request uses one of `methods`. */
export function allow(ctx: Koa.Context, methods: readonly string[]): boolean {
  if (methods.includes(ctx.method)) return true;
  ctx.set('Allow', methods.join(', '));
  answer(ctx, 405, 'method not allowed');
  return false;
}

/** A one-line text answer with `status`. */
export function answer(ctx: Koa.Context, status: number, text: string): void {
  ctx.status = status;
  ctx.type = TEXT;
  ctx.body = `${text}\n`;
}

/** An unexpected error: logged, and answered 500 without its details. */
export function internalError(ctx: Koa.Context, logger: Logger, e: unknown, what: string): void {
  logger.error({ err: (e as Error).message }, what);
  answer(ctx, 500, 'internal error');
}
