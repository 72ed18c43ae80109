// The hammer's writers POST through node:http(s) with one keep-alive connection per writer,
// not fetch: under load the generator must cost less than the log it measures, and fetch's
// web streams cost it several times the log's own CPU per anchor (undici and stream
// machinery were three quarters of a profile of the hammer).
import http from 'node:http';
import https from 'node:https';

export interface PostAnswer {
  readonly status: number;
  /** Retry-After in seconds, if the answer had one. */
  readonly retryAfter: number | undefined;
  readonly body: string;
  /** Sent twice: the first try went out on a kept-alive connection the server had closed. */
  readonly resent: boolean;
}

/** Longer than any anchor timeout a log answers 503 after. */
const ANSWER_TIMEOUT_MS = 120_000;
/** Largest answer read (an anchor's answer is ~1–3 KiB): a runaway body is cut, not buffered. */
const MAX_ANSWER_BYTES = 1 << 20;

class StaleSocketError extends Error {}

export class JsonPoster {
  private readonly agent: http.Agent;
  private readonly url: URL;
  private readonly request: typeof http.request;

  constructor(url: string, connections: number) {
    this.url = new URL(url);
    const secure = this.url.protocol === 'https:';
    this.request = secure ? https.request : http.request;
    const options = { keepAlive: true, maxSockets: connections, maxFreeSockets: connections };
    this.agent = secure ? new https.Agent(options) : new http.Agent(options);
  }

  async post(body: string, headers: Readonly<Record<string, string>> = {}): Promise<PostAnswer> {
    try {
      return await this.once(body, headers, false);
    } catch (e) {
      // Node's documented race: a kept-alive socket the server closed as the request left.
      if (!(e instanceof StaleSocketError)) throw e;
      return this.once(body, headers, true);
    }
  }

  private once(body: string, headers: Readonly<Record<string, string>>, resent: boolean): Promise<PostAnswer> {
    return new Promise((resolve, reject) => {
      const req = this.request(
        this.url,
        {
          method: 'POST',
          agent: this.agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let length = 0;
          res.on('data', (c: Buffer) => {
            length += c.length;
            if (length <= MAX_ANSWER_BYTES) chunks.push(c);
            else res.destroy(new Error(`answer over ${MAX_ANSWER_BYTES} bytes`));
          });
          res.on('error', reject);
          res.on('end', () => {
            const after = Number(res.headers['retry-after']);
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: Number.isFinite(after) && after > 0 ? after : undefined,
              body: Buffer.concat(chunks).toString('utf8'),
              resent,
            });
          });
        },
      );
      req.on('error', (e: NodeJS.ErrnoException) =>
        reject(req.reusedSocket && e.code === 'ECONNRESET' && !resent ? new StaleSocketError(e.message) : e),
      );
      // A log that never answers (a stuck sequencer) shows up as errors, not as a hung run.
      req.setTimeout(ANSWER_TIMEOUT_MS, () => req.destroy(new Error(`no answer in ${ANSWER_TIMEOUT_MS / 1000} s`)));
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
