// The Koa application: request logs, metrics, one JSON error shape, the public objects,
// /healthz, /metrics and the /api/ledger routes.
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { ObjectReader } from '../store/store.js';
import { errorMiddleware } from './errors.js';
import { type GuardOptions, anchorGuard } from './guard.js';
import { type LedgerService, ledgerRouter } from './ledger.js';
import type { Metrics } from './metrics.js';
import { objectMiddleware } from './objects.js';
import { explorerMiddleware } from './explorer.js';

export interface AppOptions {
  readonly ledger: LedgerService;
  /** The published objects (tiles, checkpoint) to serve as a CDN would. */
  readonly objects: ObjectReader;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly guard?: GuardOptions;
  /** Largest anchor body accepted (default 16 KiB; a maximal anchor is ~2 KiB). */
  readonly bodyLimitBytes?: number;
  /** Liveness: null when healthy, else the reason. */
  readonly unhealthy?: () => string | null;
}

export function createApp(o: AppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;

  if (o.logger.isLevelEnabled('info')) {
    app.use(async (ctx, next) => {
      const start = performance.now();
      try {
        await next();
      } finally {
        o.logger.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round((performance.now() - start) * 10) / 10 }, 'request');
      }
    });
  }
  app.use(o.metrics.middleware());
  app.use(errorMiddleware(o.logger));
  app.use(objectMiddleware(o.objects));
  app.use(async (ctx, next) => {
    if (ctx.path === '/healthz' && ctx.method === 'GET') {
      const reason = o.unhealthy?.() ?? null;
      ctx.status = reason ? 503 : 200;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = reason ? { ok: false, reason } : { ok: true, treeSize: o.ledger.checkpoint().size };
      return;
    }
    if (ctx.path === '/metrics' && ctx.method === 'GET') {
      ctx.set('Content-Type', o.metrics.registry.contentType);
      ctx.body = await o.metrics.registry.metrics();
      return;
    }
    await next();
  });

  app.use(explorerMiddleware({ ledger: o.ledger }));

  const parseJson = bodyParser({
    enableTypes: ['json'],
    jsonLimit: o.bodyLimitBytes ?? 16 * 1024,
    jsonStrict: true,
  });
  const router = ledgerRouter(o.ledger, [anchorGuard(o.guard ?? {}), parseJson]);
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  return app;
}
