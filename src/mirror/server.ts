// HTTP front of a mirror (C2SP tlog-mirror), one URL as both submission and monitoring prefix:
//   POST /add-checkpoint                 tlog-witness add-checkpoint (updates the pending checkpoint)
//   POST /add-entries                    the binary upload, gzip accepted
//   GET  /<hex SHA-256(origin)>/checkpoint, /<hex SHA-256(origin)>/tile/…   the copy, as tlog-tiles
// Protocol answers are the texts' bodies (text/x.tlog.size, text/x.tlog.mirror-info, signature
// lines); other refusals are `<reason>\n` as text/plain, as the witness answers them.
import { createGunzip } from 'node:zlib';
import Koa from 'koa';
import type { Logger } from 'pino';
import { parseTilePath } from '../core/tiles.js';
import { addCheckpointRoute } from '../witness/add-checkpoint-route.js';
import { TEXT, allow, answer, internalError } from '../witness/plain-answers.js';
import type { Mirror } from './mirror.js';
import {
  AddEntriesReader,
  MIRROR_INFO_CONTENT_TYPE,
  MirrorError,
  TruncatedError,
  formatMirrorInfo,
} from './protocol.js';

const COPY_PATH = /^\/([0-9a-f]{64})\/(checkpoint|tile\/.+)$/;

export function mirrorApp(mirror: Mirror, logger: Logger): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const copy = COPY_PATH.exec(ctx.path);
    if (ctx.path === '/add-checkpoint') {
      if (allow(ctx, ['POST']))
        // "The mirror MAY handle the request by internally updating the pending checkpoint and responding with an empty response body."
        await addCheckpointRoute(ctx, logger, async (r) => {
          await mirror.addCheckpoint(r);
          return '';
        });
    } else if (ctx.path === '/add-entries') {
      if (allow(ctx, ['POST'])) await addEntries(ctx, mirror, logger);
    } else if (copy) {
      if (allow(ctx, ['GET', 'HEAD'])) await serveCopy(ctx, mirror, logger, copy[1]!, copy[2]!);
    } else {
      answer(ctx, 404, 'not found');
    }
  });
  return app;
}

/** The request body as chunks, gunzipped if so encoded; a stream that fails reads as one that ended early. */
async function* bodyChunks(ctx: Koa.Context): AsyncGenerator<Uint8Array> {
  const encoding = (ctx.get('Content-Encoding') || 'identity').toLowerCase();
  const source = encoding === 'gzip' ? ctx.req.pipe(createGunzip()) : ctx.req;
  try {
    for await (const chunk of source) yield chunk as Uint8Array;
  } catch (e) {
    throw new TruncatedError(`the body could not be read: ${(e as Error).message}`);
  }
}

async function addEntries(ctx: Koa.Context, mirror: Mirror, logger: Logger): Promise<void> {
  // "mirrors SHOULD send an Accept-Encoding header that includes gzip".
  ctx.set('Accept-Encoding', 'gzip');
  const encoding = (ctx.get('Content-Encoding') || 'identity').toLowerCase();
  if (encoding !== 'gzip' && encoding !== 'identity')
    return answer(ctx, 415, `unsupported Content-Encoding ${encoding}; use gzip`);
  try {
    const result = await mirror.addEntries(new AddEntriesReader(bodyChunks(ctx)));
    if (result.status === 200) {
      ctx.type = TEXT;
      ctx.body = result.cosignature;
    } else {
      ctx.status = 202;
      ctx.set('Content-Type', MIRROR_INFO_CONTENT_TYPE);
      ctx.body = formatMirrorInfo(result.info);
      ctx.set('Connection', 'close'); // the rest of the body is not read
    }
  } catch (e) {
    if (!(e instanceof MirrorError)) return internalError(ctx, logger, e, 'add-entries failed');
    ctx.set('Connection', 'close');
    if (e.info) {
      ctx.status = e.status;
      ctx.set('Content-Type', MIRROR_INFO_CONTENT_TYPE);
      ctx.body = formatMirrorInfo(e.info);
    } else {
      answer(ctx, e.status, e.message);
    }
    logger.info({ status: e.status, reason: e.message }, 'add-entries refused');
  }
}

/** The copy as tlog-tiles: the cosigned mirror checkpoint and immutable tiles and bundles. */
async function serveCopy(ctx: Koa.Context, mirror: Mirror, logger: Logger, hash: string, key: string): Promise<void> {
  const copy = mirror.copy(hash);
  if (!copy) return answer(ctx, 404, 'this mirror does not mirror that log');
  if (key !== 'checkpoint' && !parseTilePath(key)) return answer(ctx, 404, 'not a tile path');
  try {
    const data = await copy.store.get(key);
    if (!data) return answer(ctx, 404, key === 'checkpoint' ? 'no checkpoint mirrored yet' : 'no such tile');
    ctx.set('Cache-Control', key === 'checkpoint' ? 'no-cache' : 'public, max-age=31536000, immutable');
    ctx.type = key === 'checkpoint' ? TEXT : 'application/octet-stream';
    ctx.body = Buffer.from(data);
  } catch (e) {
    internalError(ctx, logger, e, 'copy read failed');
  }
}
