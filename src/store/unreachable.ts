// A service the program needs cannot be reached: an S3 or DynamoDB endpoint, a KMS key's
// endpoint, a witness, an identity provider. Told as one line naming what was being
// reached, the setting that names it and the reason in words, e.g.
//   cannot reach the S3 endpoint http://127.0.0.1:9 (STELE_S3_ENDPOINT): connection refused (nothing listens on that port)
// where Node says `connect ECONNREFUSED 127.0.0.1:9`. The CLI exits 3 on it (cli/errors.ts).

export class UnreachableError extends Error {
  override name = 'UnreachableError';
  constructor(
    /** What was being reached, e.g. `the S3 endpoint http://127.0.0.1:9`. */
    readonly what: string,
    /** The setting that names it, e.g. `STELE_S3_ENDPOINT`. */
    readonly setting: string,
    /** Why, in words. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot reach ${what} (${setting}): ${reason}`, options);
  }
}

const REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused (nothing listens on that port)',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was closed',
  ETIMEDOUT: 'the connection timed out',
  ESOCKETTIMEDOUT: 'the connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no answer in time',
  UND_ERR_SOCKET: 'the connection was closed',
  ENOTFOUND: 'no such host (the name does not resolve)',
  EAI_AGAIN: 'the host name could not be resolved (DNS lookup failed)',
  EHOSTUNREACH: 'no route to the host',
  ENETUNREACH: 'the network is unreachable',
  EADDRNOTAVAIL: 'the address is not available',
  EPROTO: 'the TLS handshake failed',
  CERT_HAS_EXPIRED: "the server's TLS certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the server's TLS certificate is self-signed and not trusted",
  SELF_SIGNED_CERT_IN_CHAIN: "the server's TLS certificate chain is not trusted",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the server's TLS certificate is not trusted",
  ERR_TLS_CERT_ALTNAME_INVALID: "the server's TLS certificate is for another host name",
};

/** Timeouts the AWS SDK and fetch report by name rather than by code. */
const TIMEOUT_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'AbortError']);

/**
 * The network failure in `e` in words, or null if `e` is none (an HTTP answer, a refusal by
 * the service, a bug). Looks through `cause` (fetch) and `errors` (a connection tried on
 * several addresses).
 */
export function networkReason(e: unknown, depth = 0): string | null {
  if (e === null || typeof e !== 'object' || depth > 4) return null;
  const err = e as { code?: unknown; name?: unknown; cause?: unknown; errors?: unknown; $metadata?: unknown };
  // An answer from the service (it has an HTTP status) was reached, whatever it says.
  const meta = err.$metadata as { httpStatusCode?: number } | undefined;
  if (meta?.httpStatusCode !== undefined) return null;
  if (typeof err.code === 'string' && REASONS[err.code]) return REASONS[err.code]!;
  if (typeof err.name === 'string' && TIMEOUT_NAMES.has(err.name)) return 'no answer in time (timed out)';
  if (Array.isArray(err.errors)) {
    for (const inner of err.errors) {
      const r = networkReason(inner, depth + 1);
      if (r) return r;
    }
  }
  return err.cause === undefined ? null : networkReason(err.cause, depth + 1);
}

/** `e` as an UnreachableError if it is a network failure, else `e` itself. */
export function asUnreachable(e: unknown, what: string, setting: string): unknown {
  if (e instanceof UnreachableError) return e;
  const reason = networkReason(e);
  if (reason === null) return e;
  const out = new UnreachableError(what, setting, reason, { cause: e });
  // What callers read off an SDK error (retries counted from its attempts) stays readable.
  const meta = (e as { $metadata?: unknown }).$metadata;
  if (meta !== undefined) Object.assign(out, { $metadata: meta });
  return out;
}

interface MiddlewareClient {
  readonly middlewareStack: {
    add(
      mw: (next: (args: unknown) => Promise<unknown>) => (args: unknown) => Promise<unknown>,
      options: { step: 'initialize'; name: string },
    ): void;
  };
}

/**
 * Makes every request of an AWS SDK v3 client that fails on the network (after the SDK's
 * own retries) throw an UnreachableError naming `what` and `setting`. Returns the client.
 */
export function reportUnreachable<C>(client: C, what: string, setting: string): C {
  (client as unknown as MiddlewareClient).middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (e) {
        throw asUnreachable(e, what, setting);
      }
    },
    { step: 'initialize', name: 'steleReportUnreachable' },
  );
  return client;
}
