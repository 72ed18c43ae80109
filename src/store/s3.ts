// ObjectStore on Amazon S3 (or any S3-compatible endpoint: --s3-endpoint, path-style).
//
//   create   PutObject with `If-None-Match: *`. A 412 means the key exists: the object is
//            read back, identical content counts as created (this is also how a retried PUT
//            whose first attempt landed resolves), other content is ImmutableConflictError.
//   gzip     record bundles are stored compressed, with `Content-Encoding: gzip`, and read
//            back decompressed (src/store/stored-form.ts).
//   swap     PutObject with `If-Match: <ETag>` (`If-None-Match: *` when creating). A 412 is
//            VersionConflictError unless the object already holds exactly our bytes.
//   If-Match RFC 9110 and AWS S3 take the ETag quoted, as S3 returns it; Ceph RGW 16 compares
//            If-Match with the bare value and refuses the quoted one. The probe finds which
//            form the endpoint honours; without a probe, a 412 for the ETag the object still
//            has is retried once in the other form (still conditional, so a writer that got
//            in between is refused all the same) and that form is kept.
//   retries  the SDK's standard strategy retries throttling (SlowDown, 429) and 5xx with
//            exponential backoff and jitter; 409 ConditionalRequestConflict (a concurrent
//            conditional write to the same key) is retried here, with backoff, because the
//            SDK does not treat it as retryable.
//
// Conditional writes need an endpoint that honours them (AWS S3 since 2024, MinIO, R2, …);
// probeConditionalWrites() tells, and openAwsLog() refuses an endpoint that ignores them
// unless told otherwise. Partial tiles replaced by a full tile are removed by
// PartialSweeper (below), not by a lifecycle rule: a rule cannot express "a `.p/` key whose
// full tile exists", and an age-based rule would delete the right edge of a quiet log.
import { randomBytes } from 'node:crypto';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import pLimit from 'p-limit';
import { bytesEqual } from '../core/hash.js';
import { type ObjectMeta, objectMeta } from './layout.js';
import { contentOf, isStoredCompressed, storedForm } from './stored-form.js';
import {
  ImmutableConflictError,
  type ObjectStore,
  type StoreStats,
  type StoredObject,
  type VersionedObject,
  VersionConflictError,
  assertValidKey,
} from './store.js';
import { reportUnreachable } from './unreachable.js';
import { TILE_WIDTH, type TileKind, levelHashCount, partialTilesAt, tilePath } from '../core/tiles.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface S3ConnectionOptions {
  readonly region?: string;
  /** An S3-compatible endpoint, e.g. http://127.0.0.1:9000 (default: AWS for the region). */
  readonly endpoint?: string;
  /** Path-style addressing (endpoint/bucket/key), needed by most S3-compatible servers. */
  readonly forcePathStyle?: boolean;
  readonly credentials?: S3ClientConfig['credentials'];
  /** SDK attempts per request, first included (default 6). */
  readonly maxAttempts?: number;
  /** Per-attempt timeout in ms (default 30,000). */
  readonly requestTimeoutMs?: number;
  /** Anything else for the client (tests inject a requestHandler here). */
  readonly clientConfig?: S3ClientConfig;
}

export interface S3StoreOptions extends S3ConnectionOptions {
  readonly bucket: string;
  /** Key prefix of this store: '' or ending in '/', e.g. 'log/' (public) or 'private/' (staging). */
  readonly prefix?: string;
  /** A client to share between stores (connection options are then ignored). */
  readonly client?: S3Client;
  /** Parallel PUTs in createAll (default 32). */
  readonly concurrency?: number;
  /** Retries of 409 ConditionalRequestConflict per write (default 8). */
  readonly conflictRetries?: number;
  /** How If-Match carries the ETag, if known (default quoted, corrected by probe or by a refused current ETag). */
  readonly ifMatchForm?: IfMatchForm;
  /** Content-Type and Cache-Control per key (default objectMeta of docs/design.md §1.2). */
  readonly meta?: (key: string) => ObjectMeta;
}

/** Request counters: the StoreStats every store keeps, plus what S3 bills separately. */
export interface S3StoreStats extends StoreStats {
  /** ListObjectsV2 requests (sweeper); billed like PUTs. */
  lists: number;
  /** Extra HTTP attempts the SDK made (throttling, 5xx, network), plus 409 retries. */
  retries: number;
}

