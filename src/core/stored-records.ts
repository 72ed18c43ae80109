// Record bundles are stored gzip-compressed (docs/design.md §1.2): JSON records shrink about
// fourfold, where hash tiles and entry bundles (hashes) would not shrink at all. A reader
// tells the two forms apart by the first bytes, so logs written before compression (and
// copies that hold either form) read the same. These are the rules every reader shares; the
// browser decompresses with gunzipBounded below, Node with zlib (src/store/stored-form.ts).
import { concatBytes } from './hash.js';
import { TILE_WIDTH, TileFormatError } from './tiles.js';

/** Whether `key` names a record bundle, full or partial: the only objects stored compressed. */
export const isRecordBundleKey = (key: string): boolean => key.startsWith('tile/records/');

/**
 * The most a record bundle can hold: 256 records of at most 65,535 bytes, each with its
 * 2-byte length. A stored bundle that decompresses to more is refused, never expanded.
 */
export const MAX_RECORD_BUNDLE_BYTES = TILE_WIDTH * (2 + 0xffff);

/**
 * Whether stored bytes are a gzip stream (RFC 1952: 1f 8b, then method 8, deflate). An
 * uncompressed record bundle never starts so: its third byte opens a record's JSON ('{').
 */
export function isGzip(data: Uint8Array): boolean {
  return data.length >= 3 && data[0] === 0x1f && data[1] === 0x8b && data[2] === 0x08;
}

/**
 * The bytes of a web stream, or null as soon as they exceed `max` (the stream is then
 * cancelled, so a response or a decompression stops there instead of filling memory).
 */
export async function readAtMost(stream: ReadableStream<Uint8Array>, max: number): Promise<Uint8Array | null> {
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    parts.push(value);
  }
  return parts.length === 1 ? parts[0]! : concatBytes(...parts);
}

/**
 * A stored record bundle's content: gunzipped (with the platform's DecompressionStream)
 * when it is gzip, as it is otherwise. Throws TileFormatError for a broken stream or one
 * that would decompress past `max` bytes.
 */
export async function recordBundleContent(
  data: Uint8Array,
  key: string,
  max = MAX_RECORD_BUNDLE_BYTES,
): Promise<Uint8Array> {
  if (!isGzip(data)) return data;
  let out: Uint8Array | null;
  try {
    const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream('gzip'));
    out = await readAtMost(stream, max);
  } catch (e) {
    throw undecodable(key, e);
  }
  if (!out) throw undecodable(key, 'too large', max);
  return out;
}

/** Why a stored record bundle cannot be read: its gzip stream is broken (the error) or too large. */
export function undecodable(key: string, why: unknown, max = MAX_RECORD_BUNDLE_BYTES): TileFormatError {
  return why === 'too large'
    ? new TileFormatError(`${key}: decompresses to more than ${max} bytes, more than any record bundle`)
    : new TileFormatError(`${key}: not a valid gzip stream (${(why as Error)?.message ?? String(why)})`);
}
