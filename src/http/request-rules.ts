// The HTTP edge's rules for what a request may be before any route sees it: methods the
// server implements, and the encodings and charsets of request bodies. Every refusal is an
// ApiError, so it is answered in the one JSON error shape (never a 5xx for client input).
// Node's own parse errors, which never reach Koa, are answered by clientErrorHandler below.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from './errors.js';

/**
 * The HTTP methods of RFC 9110 and PATCH: a route that does not take one answers 405 with its
 * Allow. Any other method (TRACE, WebDAV's PROPFIND, MKCOL, LOCK, PURGE, LINK, …) no route
 * takes: 405 with the server's Allow, here, before a route is looked for. Not 501: that is a
 * 5xx, which anyone could then raise at will (and with it the 5xx alarm).
 */
const KNOWN_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);
/** What the server's routes answer between them. */
const ALLOW = 'GET, HEAD, POST, OPTIONS';

/**
 * Checks a request's query, method and body headers; throws the refusal. GET and HEAD
 * requests (the hot read paths) cost a search for '%' in the URL: their bodies are never read.
 */
export function checkRequestEdge(req: IncomingMessage): void {
  checkQueryEncoding(req.url ?? '');
  const method = req.method ?? '';
  if (method === 'GET' || method === 'HEAD') return;
  if (!KNOWN_METHODS.has(method)) {
    throw new ApiError(405, 'method_not_allowed', `${method} is not a method this server takes; it answers ${ALLOW}`, {
      Allow: ALLOW,
    });
  }
  checkBodyHeaders(req);
}

/**
 * The query's percent-encoding must be well formed and decode to UTF-8 (RFC 3986 §2.1,
 * RFC 3629: no `%ZZ`, no overlong `%C0%AF`, no surrogate `%ED%A0%80`), for every route here:
 * node:querystring and Koa would otherwise pass such bytes on, as themselves or as U+FFFD,
 * to be matched, stored or echoed as some other text than the client sent.
 */
export function checkQueryEncoding(url: string): void {
  const q = url.indexOf('?');
  if (q < 0 || url.indexOf('%', q) < 0) return;
  try {
    decodeURIComponent(url.slice(q + 1));
  } catch {
    throw new ApiError(400, 'bad_request', 'the query has a malformed percent-encoding or is not UTF-8 once decoded');
  }
}

/**
 * Bodies are small JSON (an anchor is ~2 KiB): sent as they are, in UTF-8. A compressed or
 * otherwise encoded body is refused rather than inflated (no decompression bombs, no
 * undecodable bodies reaching a parser), and so is any charset but UTF-8 (RFC 8259 §8.1).
 */
export function checkBodyHeaders(req: IncomingMessage): void {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity' && encoding.trim() !== '') {
    throw new ApiError(
      415,
      'unsupported_encoding',
      'request bodies must not be compressed or encoded (Content-Encoding: identity only)',
      { 'Accept-Encoding': 'identity' },
    );
  }
  const type = req.headers['content-type'];
  if (type === undefined) return;
  const charset = charsetOf(type);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ApiError(
      415,
      'unsupported_charset',
      `request bodies must be UTF-8, not ${JSON.stringify(charset.slice(0, 40))}`,
    );
  }
}

/** The charset parameter of a Content-Type, lowercased and unquoted; undefined when absent. */
function charsetOf(contentType: string): string | undefined {
  const params = contentType.split(';').slice(1);
  let found: string | undefined;
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    if (p.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    // Two charset parameters are as bad as a wrong one.
    if (found !== undefined) return 'ambiguous';
    found = p
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return found;
}

/** Node's parse errors this handler answers with a status (everything else: 400). */
const CLIENT_ERROR_STATUS: Readonly<Record<string, readonly [number, string, string]>> = {
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'request headers are too large or too many'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'the request was not received in time'],
  ERR_HTTP_HEADERS_TIMEOUT: [408, 'request_timeout', 'the request headers were not received in time'],
};

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** The raw HTTP/1.1 answer to a request Node could not parse. */
export function clientErrorResponse(errorCode: string | undefined): string {
  const [status, code, message] = CLIENT_ERROR_STATUS[errorCode ?? ''] ?? [
    400,
    'malformed_request',
    'the request is not valid HTTP/1.1',
  ];
  const body = JSON.stringify({ error: { code, message } });
  return (
    `HTTP/1.1 ${status} ${REASONS[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    'Cache-Control: no-store\r\n' +
    'Connection: close\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** A `connect` listener: CONNECT (a proxy's method) is not taken (405); without it Node would just close. */
export function connectHandler(_req: IncomingMessage, socket: Socket): void {
  const body = JSON.stringify({
    error: { code: 'method_not_allowed', message: `CONNECT is not a method this server takes; it answers ${ALLOW}` },
  });
  socket.end(
    'HTTP/1.1 405 Method Not Allowed\r\n' +
      'Content-Type: application/json; charset=utf-8\r\n' +
      'Cache-Control: no-store\r\n' +
      `Allow: ${ALLOW}\r\n` +
      'Connection: close\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/**
 * A `clientError` listener for node:http servers: answers Node's own parse errors (too many
 * or too large headers, Content-Length with Transfer-Encoding, bad characters, a TLS hello
 * on the plain port) in the JSON error shape when the socket can still take an answer (no
 * response of an earlier pipelined request is half written), then closes it.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  const inProgress = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inProgress?.headersSent) {
    socket.destroy();
    return;
  }
  socket.end(clientErrorResponse(err.code));
}
