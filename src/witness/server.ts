// HTTP front of a witness (C2SP tlog-witness), text bodies, one URL as both prefixes:
//   POST /add-checkpoint                   cosign a checkpoint
//   GET  /<hex SHA-256(origin)>/checkpoint the latest cosigned checkpoint of that log
// Refusals are `<reason>\n` as text/plain (a 409 carries the held size as text/x.tlog.size);
// an unexpected error is logged and answered 500 without its details.
import Koa from 'koa';
import type { Logger } from 'pino';
import { addCheckpointRoute } from './add-checkpoint-route.js';
import { TEXT, allow, answer, internalError } from './plain-answers.js';
import { MONITORING_PATH } from './protocol.js';
import type { Witness } from './witness.js';

export function witnessApp(witness: Witness, logger: Logger): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const monitored = MONITORING_PATH.exec(ctx.path);
    if (ctx.path === '/add-checkpoint') {
      if (allow(ctx, ['POST'])) await addCheckpointRoute(ctx, logger, (r) => witness.addCheckpoint(r));
    } else if (monitored) {
      if (allow(ctx, ['GET', 'HEAD'])) await latestCheckpoint(ctx, witness, logger, monitored[1]!);
    } else {
      answer(ctx, 404, 'not found');
    }
  });
  return app;
}

/**
 * tlog-witness "Monitor Retrieval Mechanism": the checkpoint with the log signature the
 * witness verified and its own cosignature; "If the witness has never cosigned a checkpoint
 * for that log, it MUST respond with a "404 Not Found"". It is served as it is stored, so
 * it is never older than the last cosignature (the text allows up to an hour).
 */
async function latestCheckpoint(ctx: Koa.Context, witness: Witness, logger: Logger, hash: string): Promise<void> {
  try {
    const note = await witness.latestCheckpoint(hash);
    if (note === null) return answer(ctx, 404, 'no checkpoint cosigned for this log');
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = TEXT;
    ctx.body = note;
  } catch (e) {
    internalError(ctx, logger, e, 'checkpoint read failed');
  }
}