export interface SweepResult {
  /** Full tiles whose partial versions were looked for. */
  readonly tiles: number;
  /** Partial objects deleted. */
  readonly deleted: number;
  /** Full tiles not found (their partials were kept). */
  readonly missingFull: number;
}

/**
 * How a PUT's If-Match carries the ETag: `quoted` as S3 returns it and RFC 9110 requires
 * (AWS S3, MinIO), or `bare`, without the quotes (Ceph RGW 16 matches only this form).
 */
export type IfMatchForm = 'quoted' | 'bare';

/** The ETag `etag` (as S3 returns it, quoted) written in `form`. */
export function ifMatchValue(etag: string, form: IfMatchForm): string {
  const bare = etag.replace(/^"(.*)"$/, '$1');
  return form === 'bare' ? bare : `"${bare}"`;
}

export interface ConditionalWriteSupport {
  /** A second `If-None-Match: *` PUT of an existing key was refused with 412. */
  readonly ifNoneMatch: boolean;
  /** Wrong `If-Match` ETags (quoted and bare) were refused with 412, and the right one accepted. */
  readonly ifMatch: boolean;
  /** The form in which the right ETag was accepted (quoted tried first). */
  readonly ifMatchForm?: IfMatchForm;
}

interface AwsError {
  name?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number; attempts?: number };
}

function status(e: unknown): number | undefined {
  return (e as AwsError)?.$metadata?.httpStatusCode;
}

function code(e: unknown): string | undefined {
  return (e as AwsError)?.name ?? (e as AwsError)?.Code;
}

const isPreconditionFailed = (e: unknown) => status(e) === 412 || code(e) === 'PreconditionFailed';
const isConditionalConflict = (e: unknown) => status(e) === 409 || code(e) === 'ConditionalRequestConflict';
const isNotFound = (e: unknown) => status(e) === 404 || code(e) === 'NoSuchKey' || code(e) === 'NotFound';

/** Builds an S3 client with Stele's defaults: standard retries, bounded timeouts. */
export function createS3Client(o: S3ConnectionOptions = {}): S3Client {
  const region = o.region ?? process.env.AWS_REGION ?? 'us-east-1';
  // A request that fails on the network says which endpoint and which setting names it
  // (`stele serve` reads the endpoint from STELE_S3_ENDPOINT, the region from AWS_REGION).
  const [what, setting] = o.endpoint
    ? [`the S3 endpoint ${o.endpoint}`, 'STELE_S3_ENDPOINT']
    : [`AWS S3 in ${region}`, 'AWS_REGION'];
  const client = new S3Client({
    region,
    ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    forcePathStyle: o.forcePathStyle ?? false,
    ...(o.credentials ? { credentials: o.credentials } : {}),
    maxAttempts: o.maxAttempts ?? 6,
    retryMode: 'standard',
    requestHandler: { connectionTimeout: 5_000, requestTimeout: o.requestTimeoutMs ?? 30_000 },
    ...o.clientConfig,
  });
  return reportUnreachable(client, what, setting);
}

export class S3ObjectStore implements ObjectStore {
  readonly stats: S3StoreStats = { gets: 0, puts: 0, deletes: 0, lists: 0, retries: 0 };
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  private readonly limit: ReturnType<typeof pLimit>;
  private readonly conflictRetries: number;
  private readonly meta: (key: string) => ObjectMeta;
  /** How If-Match carries the ETag on this endpoint (see ifMatchValue). */
  ifMatchForm: IfMatchForm;

  constructor(options: S3StoreOptions) {
    const prefix = options.prefix ?? '';
    if (prefix !== '' && !/^([A-Za-z0-9._-]+\/)+$/.test(prefix)) {
      throw new Error(`S3 key prefix ${JSON.stringify(prefix)} must be empty or safe path segments ending in '/'`);
    }
    this.client = options.client ?? createS3Client(options);
    this.bucket = options.bucket;
    this.prefix = prefix;
    this.limit = pLimit(options.concurrency ?? 32);
    this.conflictRetries = options.conflictRetries ?? 8;
    this.meta = options.meta ?? objectMeta;
    this.ifMatchForm = options.ifMatchForm ?? 'quoted';
  }

  private s3Key(key: string): string {
    assertValidKey(key);
    return this.prefix + key;
  }

