// A small client of the /v1 API (used by `stele control …` and the tests): JSON calls and
// an SSE reader that resumes with Last-Event-ID after a dropped connection.

export class ControlClientError extends Error {
  override name = 'ControlClientError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

export interface SseMessage {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** Incremental text/event-stream parser (WHATWG HTML §9.2): feed chunks, get complete messages. */
export class SseParser {
  private buf = '';
  private data: string[] = [];
  private event = '';
  private id: string | undefined;

  push(chunk: string): SseMessage[] {
    this.buf += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const nl = this.buf.search(/\r\n|\r|\n/);
      if (nl < 0) break;
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + (this.buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (this.data.length > 0)
          out.push({
            event: this.event || 'message',
            data: this.data.join('\n'),
            ...(this.id !== undefined ? { id: this.id } : {}),
          });
        this.data = [];
        this.event = '';
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') this.data.push(value);
      else if (field === 'event') this.event = value;
      else if (field === 'id' && !value.includes('\0')) this.id = value;
    }
    return out;
  }
}

export interface EventQuery {
  readonly type?: string;
  readonly since?: string;
  readonly until?: string;
  readonly follow?: boolean;
  /** Resume after this event id (sent as Last-Event-ID). */
  readonly lastEventId?: string;
  /** Reconnect (resuming) when a following stream drops (default true). */
  readonly reconnect?: boolean;
  readonly signal?: AbortSignal;
}

export class ControlClient {
  readonly base: string;

  constructor(
    endpoint: string,
    private readonly token: string | undefined,
  ) {
    this.base = endpoint.replace(/\/+$/, '');
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { accept: 'application/json', ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...extra };
  }

  async call<T = Record<string, unknown>>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: this.headers(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new ControlClientError(
        res.status,
        err?.code ?? `http_${res.status}`,
        err?.message ?? `HTTP ${res.status} from ${path}`,
        json,
      );
    }
    if (json === undefined)
      throw new ControlClientError(res.status, 'invalid_response', `${path} did not answer JSON`, text);
    return json as T;
  }

  evaluate(req: { principal: unknown; action: unknown; resource: unknown; context?: unknown }) {
    return this.call('POST', '/v1/policy/evaluate', req);
  }

  lease(req: { doc_id: string; compartment: string; ttl?: string }) {
    return this.call('POST', '/v1/access/lease', req);
  }

  rotate(req: { retire_before?: number } = {}) {
    return this.call('POST', '/v1/keys/rotate', req);
  }

  epochs() {
    return this.call('GET', '/v1/keys/epochs');
  }

  /** Audit events as SSE messages; when following, a dropped stream is resumed from the last id. */
  async *events(q: EventQuery = {}): AsyncGenerator<SseMessage> {
    let last = q.lastEventId;
    const params = new URLSearchParams();
    if (q.type) params.set('type', q.type);
    if (q.since) params.set('since', q.since);
    if (q.until) params.set('until', q.until);
    if (q.follow === false) params.set('follow', 'false');
    const url = `${this.base}/v1/audit/events${params.size > 0 ? `?${params}` : ''}`;
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(url, {
        headers: this.headers({
          accept: 'text/event-stream',
          ...(last !== undefined ? { 'last-event-id': last } : {}),
        }),
        ...(q.signal ? { signal: q.signal } : {}),
      });
      if (!res.ok || !res.body) {
        const json = (await res.json().catch(() => undefined)) as
          | { error?: { code?: string; message?: string } }
          | undefined;
        throw new ControlClientError(
          res.status,
          json?.error?.code ?? `http_${res.status}`,
          json?.error?.message ?? `HTTP ${res.status}`,
          json,
        );
      }
      const parser = new SseParser();
      const decoder = new TextDecoder();
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          for (const m of parser.push(decoder.decode(chunk, { stream: true }))) {
            if (m.id !== undefined) last = m.id;
            yield m;
          }
        }
      } catch (e) {
        if (q.signal?.aborted) return;
        if (q.follow === false || q.reconnect === false) throw e;
      }
      if (q.follow === false || q.reconnect === false || q.signal?.aborted) return;
      await new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** Math.min(attempt, 5))));
    }
  }
}
