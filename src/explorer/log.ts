// Reads the log's public objects relative to a base URL (the page's own directory by
// default, so a static mirror works): the checkpoint (never cached) and the immutable
// tiles and bundles, each fetched at most once per page and kept in memory. Full tiles are
// also requested with `cache: 'force-cache'`, so the browser's HTTP cache serves them on
// later visits even from a mirror that sends no caching headers.
import { HashTile, TILE_WIDTH, TileHashReader, tilePath } from '../core/tiles.js';
import { decodeBundle } from '../core/bundle.js';
import { MAX_RECORD_BUNDLE_BYTES, isRecordBundleKey, readAtMost, recordBundleContent } from '../core/stored-records.js';

export class FetchError extends Error {
  override name = 'FetchError';
  constructor(
    readonly path: string,
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type BundleKind = 'entries' | 'records';

export interface FetchStats {
  /** Network requests made for immutable objects. */
  requests: number;
  /** Requests answered from the in-memory cache. */
  reused: number;
  bytes: number;
}

export class LogClient {
  private readonly objects = new Map<string, Promise<Uint8Array | null>>();
  private readonly tiles = new Map<string, Promise<HashTile>>();
  readonly stats: FetchStats = { requests: 0, reused: 0, bytes: 0 };

  constructor(
    readonly base: URL,
    private readonly fetchFn: typeof fetch = (...a) => fetch(...a),
  ) {}

  url(path: string): URL {
    return new URL(path, this.base);
  }

  /** The signed note at `checkpoint`, always revalidated. */
  async checkpoint(): Promise<string> {
    const res = await this.fetchFn(this.url('checkpoint'), { cache: 'no-store' }).catch((e: unknown) => {
      throw new FetchError('checkpoint', 0, `cannot fetch the checkpoint: ${(e as Error).message}`);
    });
    if (!res.ok) throw new FetchError('checkpoint', res.status, `checkpoint: HTTP ${res.status}`);
    return res.text();
  }

  /** An immutable object; null when it does not exist (404). Fetched once per page. */
  object(path: string): Promise<Uint8Array | null> {
    const had = this.objects.get(path);
    if (had) {
      this.stats.reused++;
      return had;
    }
    const p = (async () => {
      this.stats.requests++;
      let res: Response;
      try {
        res = await this.fetchFn(this.url(path), { cache: 'force-cache' });
      } catch (e) {
        throw new FetchError(path, 0, `cannot fetch ${path}: ${(e as Error).message}`);
      }
      if (res.status === 404 || res.status === 410) return null;
      if (!res.ok) throw new FetchError(path, res.status, `${path}: HTTP ${res.status}`);
      // Bounded: the browser has undone a Content-Encoding: gzip, and no object is larger.
      const data = res.body
        ? await readAtMost(res.body, MAX_RECORD_BUNDLE_BYTES)
        : new Uint8Array(await res.arrayBuffer());
      if (!data) throw new FetchError(path, res.status, `${path} is larger than any object of a log`);
      this.stats.bytes += data.length;
      // A static copy of the bucket may serve a stored (gzip) record bundle without the header.
      if (!isRecordBundleKey(path)) return data;
      return recordBundleContent(data, path).catch((e: unknown) => {
        throw new FetchError(path, res.status, (e as Error).message);
      });
    })();
    this.objects.set(path, p);
    p.catch(() => this.objects.delete(path)); // a failed fetch may be retried
    return p;
  }

  /** A tile at `width`, falling back to the full tile when the partial one is gone (docs/design.md §1.5). */
  private async tileBytes(
    kind: number | BundleKind,
    index: number,
    width: number,
  ): Promise<{ data: Uint8Array; full: boolean }> {
    const exact = tilePath({ kind, index, width });
    const data = await this.object(exact);
    if (data) return { data, full: width === TILE_WIDTH };
    if (width < TILE_WIDTH) {
      const full = await this.object(tilePath({ kind, index, width: TILE_WIDTH }));
      if (full) return { data: full, full: true };
    }
    throw new FetchError(exact, 404, `${exact} is missing`);
  }

  hashTile(level: number, index: number, width: number): Promise<HashTile> {
    const key = `${level}/${index}/${width}`;
    let p = this.tiles.get(key);
    if (!p) {
      p = this.tileBytes(level, index, width).then(({ data, full }) => {
        const bytes = full && width < TILE_WIDTH ? data.subarray(0, width * 32) : data;
        if (bytes.length !== width * 32) {
          throw new FetchError(
            tilePath({ kind: level, index, width }),
            200,
            `${tilePath({ kind: level, index, width })} has ${data.length} bytes, expected ${width * 32}`,
          );
        }
        return new HashTile(level, index, bytes);
      });
      this.tiles.set(key, p);
      p.catch(() => this.tiles.delete(key));
    }
    return p;
  }

  /** The first `width` items of bundle `index`. */
  async bundle(kind: BundleKind, index: number, width: number): Promise<Uint8Array[]> {
    const path = tilePath({ kind, index, width });
    const { data } = await this.tileBytes(kind, index, width);
    const items = decodeBundle(data, path);
    if (items.length < width) throw new FetchError(path, 200, `${path} holds ${items.length} items, expected ${width}`);
    const out = items.slice(0, width);
    if (kind === 'entries' && out.some((h) => h.length !== 32))
      throw new FetchError(path, 200, `${path} holds an entry hash that is not 32 bytes`);
    return out;
  }

  /** A Merkle HashReader over this log's tiles for a tree of `size` leaves. */
  reader(size: number): TileHashReader {
    return new TileHashReader(size, (level, index, width) => this.hashTile(level, index, width));
  }
}

/** Width of bundle `index` in a tree of `size` entries (0 if beyond it). */
export function bundleWidth(index: number, size: number): number {
  return Math.max(0, Math.min(TILE_WIDTH, size - index * TILE_WIDTH));
}
