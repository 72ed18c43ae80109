// Reading and altering a log's objects on disk as content: record bundles are stored
// gzip-compressed (src/store/stored-form.ts), so a test that flips a record's byte does it
// in the content and stores it back compressed, as the log would have written it.
import { readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import { isGzip } from '../../src/core/stored-records.js';

const isRecordBundleFile = (file: string) => /(^|[/\\])tile[/\\]records[/\\]/.test(file);

/** The content of the object stored in `file` (a record bundle decompressed). */
export function readContent(file: string): Buffer {
  const stored = readFileSync(file);
  return isRecordBundleFile(file) && isGzip(stored) ? gunzipSync(stored) : stored;
}

/** Stores `content` in `file` as the log does (a record bundle compressed). */
export function writeContent(file: string, content: Uint8Array): void {
  writeFileSync(file, isRecordBundleFile(file) ? gzipSync(content) : content);
}

/** Rewrites every record bundle file given uncompressed, as a log written before compression holds them. */
export function decompressInPlace(files: readonly string[]): void {
  for (const f of files) writeFileSync(f, readContent(f));
}
