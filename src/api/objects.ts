// Serves the log's public objects as the CDN would: /checkpoint and /tile/… with the
// Cache-Control of docs/design.md §1.2, so verifiers and mirrors can read tiles locally.
import type { Context, Next } from 'koa';
import { CHECKPOINT_KEY, objectMeta } from '../store/layout.js';
import type { ObjectReader } from '../store/store.js';
import { parseTilePath } from '../core/tiles.js';
import { ApiError, notFound } from './errors.js';

export function objectMiddleware(source: ObjectReader) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const key = ctx.path.slice(1);
    const isObject = key === CHECKPOINT_KEY || key.startsWith('tile/');
    if (!isObject) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on log objects`, {
        Allow: 'GET, HEAD',
      });
    }
    if (key !== CHECKPOINT_KEY && !parseTilePath(key)) throw notFound('object_not_found', `${key} is not a tile path`);
    const data = await source.get(key);
    if (!data) throw notFound('object_not_found', `${key} does not exist`);
    const meta = objectMeta(key);
    ctx.set('Content-Type', meta.contentType);
    ctx.set('Cache-Control', meta.cacheControl);
    ctx.body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  };
}
