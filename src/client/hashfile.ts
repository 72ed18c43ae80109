// Streaming SHA-256 of a file (or of standard input, `-`): node:crypto over large reads, so a
// file of any size is hashed in constant memory at about the speed of sha256sum.
import { type Hash, createHash } from 'node:crypto';
import { promises as fs, readFileSync, statSync } from 'node:fs';
import { ClientError, UsageError } from './errors.js';
import { fsReason } from '../store/files.js';

/** Bytes per read (1 MiB: fewer syscalls and hash calls than a stream's 64 KiB default). */
export const HASH_CHUNK_BYTES = 1 << 20;

export interface FileDigest {
  /** 64 lowercase hex characters. */
  readonly digest: string;
  readonly bytes: number;
}

/** The file name that means standard input on the command line. */
export const STDIN = '-';

/** SHA-256 of the file's bytes (`-`: of standard input, read to its end); `onProgress` gets the bytes hashed so far. */
export async function sha256File(
  path: string,
  onProgress?: (bytes: number, total: number) => void,
): Promise<FileDigest> {
  if (path === STDIN) return sha256Stream(process.stdin, 0, 'standard input', onProgress);
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    const st = statSync(path);
    if (st.isDirectory()) throw new UsageError(`${path} is a directory, not a file`);
    if (st.size <= HASH_CHUNK_BYTES) {
      // One read's worth, read with a blocking call: a hop to libuv's pool costs more.
      const data = readFileSync(path);
      hash.update(data);
      bytes = data.length;
      onProgress?.(bytes, st.size);
    } else {
      const fh = await fs.open(path, 'r');
      try {
        bytes = await hashReads(fh, hash, st.size, onProgress);
      } finally {
        await fh.close();
      }
    }
  } catch (e) {
    throw fileError(path, e);
  }
  return { digest: hash.digest('hex'), bytes };
}

/**
 * Feeds `hash` the file's bytes to its end, reading the next chunk while the last is hashed
 * (two buffers in turn). Plain reads, not a read stream, whose machinery a run that hashes
 * one file need not load and compile. Returns the bytes read.
 */
async function hashReads(
  fh: fs.FileHandle,
  hash: Hash,
  total: number,
  onProgress?: (bytes: number, total: number) => void,
): Promise<number> {
  const size = HASH_CHUNK_BYTES;
  const buffers = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
  let bytes = 0;
  let reading = fh.read(buffers[0]!, 0, size, null);
  for (let next = 1; ; next ^= 1) {
    const { bytesRead, buffer } = await reading;
    if (bytesRead === 0) return bytes;
    reading = fh.read(buffers[next]!, 0, size, null);
    hash.update(buffer.subarray(0, bytesRead));
    bytes += bytesRead;
    onProgress?.(bytes, total);
  }
}

/** SHA-256 of a stream's bytes; errors name `name`. `total` is the expected length (0: unknown). */
async function sha256Stream(
  stream: AsyncIterable<unknown>,
  total: number,
  name: string,
  onProgress?: (bytes: number, total: number) => void,
): Promise<FileDigest> {
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const chunk of stream) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
      onProgress?.(bytes, total);
    }
  } catch (e) {
    throw fileError(name, e);
  }
  return { digest: hash.digest('hex'), bytes };
}

function fileError(path: string, e: unknown): Error {
  if (e instanceof UsageError) return e;
  return new ClientError('io', `cannot read ${path}: ${fsReason(e)}`);
}
