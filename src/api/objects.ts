// Serves the log's public objects as the CDN would: /checkpoint and /tile/… with the
// Cache-Control of docs/design.md §1.2, so verifiers and mirrors can read tiles locally. Nothing
// is served before it verifies: a tile or bundle is authenticated against the published
// checkpoint by the reader (the proof routes' check, and its cache, so a warm read costs a
// set lookup), the checkpoint against the log key and the tree; a record bundle as content,
// then gzipped (once, while it stays cached) for a client that accepts it. What fails is a 500
// corrupt_storage (no-store: respondWithError), so no cache in front keeps altered bytes.
import type { Context, Next } from 'koa';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { openCheckpoint } from '../core/checkpoint.js';
import { bytesEqual } from '../core/hash.js';
import { SIG_ED25519, makeVerifier } from '../core/note.js';
import { parseTilePath, tileWidthAt } from '../core/tiles.js';
import { isRecordBundleKey } from '../core/stored-records.js';
import { CHECKPOINT_KEY, objectMeta } from '../store/layout.js';
import { storedForm } from '../store/stored-form.js';
import type { ObjectReader } from '../store/store.js';
import { CorruptObjectError } from '../read/reader.js';
import { MissingObjectError } from '../read/tilestore.js';
import { ApiError, notFound } from '../http/errors.js';
import type { LedgerService } from './ledger.js';

/**
 * The stored `checkpoint` against the log's own published checkpoint: checked when its bytes
 * change (at start, at each publish, on a probe), its last good bytes kept so a read costs a
 * comparison. `problem` is why it fails, for /readyz.
 */
export class ServedCheckpoint {
  private verified: Uint8Array | undefined;
  /** Why the stored checkpoint failed its last check, while it does. */
  private failing: string | undefined;
  private readonly verifier;

  constructor(
    private readonly source: ObjectReader,
    private readonly ledger: LedgerService,
    private readonly logger?: Logger,
  ) {
    this.verifier = makeVerifier(ledger.origin, SIG_ED25519, ledger.publicKey);
  }

  /** The stored checkpoint's bytes once they verify; throws CorruptObjectError if they do not. */
  async read(): Promise<Uint8Array> {
    const data = await this.source.get(CHECKPOINT_KEY);
    if (data && this.verified && bytesEqual(data, this.verified)) return data;
    const why = await this.check(data);
    if (why === null && data) {
      this.verified = data;
      if (this.failing) this.logger?.info('the stored checkpoint verifies again');
      this.failing = undefined;
      return data;
    }
    const reason = why ?? 'it is missing';
    if (this.failing !== reason) this.logger?.error({ object: CHECKPOINT_KEY, err: reason }, 'stored checkpoint fails');
    this.failing = reason;
    throw this.ledger.reader.reportCorrupt(CHECKPOINT_KEY, reason);
  }

  /** Why the stored checkpoint cannot be served (checked now), or null. */
  async problem(): Promise<string | null> {
    try {
      await this.read();
    } catch (e) {
      // A check that failed is lastProblem; storage that cannot be read is a reason of its own.
      if (!(e instanceof CorruptObjectError))
        return `the stored checkpoint (log/${CHECKPOINT_KEY}) cannot be read: ${(e as Error).message}`;
    }
    return this.lastProblem();
  }

  /** Why the stored checkpoint could not be served when it was last read or probed, or null (for /metrics). */
  lastProblem(): string | null {
    return this.failing === undefined
      ? null
      : `the stored checkpoint (log/${CHECKPOINT_KEY}) does not verify: ${this.failing}`;
  }

  /**
   * Null when `data` is a checkpoint of this tree: the published one byte for byte, or one
   * signed by the log key whose root is the tree's at its size (a publish in progress, or a
   * replica a moment behind its bucket, which can check no more than the signature).
   */
  private async check(data: Uint8Array | null): Promise<string | null> {
    if (!data) return 'it is missing';
    const cp = this.ledger.checkpoint();
    const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');
    if (text === cp.note) return null;
    let signed;
    try {
      signed = openCheckpoint(text, this.verifier);
    } catch (e) {
      return `it does not verify under the log key: ${(e as Error).message}`;
    }
    if (signed.size === cp.size)
      return bytesEqual(signed.root, cp.root)
        ? 'it differs from the published checkpoint of the same size'
        : `it signs another root for size ${cp.size} than the published checkpoint`;
    if (signed.size > cp.size) return null;
    try {
      const root = await this.ledger.reader.treeHash(signed.size, cp);
      return bytesEqual(root, signed.root) ? null : `its root is not the tree's at size ${signed.size}`;
    } catch (e) {
      return `the tree's root at its size ${signed.size} cannot be read: ${(e as Error).message}`;
    }
  }
}

