// A real S3-protocol server on loopback for tests and benchmarks: s3rver (npm), which
// speaks the S3 REST API (SigV4, path-style) over a temporary directory. Note: s3rver
// ignores If-None-Match / If-Match on PUT, so conditional writes are not enforced by it
// (test/aws/s3.test.ts probes and says so).
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverCtor = new (options: Record<string, unknown>) => S3rverInstance;
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverCtor;

export interface S3Server {
  readonly endpoint: string;
  readonly bucket: string;
  /** The fixed credentials s3rver accepts. */
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
  readonly dir: string;
  close(): Promise<void>;
}

export async function startS3Server(bucket = 'stele'): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), 'stele-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    dir,
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------
// TEST BOUNDARY — ConditionalS3Shim: an HTTP handler placed between the S3 client and
// s3rver. s3rver ignores If-None-Match / If-Match on PUT, so to exercise S3ObjectStore's
// handling of the answers real S3 gives, this shim emulates them: before forwarding a
// conditional PUT it HEADs the key through a plain client and, when the condition does
// not hold, answers 412 PreconditionFailed (or 404 for If-Match on a missing key) with an
// S3 error document, as AWS does. The emulation is not atomic (fine for tests that do not
// race on one key). It can also inject faults below the SDK's retry strategy: 409
// ConditionalRequestConflict, 503 SlowDown, or a 500 after the PUT has landed (a lost
// response). Everything else passes through to the real server unchanged.
// ---------------------------------------------------------------------------------------

interface ShimRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
}
interface ShimResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: unknown;
}
interface InnerHandler {
  handle(request: ShimRequest, options?: unknown): Promise<{ response: ShimResponse }>;
  updateHttpClientConfig?(key: never, value: never): void;
  httpHandlerConfigs?(): unknown;
}

export interface Fault {
  readonly status: number;
  readonly code: string;
  /** Forward the request first (it lands), then answer with the fault: a lost response. */
  readonly afterLanding?: boolean;
}

const MESSAGES: Record<string, string> = {
  PreconditionFailed: 'At least one of the pre-conditions you specified did not hold',
  ConditionalRequestConflict: 'A conflicting conditional operation is currently in progress against this resource.',
  SlowDown: 'Please reduce your request rate.',
  InternalError: 'We encountered an internal error. Please try again.',
  NoSuchKey: 'The specified key does not exist.',
};

function errorResponse(status: number, code: string): { response: ShimResponse } {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${MESSAGES[code] ?? code}</Message><RequestId>SHIM</RequestId><HostId>shim</HostId></Error>`;
  return {
    response: {
      statusCode: status,
      headers: { 'content-type': 'application/xml', 'x-amz-request-id': 'SHIM' },
      body: Readable.from([Buffer.from(xml)]),
    },
  };
}

export class ConditionalS3Shim {
  /** Faults for the next PUTs, in order. */
  readonly faults: Fault[] = [];
  /** Emulate S3's conditional-write semantics (off: headers pass through to s3rver, which ignores them). */
  emulateConditions = true;
  /** Every PUT seen: key and the conditional headers it carried. */
  readonly puts: { key: string; ifNoneMatch?: string; ifMatch?: string }[] = [];
  inFlight = 0;
  maxInFlight = 0;
  private readonly inner: InnerHandler;

  constructor(
    private readonly plain: S3Client,
    private readonly bucket: string,
    /** Delay added to each PUT, to make parallelism observable. */
    private readonly putDelayMs = 0,
  ) {
    this.inner = plain.config.requestHandler as unknown as InnerHandler;
  }

  updateHttpClientConfig(key: never, value: never): void {
    this.inner.updateHttpClientConfig?.(key, value);
  }

  httpHandlerConfigs(): unknown {
    return this.inner.httpHandlerConfigs?.() ?? {};
  }

  destroy(): void {}

  private keyOf(path: string): string {
    const p = decodeURIComponent(path);
    const prefix = `/${this.bucket}/`;
    return p.startsWith(prefix) ? p.slice(prefix.length) : p.replace(/^\//, '');
  }

  private async etagOf(key: string): Promise<string | null> {
    try {
      return (await this.plain.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }))).ETag ?? null;
    } catch (e) {
      if ((e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return null;
      throw e;
    }
  }

  async handle(request: ShimRequest, options?: unknown): Promise<{ response: ShimResponse }> {
    if (request.method !== 'PUT') return this.inner.handle(request, options);
    const header = (name: string) => Object.entries(request.headers).find(([k]) => k.toLowerCase() === name)?.[1];
    const key = this.keyOf(request.path);
    const ifNoneMatch = header('if-none-match');
    const ifMatch = header('if-match');
    this.puts.push({ key, ifNoneMatch, ifMatch });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.putDelayMs) await new Promise((r) => setTimeout(r, this.putDelayMs));
      const fault = this.faults.shift();
      if (fault && !fault.afterLanding) return errorResponse(fault.status, fault.code);
      if (this.emulateConditions && (ifNoneMatch === '*' || ifMatch !== undefined)) {
        const etag = await this.etagOf(key);
        if (ifNoneMatch === '*' && etag !== null) return errorResponse(412, 'PreconditionFailed');
        if (ifMatch !== undefined && etag === null) return errorResponse(404, 'NoSuchKey');
        if (ifMatch !== undefined && etag !== ifMatch) return errorResponse(412, 'PreconditionFailed');
      }
      const result = await this.inner.handle(request, options);
      if (fault?.afterLanding) {
        (result.response.body as Readable | undefined)?.resume?.();
        return errorResponse(fault.status, fault.code);
      }
      return result;
    } finally {
      this.inFlight--;
    }
  }
}

/** A plain client for s3rver (no shim): what the shim probes through, and what tests inspect the bucket with. */
export function plainClient(server: S3Server): S3Client {
  return new S3Client({
    endpoint: server.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: server.credentials,
  });
}
