// HTTP front of a witness (C2SP tlog-witness), text bodies, one URL as both prefixes:
//   POST /add-checkpoint                   cosign a checkpoint
//   GET  /<hex SHA-256(origin)>/checkpoint the latest cosigned checkpoint of that log
// Refusals are `<reason>\n` as text/plain (a 409 carries the held size as text/x.tlog.size);
// an unexpected error is logged and answered 500 without its details.
import Koa from 'koa';
import { TEXT, allow, answer } from './plain-answers.js';
import getRawBody from 'raw-body';
import type { Logger } from 'pino';
import {
  MAX_REQUEST_BYTES,
  MONITORING_PATH,
  SIZE_CONTENT_TYPE,
  WitnessError,
  parseAddCheckpoint,
  refuse,
} from './protocol.js';
import type { Witness } from './witness.js';

export function witnessApp(witness: Witness, logger: Logger): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const monitored = MONITORING_PATH.exec(ctx.path);
    if (ctx.path === '/add-checkpoint') {
      if (allow(ctx, ['POST'])) await addCheckpoint(ctx, witness, logger);
    } else if (monitored) {
      if (allow(ctx, ['GET', 'HEAD'])) await latestCheckpoint(ctx, witness, logger, monitored[1]!);
    } else {
      answer(ctx, 404, 'not found');
    }
  });
  return app;
}

async function addCheckpoint(ctx: Koa.Context, witness: Witness, logger: Logger): Promise<void> {
  try {
    let text: string;
    try {
      text = await getRawBody(ctx.req, { limit: MAX_REQUEST_BYTES, encoding: 'utf-8' });
    } catch (e) {
      throw refuse.malformed(`unreadable body: ${(e as Error).message}`);
    }
    const line = await witness.addCheckpoint(parseAddCheckpoint(text));
    ctx.type = TEXT;
    ctx.body = line;
  } catch (e) {
    if (!(e instanceof WitnessError)) return internalError(ctx, logger, e, 'add-checkpoint failed');
    if (e.status === 409 && e.knownSize !== undefined) {
      ctx.status = 409;
      ctx.body = `${e.knownSize}\n`;
      ctx.set('Content-Type', SIZE_CONTENT_TYPE);
    } else {
      answer(ctx, e.status, e.message);
    }
    logger.info({ status: e.status, reason: e.message }, 'add-checkpoint refused');
  }
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

function internalError(ctx: Koa.Context, logger: Logger, e: unknown, what: string): void {
  logger.error({ err: (e as Error).message }, what);
  answer(ctx, 500, 'internal error');
}
