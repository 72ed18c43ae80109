// The Koa application: request logs, metrics, one JSON error shape, the /api/ledger routes,
// the public objects, /healthz, /readyz, /metrics and the explorer.
import { bodyParser } from '@koa/bodyparser';
import Koa, { type Middleware } from 'koa';
import type { Logger } from 'pino';
import type { ObjectReader } from '../store/store.js';
import { checkRequestEdge } from '../http/request-rules.js';
import { respondWithError, throwIfUnanswered } from '../http/errors.js';
import { type GuardOptions, anchorAdmission, anchorGuard } from './anchor-guard.js';
import { type LedgerService, ledgerRouter } from './ledger.js';
import type { Metrics } from './metrics.js';
import { ServedCheckpoint, objectMiddleware } from './objects.js';
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
  /** Readiness: null while the log can take and serve anchors, else why not. */
  readonly notReady?: () => string | null;
  /** True once the server is shutting down: answers then ask clients to close the connection. */
  readonly closing?: () => boolean;
  /** The check of the stored checkpoint (made here if not given; the server shares it with /metrics). */
  readonly servedCheckpoint?: ServedCheckpoint;
}

export function createApp(o: AppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;
  app.use(edgeMiddleware(o));

  // The JSON API first, so its requests (the hot path) skip the site's middleware below.
  const parseJson = bodyParser({
    enableTypes: ['json'],
    jsonLimit: o.bodyLimitBytes ?? 16 * 1024,
    jsonStrict: true,
  });
  const guard = o.guard ?? {};
  const router = ledgerRouter(
    o.ledger,
    [anchorGuard(guard), parseJson],
    anchorAdmission(guard, (allowed) => o.metrics.anchorDecision(allowed)),
  );
  app.use(router.routes());
  // Not thrown: the router sets the status and Allow, and throwIfUnanswered writes the JSON.
  app.use(router.allowedMethods());

  const checkpoint = o.servedCheckpoint ?? new ServedCheckpoint(o.objects, o.ledger, o.logger);
  // Checked at start (its failure logged now, not at the first read); again whenever its bytes change.
  void checkpoint.problem();
  app.use(objectMiddleware(o.ledger, checkpoint));
  app.use(async (ctx, next) => {
    // /healthz is liveness (the process answers: restarting it would not help), /readyz
    // readiness (anchors can be committed and published now, and what is served verifies):
    // a full disk, a failing bucket, too few witnesses or a checkpoint that does not verify
    // make the log unready, not dead.
    if ((ctx.path === '/healthz' || ctx.path === '/readyz') && ctx.method === 'GET') {
      const reason = o.notReady?.() ?? (await checkpoint.problem());
      const treeSize = o.ledger.checkpoint().size;
      ctx.status = reason && ctx.path === '/readyz' ? 503 : 200;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { ok: true, ready: reason === null, ...(reason ? { reason } : {}), treeSize };
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
  return app;
}

/**
 * Around every request, in one middleware (each layer costs the hot path): asks clients to
 * close once the server is closing, refuses what the edge does not take (src/http/request-rules.ts),
 * turns errors into the JSON error shape, and records the request's metrics and log line
 * with its final status. The line is at debug: at a CDN origin's rates it would be a stored
 * line per request, and /metrics counts every request anyway.
 */
function edgeMiddleware(o: AppOptions): Middleware {
  const record = o.metrics.requestRecorder();
  const logRequests = o.logger.isLevelEnabled('debug');
  return async (ctx, next) => {
    const start = performance.now();
    if (o.closing?.()) ctx.set('Connection', 'close');
    try {
      checkRequestEdge(ctx.req);
      await next();
      throwIfUnanswered(ctx);
    } catch (e) {
      respondWithError(ctx, e, o.logger);
    }
    const ms = performance.now() - start;
    record(ctx.path, ctx.method, ctx.status, ms / 1000);
    if (logRequests)
      o.logger.debug(
        { method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms * 10) / 10 },
        'request',
      );
  };
}
