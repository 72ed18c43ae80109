// The two reads every verifier makes, GET /api/ledger/entry and /api/ledger/consistency,
// answered on node:http ahead of Koa: the same handlers (src/api/ledger-reads.ts), the same
// edge rules, error shape, headers and metrics as the Koa application gives them, without
// its context objects, middleware chain and promise hops, which cost these routes about a
// third of their CPU under load (issue 36). Everything else, and any variant of these two
// (HEAD, another method, a trailing slash, an absolute-form URL), goes to the Koa app,
// which stays the compatibility layer; test/http/fast-reads.test.ts checks that both answer
// a corpus of requests with the same bytes.
import type { IncomingMessage, OutgoingHttpHeaders, RequestListener, ServerResponse } from 'node:http';
import type Koa from 'koa';
import { answerableError, errorBody } from '../http/errors.js';
import { checkRequestEdge } from '../http/request-rules.js';
import type { AppOptions } from './app.js';
import type { Maybe } from '../read/reader.js';
import { type ReadAnswer, ledgerReads } from './ledger-reads.js';
import { JSON_TYPE, type Query, parseQueryString } from './route-helpers.js';

type Answerer = (query: Query, accept: string) => Maybe<ReadAnswer>;

/**
 * The server's request listener: the hot reads answered here, every other request by `app`
 * (whose middleware, control plane included, must all be mounted by now).
 */
export function appListener(app: Koa, o: AppOptions): RequestListener {
  const koa = app.callback();
  const reads = ledgerReads(o.ledger);
  const routes = new Map<string, Answerer>([
    ['/api/ledger/entry', reads.entryAnswer],
    ['/api/ledger/consistency', (query) => reads.consistencyAnswer(query)],
  ]);
  const record = o.metrics.requestRecorder();
  const logRequests = o.logger.isLevelEnabled('debug');

  /** Writes the answer as Koa would: its headers in the order Koa sets them, Node adding Date and the connection's. */
  const send = (res: ServerResponse, status: number, extra: Record<string, string>, a: ReadAnswer) => {
    const headers: OutgoingHttpHeaders = o.closing?.() ? { Connection: 'close' } : {};
    headers['Cache-Control'] = 'no-store';
    for (const k in extra) headers[k] = extra[k];
    headers['Content-Type'] = a.type;
    headers['Content-Length'] = typeof a.body === 'string' ? Buffer.byteLength(a.body) : a.body.length;
    res.writeHead(status, headers);
    res.end(a.body);
  };

  /** Records the request's metrics (and debug line) once answered. */
  const done = (path: string, status: number, start: number) => {
    const ms = performance.now() - start;
    record(path, 'GET', status, ms / 1000);
    if (logRequests) o.logger.debug({ method: 'GET', path, status, ms: Math.round(ms * 10) / 10 }, 'request');
  };

  const refuse = (res: ServerResponse, path: string, start: number, e: unknown) => {
    const err = answerableError(e, o.logger, path);
    send(res, err.status, err.headers, { type: JSON_TYPE, body: JSON.stringify(errorBody(err)) });
    done(path, err.status, start);
  };

  /** Answers synchronously when the route can (a warm cache), else once its promise settles. */
  const answer = (req: IncomingMessage, res: ServerResponse, path: string, route: Answerer, q: number) => {
    const start = performance.now();
    let a: Maybe<ReadAnswer>;
    try {
      checkRequestEdge(req);
      a = route(parseQueryString(q < 0 ? '' : req.url!.slice(q + 1)), req.headers.accept ?? '');
    } catch (e) {
      return refuse(res, path, start, e);
    }
    const ok = (answered: ReadAnswer) => {
      send(res, 200, {}, answered);
      done(path, 200, start);
    };
    if (a instanceof Promise) a.then(ok, (e: unknown) => refuse(res, path, start, e));
    else ok(a);
  };

  return (req, res) => {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const route = req.method === 'GET' ? routes.get(path) : undefined;
    // A fragment (never sent by a client) is left to Koa's URL parsing.
    if (!route || url.includes('#')) return void koa(req, res);
    answer(req, res, path, route, q);
  };
}
