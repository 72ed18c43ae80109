// POST /add-checkpoint as the witness and the mirror both answer it (tlog-witness; tlog-mirror
// reuses the request): read the body within the size limit, parse it, let the server take
// it, answer its text; a refusal is its status and reason, a 409 with the size held as
// text/x.tlog.size.
import type Koa from 'koa';
import type { Logger } from 'pino';
import getRawBody from 'raw-body';
import { TEXT, answer, internalError } from './plain-answers.js';
import {
  type AddCheckpointRequest,
  MAX_REQUEST_BYTES,
  SIZE_CONTENT_TYPE,
  WitnessError,
  parseAddCheckpoint,
  refuse,
} from './protocol.js';

/** Answers add-checkpoint with what `take` returns (a cosignature line, or '' for a mirror). */
export async function addCheckpointRoute(
  ctx: Koa.Context,
  logger: Logger,
  take: (r: AddCheckpointRequest) => Promise<string>,
): Promise<void> {
  try {
    let text: string;
    try {
      text = await getRawBody(ctx.req, { limit: MAX_REQUEST_BYTES, encoding: 'utf-8' });
    } catch (e) {
      throw refuse.malformed(`unreadable body: ${(e as Error).message}`);
    }
    const body = await take(parseAddCheckpoint(text));
    ctx.status = 200;
    ctx.type = TEXT;
    ctx.body = body;
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