  private countRetries(e: unknown): void {
    const attempts = (e as AwsError)?.$metadata?.attempts;
    if (attempts && attempts > 1) this.stats.retries += attempts - 1;
  }

  async get(key: string): Promise<Uint8Array | null> {
    return (await this.getVersioned(key))?.data ?? null;
  }

  async getVersioned(key: string): Promise<VersionedObject | null> {
    const Key = this.s3Key(key);
    this.stats.gets++;
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key }));
      this.countRetries(res);
      const data = await contentOf(key, await res.Body!.transformToByteArray());
      return { data, version: res.ETag ?? '' };
    } catch (e) {
      this.countRetries(e);
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  /** Every PUT is durable once answered and never torn, so CreateOptions change nothing here. */
  async createAll(objects: readonly StoredObject[]): Promise<void> {
    for (const o of objects) this.s3Key(o.key);
    await Promise.all(objects.map((o) => this.limit(() => this.createOne(o.key, o.data))));
  }

  async persist(): Promise<void> {}

  private async createOne(key: string, data: Uint8Array): Promise<void> {
    const stored = await storedForm(key, data);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.put(key, stored, { IfNoneMatch: '*' });
        return;
      } catch (e) {
        if (isPreconditionFailed(e)) {
          const existing = await this.get(key);
          if (existing === null && attempt < this.conflictRetries) continue; // deleted in between: create again
          if (existing === null) throw new Error(`${key}: refused as existing, then not found (${attempt + 1} times)`);
          if (bytesEqual(existing, data)) return;
          throw new ImmutableConflictError(key);
        }
        if (isConditionalConflict(e) && attempt < this.conflictRetries) {
          await this.backoff(attempt);
          continue;
        }
        throw e;
      }
    }
  }

  async swap(key: string, data: Uint8Array, expected: string | null): Promise<string> {
    let form = this.ifMatchForm;
    let otherFormTried = false;
    for (let attempt = 0; ; attempt++) {
      try {
        const version = await this.put(
          key,
          data,
          expected === null ? { IfNoneMatch: '*' } : { IfMatch: ifMatchValue(expected, form) },
        );
        this.ifMatchForm = form;
        return version;
      } catch (e) {
        if (isPreconditionFailed(e) || (expected !== null && isNotFound(e))) {
          // A retried PUT whose first attempt landed also ends here: it is ours if the
          // object now holds exactly our bytes.
          const current = await this.getVersioned(key);
          if (current && bytesEqual(current.data, data)) return current.version;
          // Refused although `expected` is the current ETag: the endpoint wants the other
          // form. The retry is conditional too: it replaces only that same version.
          if (expected !== null && current?.version === expected && !otherFormTried) {
            otherFormTried = true;
            form = form === 'quoted' ? 'bare' : 'quoted';
            continue;
          }
          throw new VersionConflictError(key);
        }
        if (isConditionalConflict(e) && attempt < this.conflictRetries) {
          await this.backoff(attempt);
          continue;
        }
        throw e;
      }
    }
  }

  async delete(key: string): Promise<void> {
    const Key = this.s3Key(key);
    this.stats.deletes++;
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }));
  }

  async *list(prefix: string): AsyncIterable<string> {
    let token: string | undefined;
    do {
      this.stats.lists++;
      const res = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix + prefix, ContinuationToken: token }),
      );
      for (const o of res.Contents ?? []) if (o.Key !== undefined) yield o.Key.slice(this.prefix.length);
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
  }

  /** Deletes keys with DeleteObjects, 1,000 per request (DELETE requests are not billed by S3). */
  async deleteMany(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const chunk = keys.slice(i, i + 1000).map((k) => this.s3Key(k));
      this.stats.deletes++;
      const res = await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.bucket,
          Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true },
        }),
      );
      if (res.Errors?.length) throw new Error(`deleting ${res.Errors[0]?.Key} failed: ${res.Errors[0]?.Code}`);
    }
  }

  private async put(
    key: string,
    data: Uint8Array,
    condition: { IfNoneMatch?: string; IfMatch?: string },
  ): Promise<string> {
    const m = this.meta(key);
    this.stats.puts++;
    try {
      const res = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.s3Key(key),
          Body: data,
          ContentType: m.contentType,
          CacheControl: m.cacheControl,
          // S3 (and CloudFront in front of it) then serve the stored bytes with this header.
          ...(isStoredCompressed(key, data) ? { ContentEncoding: 'gzip' } : {}),
          ...condition,
        }),
      );
      this.countRetries(res);
      return res.ETag ?? '';
    } catch (e) {
      this.countRetries(e);
      throw e;
    }
  }

  private async backoff(attempt: number): Promise<void> {
    this.stats.retries++;
    const cap = Math.min(2_000, 50 * 2 ** attempt);
    await sleep(cap / 2 + Math.random() * (cap / 2));
  }

  /**
   * Deletes the partial versions (`<tile>.p/<W>`) of every tile that became full between
   * tree sizes `fromSize` and `upToSize` — hash tiles of all levels and both bundle kinds.
   * Call it only with sizes of published checkpoints: all their full tiles exist. Each
   * tile's listing must also show the full tile, or its partials are kept. Readers never
   * need a partial once the full tile exists (they cut the prefix from the full tile).
   */
  async sweepPartials(upToSize: number, fromSize = 0): Promise<SweepResult> {
    const jobs: { kind: TileKind; index: number }[] = [];
    for (const kind of ['entries', 'records'] as const) {
      for (let n = Math.floor(fromSize / TILE_WIDTH); n < Math.floor(upToSize / TILE_WIDTH); n++)
        jobs.push({ kind, index: n });
    }
    for (let level = 0; levelHashCount(level, upToSize) >= TILE_WIDTH; level++) {
      const lo = Math.floor(levelHashCount(level, fromSize) / TILE_WIDTH);
      const hi = Math.floor(levelHashCount(level, upToSize) / TILE_WIDTH);
      for (let n = lo; n < hi; n++) jobs.push({ kind: level, index: n });
    }
    let deleted = 0;
    let missingFull = 0;
    await Promise.all(
      jobs.map((job) =>
        this.limit(async () => {
          const full = this.s3Key(tilePath({ kind: job.kind, index: job.index, width: TILE_WIDTH }));
          const partials = `${full}.p/`;
          const keys: string[] = [];
          let sawFull = false;
          let token: string | undefined;
          do {
            this.stats.lists++;
            // Prefix `tile/<k>/<N>` lists the full tile and its `.p/` partials, nothing else.
            const res = await this.client.send(
              new ListObjectsV2Command({ Bucket: this.bucket, Prefix: full, ContinuationToken: token }),
            );
            for (const o of res.Contents ?? []) {
              if (o.Key === full) sawFull = true;
              else if (o.Key?.startsWith(partials)) keys.push(o.Key);
            }
            token = res.IsTruncated ? res.NextContinuationToken : undefined;
          } while (token);
          if (!sawFull) {
            missingFull++;
            return;
          }
          for (let i = 0; i < keys.length; i += 1000) {
            const chunk = keys.slice(i, i + 1000);
            this.stats.deletes++;
            const res = await this.client.send(
              new DeleteObjectsCommand({
                Bucket: this.bucket,
                Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true },
              }),
            );
            if (res.Errors?.length)
              throw new Error(`deleting partial tiles failed: ${res.Errors[0]?.Key} ${res.Errors[0]?.Code}`);
            deleted += chunk.length;
          }
        }),
      ),
    );
    return { tiles: jobs.length, deleted, missingFull };
  }

  /**
   * Checks that the endpoint enforces conditional PUTs, with a throwaway key under this
   * store's prefix: create, create again (must be refused), overwrite with a wrong ETag in
   * If-Match, quoted and bare (both must be refused), then with the right ETag, quoted and
   * else bare (one must be accepted: that form is kept for swap), delete. Some
   * S3-compatible servers ignore the headers; Ceph RGW 16 accepts only the bare ETag.
   */
  async probeConditionalWrites(): Promise<ConditionalWriteSupport> {
    const key = `.probe-${randomBytes(8).toString('hex')}`;
    const refused = async (condition: { IfNoneMatch?: string; IfMatch?: string }): Promise<boolean> => {
      try {
        await this.put(key, new Uint8Array([2]), condition);
        return false;
      } catch (e) {
        if (isPreconditionFailed(e)) return true;
        throw e;
      }
    };
    const etag = await this.put(key, new Uint8Array([1]), { IfNoneMatch: '*' });
    try {
      const ifNoneMatch = await refused({ IfNoneMatch: '*' });
      const wrong = '"00000000000000000000000000000000"';
      const wrongRefused =
        (await refused({ IfMatch: ifMatchValue(wrong, 'quoted') })) &&
        (await refused({ IfMatch: ifMatchValue(wrong, 'bare') }));
      let ifMatchForm: IfMatchForm | undefined;
      if (wrongRefused) {
        for (const form of ['quoted', 'bare'] as const) {
          if (!(await refused({ IfMatch: ifMatchValue(etag, form) }))) {
            ifMatchForm = this.ifMatchForm = form;
            break;
          }
        }
      }
      return { ifNoneMatch, ifMatch: ifMatchForm !== undefined, ...(ifMatchForm ? { ifMatchForm } : {}) };
    } finally {
      await this.delete(key);
    }
  }
}

