// The stored form of an object and its content (src/core/stored-records.ts gives the rules):
// record bundles are gzip-compressed on the way into a store and decompressed on the way
// out, so every ObjectReader hands out content and every writer may hand in content. zlib
// here, for Node: about five times faster than the web DecompressionStream.
import { promisify } from 'node:util';
import type * as Zlib from 'node:zlib';
import { MAX_RECORD_BUNDLE_BYTES, isGzip, isRecordBundleKey, undecodable } from '../core/stored-records.js';
import type { TileFormatError } from '../core/tiles.js';

/**
 * zlib, loaded on first use: a command that reads no compressed bundle (`ledger verify` of an
 * entry found through the API) does not pay for loading it at start.
 */
let loaded: { readonly sync: typeof Zlib; readonly gzip: Compress; readonly gunzip: Compress } | undefined;
type Compress = (data: Uint8Array, options: Zlib.ZlibOptions) => Promise<Buffer>;
function zlib(): NonNullable<typeof loaded> {
  if (!loaded) {
    const z = process.getBuiltinModule('node:zlib');
    loaded = { sync: z, gzip: promisify(z.gzip), gunzip: promisify(z.gunzip) };
  }
  return loaded;
}

/** zlib's default level (Z_DEFAULT_COMPRESSION): within 1% of level 9's size on records, at a quarter of its time. */
const GZIP = { level: -1 };
/** Output beyond the largest record bundle stops decompression (a gzip bomb is refused, not expanded). */
const GUNZIP = { maxOutputLength: MAX_RECORD_BUNDLE_BYTES };

/** Whether `data`, stored under `key`, is a compressed record bundle (its Content-Encoding is gzip). */
export const isStoredCompressed = (key: string, data: Uint8Array): boolean => isRecordBundleKey(key) && isGzip(data);

/** The bytes to store for `content` under `key` (for a writer thread, where blocking is fine). */
export function storedFormSync(key: string, content: Uint8Array): Uint8Array {
  return isRecordBundleKey(key) && !isGzip(content) ? plain(zlib().sync.gzipSync(content, GZIP)) : content;
}

/** As storedFormSync, compressing on libuv's pool. */
export async function storedForm(key: string, content: Uint8Array): Promise<Uint8Array> {
  return isRecordBundleKey(key) && !isGzip(content) ? plain(await zlib().gzip(content, GZIP)) : content;
}

/** The content of `data` stored under `key` (decompressed on libuv's pool); TileFormatError if it cannot be. */
export async function contentOf(key: string, data: Uint8Array): Promise<Uint8Array> {
  if (!isStoredCompressed(key, data)) return data;
  try {
    return plain(await zlib().gunzip(data, GUNZIP));
  } catch (e) {
    throw decodeError(key, e);
  }
}

/** As contentOf, blocking (for a writer thread). */
export function contentOfSync(key: string, data: Uint8Array): Uint8Array {
  if (!isStoredCompressed(key, data)) return data;
  try {
    return plain(zlib().sync.gunzipSync(data, GUNZIP));
  } catch (e) {
    throw decodeError(key, e);
  }
}

/**
 * A Buffer's bytes as a plain Uint8Array that owns its whole buffer (a copy only when zlib's
 * answer is a slice of Node's shared pool), so a cache counts what it keeps alive.
 */
const plain = (b: Buffer): Uint8Array =>
  b.byteOffset === 0 && b.byteLength === b.buffer.byteLength
    ? new Uint8Array(b.buffer, 0, b.byteLength)
    : new Uint8Array(b);

function decodeError(key: string, e: unknown): TileFormatError {
  return undecodable(key, (e as NodeJS.ErrnoException)?.code === 'ERR_BUFFER_TOO_LARGE' ? 'too large' : e);
}
