// HTTP for the client: global fetch with a timeout on every request, errors mapped to one
// clear line (NetworkError / LogAnswerError), bounded retries for idempotent GETs, and counters.
import { LogAnswerError, NetworkError, ResponseError } from './errors.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { readAtMost } from '../core/stored-records.js';

export const DEFAULT_TIMEOUT_MS = 30_000;
export const USER_AGENT = 'stele-cli/0.1.0';

export interface HttpOptions {
  /** Per-request timeout in ms (default 30 s, or STELE_HTTP_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  /** Attempts for a GET that fails on the network or with 5xx/429 (default 3). */
  readonly attempts?: number;
}

export interface HttpStats {
  requests: number;
  bytes: number;
}

export function defaultTimeout(): number {
  const env = Number(process.env.STELE_HTTP_TIMEOUT_MS);
  return Number.isFinite(env) && env > 0 ? env : DEFAULT_TIMEOUT_MS;
}

const NET_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
};

/** Turns whatever fetch threw into a one-line NetworkError. */
export function networkError(url: string, e: unknown, timeoutMs: number): NetworkError {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const where = safeOrigin(url);
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError')
    return new NetworkError(`${where}: no answer within ${timeoutMs} ms`);
  const code = err?.cause?.code;
  if (code && NET_CODES[code]) return new NetworkError(`cannot reach ${where}: ${NET_CODES[code]}`);
  const detail = err?.cause?.message ?? err?.message ?? String(e);
  return new NetworkError(`cannot reach ${where}: ${detail.split('\n')[0]}`);
}

function safeOrigin(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return url;
  }
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

/** One HTTP exchange with timeout; network failures throw NetworkError, any status is returned. */
export async function request(
  url: string,
  init: { method?: string; body?: string; headers?: Record<string, string>; maxBytes?: number } = {},
  options: HttpOptions = {},
  stats?: HttpStats,
): Promise<RawResponse> {
  const timeoutMs = options.timeoutMs ?? defaultTimeout();
  const attempts = init.method && init.method !== 'GET' ? 1 : Math.max(1, options.attempts ?? 3);
  let last: unknown;
  let tooLarge = false;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      if (stats) stats.requests++;
      const res = await fetch(url, {
        method: init.method ?? 'GET',
        body: init.body,
        headers: { 'user-agent': USER_AGENT, ...init.headers },
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'follow',
      });
      // Read as decoded (fetch gunzips a Content-Encoding: gzip answer): bounded, so a
      // small compressed answer cannot expand into memory without end.
      const body =
        init.maxBytes === undefined || !res.body
          ? new Uint8Array(await res.arrayBuffer())
          : await readAtMost(res.body, init.maxBytes);
      if (!body) {
        tooLarge = true;
        break;
      }
      if (stats) stats.bytes += body.length;
      if ((res.status >= 500 || res.status === 429) && attempt < attempts) {
        await sleep(100 * 2 ** attempt);
        continue;
      }
      return { status: res.status, headers: res.headers, body };
    } catch (e) {
      last = e;
      const code = (e as { cause?: { code?: string } })?.cause?.code;
      // Refused connections and unknown hosts do not get better by retrying.
      if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || attempt === attempts) break;
      await sleep(100 * 2 ** attempt);
    }
  }
  if (tooLarge) throw new ResponseError(`${safeOrigin(url)}: the answer is larger than ${init.maxBytes} bytes`);
  throw networkError(url, last, timeoutMs);
}

/** Parses a JSON body, or maps an error status to LogAnswerError with the server's message. */
export function jsonBody(url: string, res: RawResponse): unknown {
  const text = new TextDecoder().decode(res.body);
  if (res.status < 200 || res.status >= 300) {
    type ErrorDocument = { error?: { code?: unknown; message?: unknown } } | null;
    let e: NonNullable<ErrorDocument>['error'];
    try {
      e = (JSON.parse(text) as ErrorDocument)?.error;
    } catch {
      // not a JSON error document
    }
    if (e && typeof e.code === 'string') {
      const message = typeof e.message === 'string' ? e.message : `HTTP ${res.status}`;
      throw new LogAnswerError(
        res.status,
        e.code,
        `${safeOrigin(url)}: ${message} (HTTP ${res.status}, ${e.code})`,
        url,
      );
    }
    // No error document: whatever answered is not a Stele log API (a witness, a mirror, a static site…).
    const what =
      res.status === 404 && new URL(url).pathname.includes('/api/ledger/')
        ? `HTTP 404, and no Stele error document: ${new URL(url).origin} does not serve a Stele log API (a witness, a mirror or another server?); give the log's API as --endpoint, or read a copy of its tiles with --tiles`
        : `HTTP ${res.status}, and no Stele error document`;
    throw new LogAnswerError(res.status, `http_${res.status}`, `${safeOrigin(url)}: ${what}`, url);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ResponseError(`${safeOrigin(url)}: response is not JSON`);
  }
}