/** A number kept durably that only grows (DynamoMark): how far partial tiles are swept. */
export interface SweepMark {
  get(): Promise<number>;
  advance(size: number): Promise<void>;
}

/**
 * Removes partial tiles once their full tile is published, at almost no request cost:
 *   - every published size names exactly the partial tiles it wrote (partialTilesAt), so
 *     the sweeper remembers them and deletes them by key with DeleteObjects (not billed)
 *     as soon as their full tile is published — no LIST needed;
 *   - partials written before this process started (up to the tile that was partial at
 *     start) are found once with sweepPartials() (one LIST per tile and kind), from the
 *     durable mark onwards, when that tile completes; the mark then follows the log.
 * Level ≥ 1 partials a previous process wrote at its last sizes are not revisited (a few
 * small objects per restart); `sweepPartials(size, 0)` cleans everything if ever needed.
 * Sweeping never blocks publishing; a failed sweep is retried after the next publish.
 */
export class PartialSweeper {
  private readonly known = new Map<string, { level: number; index: number }>();
  private wanted = 0;
  private running: Promise<void> | undefined;
  private catchUp: { from: number; until: number } | undefined;
  readonly stats = { deleted: 0, listSweeps: 0 };

  private constructor(
    private readonly store: S3ObjectStore,
    private readonly mark: SweepMark,
    startSize: number,
    markSize: number,
    private readonly onError: (e: Error) => void,
  ) {
    // Tiles from the mark up to the one partial at start may hold partials of earlier processes.
    const until = (Math.floor(startSize / TILE_WIDTH) + 1) * TILE_WIDTH;
    if (startSize > 0 && Math.floor(markSize / TILE_WIDTH) < Math.floor(until / TILE_WIDTH))
      this.catchUp = { from: markSize, until };
  }