export function objectMiddleware(ledger: LedgerService, checkpoint: ServedCheckpoint) {
  const gzipped = new GzippedBundles();
  return async (ctx: Context, next: Next): Promise<void> => {
    const key = ctx.path.slice(1);
    const isObject = key === CHECKPOINT_KEY || key.startsWith('tile/');
    if (!isObject) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on log objects`, {
        Allow: 'GET, HEAD',
      });
    }
    let data: Uint8Array | null;
    if (key === CHECKPOINT_KEY) data = await checkpoint.read();
    else {
      const id = parseTilePath(key);
      if (!id) throw notFound('object_not_found', `${key} is not a tile path`);
      const published = ledger.checkpoint();
      const level = typeof id.kind === 'number' ? id.kind : 0;
      const inTree = (size: number) => id.width <= tileWidthAt(level, id.index, size);
      // The tree the log signed but has not published (it waits for a mirror's or a witness's
      // cosignature, and a tlog-mirror reads its records first): authenticated against that
      // signed root, but never cached, as nothing outside the log vouches for it yet.
      const committed = ledger.committed?.();
      const cp = inTree(published.size) ? published : committed && inTree(committed.size) ? committed : null;
      // Beyond the signed tree nothing can be authenticated (a batch not yet committed).
      if (!cp) throw notFound('object_not_found', `${key} is not in the published tree (size ${published.size})`);
      if (cp !== published) ctx.set('Cache-Control', 'no-store');
      data = await ledger.reader.publishedObject(cp, id).catch((e: unknown) => {
        if (e instanceof MissingObjectError) return null;
        throw e;
      });
    }
    if (!data) throw notFound('object_not_found', `${key} does not exist`);
    const meta = objectMeta(key);
    ctx.set('Content-Type', meta.contentType);
    if (ctx.response.get('Cache-Control') !== 'no-store') ctx.set('Cache-Control', meta.cacheControl);
    if (isRecordBundleKey(key) && acceptsGzip(ctx)) {
      ctx.set('Content-Encoding', 'gzip');
      // Kept only when the published tree vouches for it (as the Cache-Control above says).
      data = await gzipped.of(key, data, ctx.response.get('Cache-Control') !== 'no-store');
    }
    ctx.body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  };
}

/**
 * Whether a record bundle (authenticated as content) goes gzip, with `Content-Encoding: gzip`:
 * when the client's Accept-Encoding allows it, as S3 and CloudFront serve the stored object;
 * the content itself when it sends none or refuses gzip (a bucket or CDN sends gzip to such a
 * client too, as tlog-tiles allows; the local origin can do better).
 */
function acceptsGzip(ctx: Context): boolean {
  ctx.vary('Accept-Encoding');
  return ctx.acceptsEncodings('gzip', 'identity') === 'gzip';
}

/**
 * Record bundles as sent gzip, by key, up to 32 MiB: a bundle is immutable, so while it stays
 * here it is compressed once, not on every request (a mirror or an auditor reads them all).
 */
export class GzippedBundles {
  private readonly lru = new LRUCache<string, Uint8Array>({
    maxSize: 32 << 20,
    sizeCalculation: (v) => Math.max(1, v.byteLength),
  });
  /** Bundles compressed so far (the cache's misses). */
  compressions = 0;

  /** `content` (authenticated, of `key`) gzipped; kept for the next request if `keep`. */
  async of(key: string, content: Uint8Array, keep: boolean): Promise<Uint8Array> {
    const kept = this.lru.get(key);
    if (kept) return kept;
    this.compressions++;
    const gz = await storedForm(key, content);
    if (keep) this.lru.set(key, gz);
    return gz;
  }
}
