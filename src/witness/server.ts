// HTTP front of a witness: POST /add-checkpoint (C2SP tlog-witness), text bodies.
import Koa from 'koa';
import getRawBody from 'raw-body';
import type { Logger } from 'pino';
import { MAX_REQUEST_BYTES, SIZE_CONTENT_TYPE, WitnessError, parseAddCheckpoint } from './protocol.js';
import type { Witness } from './witness.js';

export function witnessApp(witness: Witness, logger: Logger): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    if (ctx.path !== '/add-checkpoint') {
      ctx.status = 404;
      ctx.body = 'not found\n';
      return;
    }
    if (ctx.method !== 'POST') {
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = 'method not allowed\n';
      return;
    }
    try {
      let text: string;
      try {
        text = await getRawBody(ctx.req, { limit: MAX_REQUEST_BYTES, encoding: 'utf-8' });
      } catch (e) {
        throw new WitnessError(400, `unreadable body: ${(e as Error).message}`);
      }
      const line = await witness.addCheckpoint(parseAddCheckpoint(text));
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = line;
    } catch (e) {
      if (!(e instanceof WitnessError)) {
        logger.error({ err: (e as Error).message }, 'add-checkpoint failed');
        ctx.status = 500;
        ctx.body = 'internal error\n';
        return;
      }
      ctx.status = e.status;
      if (e.status === 409 && e.knownSize !== undefined) {
        ctx.body = `${e.knownSize}\n`;
        ctx.set('Content-Type', SIZE_CONTENT_TYPE);
      } else {
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = `${e.message}\n`;
      }
      logger.info({ status: e.status, reason: e.message }, 'add-checkpoint refused');
    }
  });
  return app;
}
