// Plain-text answers of the tlog-witness and tlog-mirror servers: their texts fix the
// bodies of several responses, so these servers answer text, not the API's JSON errors.
import type Koa from 'koa';

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