  static async start(
    store: S3ObjectStore,
    mark: SweepMark,
    startSize: number,
    onError: (e: Error) => void,
  ): Promise<PartialSweeper> {
    return new PartialSweeper(store, mark, startSize, await mark.get(), onError);
  }

  /** Call after every publish (and for a batch re-applied on recovery). */
  published(size: number): void {
    for (const t of partialTilesAt(size)) this.known.set(tilePath(t), { level: t.level, index: t.index });
    this.wanted = Math.max(this.wanted, size);
    if (!this.running) {
      this.running = this.sweep()
        .catch((e: unknown) => this.onError(e as Error))
        .finally(() => {
          this.running = undefined;
        });
    }
  }

  /** Settles when no sweep is running. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async sweep(): Promise<void> {
    for (let done = -1; done !== this.wanted; ) {
      const size = (done = this.wanted);
      const ready = [...this.known]
        .filter(([, t]) => t.index < Math.floor(levelHashCount(t.level, size) / TILE_WIDTH))
        .map(([k]) => k);
      if (ready.length > 0) {
        await this.store.deleteMany(ready);
        for (const k of ready) this.known.delete(k);
        this.stats.deleted += ready.length;
      }
      if (this.catchUp && size >= this.catchUp.until) {
        const r = await this.store.sweepPartials(this.catchUp.until, this.catchUp.from);
        this.stats.listSweeps++;
        this.stats.deleted += r.deleted;
        this.catchUp = undefined;
      }
      if (!this.catchUp && ready.length > 0) await this.mark.advance(Math.floor(size / TILE_WIDTH) * TILE_WIDTH);
    }
  }
}
