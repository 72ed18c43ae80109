// Where a verifier reads a log's public objects from: an HTTP origin or CDN (tlog-tiles
// URLs under a prefix) or a local directory (a mirror, an offline copy, a log's own files).
import { type Stats, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { FsObjectReader, type FsReaderOptions } from '../store/fs-reader.js';
import type { ObjectReader } from '../store/store.js';
import { MAX_RECORD_BUNDLE_BYTES } from '../core/stored-records.js';
import { contentOf } from '../store/stored-form.js';
import { TileFormatError } from '../core/tiles.js';
import { ClientError, NetworkError, ResponseError, UsageError, VerificationError } from './errors.js';
import { type HttpOptions, type HttpStats, request } from './http.js';
import { fsReason } from '../store/files.js';

/**
 * Reads objects over HTTP: 404 (and 410) → null, other failures → NetworkError. Answers are
 * bounded by the largest object a log has (a record bundle's content); a record bundle
 * comes back decompressed however it was sent.
 */
export class HttpObjectReader implements ObjectReader {
  readonly stats: HttpStats = { requests: 0, bytes: 0 };
  readonly base: string;

  constructor(
    base: string,
    private readonly options: HttpOptions = {},
  ) {
    let u: URL;
    try {
      u = new URL(base);
    } catch {
      throw new UsageError(`${JSON.stringify(base)} is not a URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new UsageError(`${base} must be an http:// or https:// URL`);
    this.base = u.toString().endsWith('/') ? u.toString() : `${u.toString()}/`;
  }

  describe(): string {
    return this.base;
  }

  async get(key: string): Promise<Uint8Array | null> {
    const url = new URL(key, this.base).toString();
    const res = await request(url, { maxBytes: MAX_RECORD_BUNDLE_BYTES }, this.options, this.stats);
    if (res.status === 404 || res.status === 410) return null;
    if (res.status !== 200) throw new NetworkError(`GET ${url}: HTTP ${res.status}`);
    // fetch has undone a Content-Encoding: gzip; a host that serves the stored gzip bytes
    // without the header (a static copy of the bucket) leaves them to decompress here.
    try {
      return await contentOf(key, res.body);
    } catch (e) {
      throw new ResponseError(`${url}: ${(e as Error).message}`);
    }
  }
}

/**
 * Reads objects from a directory laid out like the bucket (checkpoint, tile/…). `blocking`
 * for a command that reads a handful of objects (src/store/fs-reader.ts), not for a whole-log
 * audit or mirror, whose reads overlap on libuv's pool.
 */
export class DirObjectReader implements ObjectReader {
  private readonly store: FsObjectReader;
  readonly stats = { requests: 0, bytes: 0 };

  constructor(
    readonly dir: string,
    options: FsReaderOptions = {},
  ) {
    this.store = new FsObjectReader(dir, options);
  }

  describe(): string {
    return this.dir;
  }

  async get(key: string): Promise<Uint8Array | null> {
    this.stats.requests++;
    try {
      const data = await this.store.get(key);
      if (data) this.stats.bytes += data.length;
      return data;
    } catch (e) {
      // A stored record bundle that does not decompress within bounds is bad bytes, not bad I/O.
      if (e instanceof TileFormatError) throw new VerificationError(`${e.message} (in ${this.dir})`);
      throw new ClientError('io', `cannot read ${key} in ${this.dir}: ${fsReason(e)}`);
    }
  }
}

/**
 * Reads from `primary` (a mirror, a CDN), and from `fallback` (the log's endpoint) what
 * `primary` does not have: a mirror that lags lacks the newest bundles. Only for immutable
 * objects (tiles and bundles), never the checkpoint.
 */
export class FallbackObjectReader implements ObjectReader {
  constructor(
    private readonly primary: ObjectReader,
    private readonly fallback: ObjectReader,
  ) {}

  async get(key: string): Promise<Uint8Array | null> {
    return (await this.primary.get(key)) ?? this.fallback.get(key);
  }
}

export type LogObjectSource = (HttpObjectReader | DirObjectReader) & { describe(): string };

export const isUrl = (s: string): boolean => /^https?:\/\//i.test(s);

/** An object source for `--tiles <url|dir>`, `audit <dir|url>`. A directory must exist. */
export async function openObjectSource(
  where: string,
  options: HttpOptions & FsReaderOptions = {},
): Promise<LogObjectSource> {
  if (isUrl(where)) return new HttpObjectReader(where, options);
  const dir = resolve(where);
  let st: Stats;
  try {
    st = statSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ClientError('io', `cannot open ${where}: ${code === 'ENOENT' ? 'no such directory' : code}`);
  }
  if (!st.isDirectory()) throw new UsageError(`${where} is not a directory`);
  return new DirObjectReader(dir, options);
}
