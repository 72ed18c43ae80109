// Where a verifier reads a log's public objects from: an HTTP origin or CDN (tlog-tiles
// URLs under a prefix) or a local directory (a mirror, an offline copy, a log's own files).
import { promises as fs } from 'node:fs';
import { resolve } from 'node:path';
import { FsObjectStore } from '../store/fs.js';
import type { ObjectReader } from '../store/store.js';
import { ClientError, NetworkError, UsageError } from './errors.js';
import { type HttpOptions, type HttpStats, request } from './http.js';
import { fsReason } from '../store/files.js';

/** Reads objects over HTTP: 404 (and 410) → null, other failures → NetworkError. */
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
    const res = await request(url, {}, this.options, this.stats);
    if (res.status === 404 || res.status === 410) return null;
    if (res.status !== 200) throw new NetworkError(`GET ${url}: HTTP ${res.status}`);
    return res.body;
  }
}

/** Reads objects from a directory laid out like the bucket (checkpoint, tile/…). */
export class DirObjectReader implements ObjectReader {
  private readonly store: FsObjectStore;
  readonly stats = { requests: 0, bytes: 0 };

  constructor(readonly dir: string) {
    this.store = new FsObjectStore(dir);
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
export async function openObjectSource(where: string, options: HttpOptions = {}): Promise<LogObjectSource> {
  if (isUrl(where)) return new HttpObjectReader(where, options);
  const dir = resolve(where);
  const st = await fs.stat(dir).catch((e: NodeJS.ErrnoException) => {
    throw new ClientError('io', `cannot open ${where}: ${e.code === 'ENOENT' ? 'no such directory' : e.code}`);
  });
  if (!st.isDirectory()) throw new UsageError(`${where} is not a directory`);
  return new DirObjectReader(dir);
}
