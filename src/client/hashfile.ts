// Streaming SHA-256 of a file (or of standard input, `-`): node:crypto over a read stream
// with large chunks, so a file of any size is hashed in constant memory at about the speed
// of sha256sum.
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import { ClientError, UsageError } from './errors.js';
import { fsReason } from '../store/files.js';

/** Chunk size of the read stream (1 MiB: fewer syscalls and hash calls than the 64 KiB default). */
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
  let total = 0;
  try {
    const st = await fs.stat(path);
    if (st.isDirectory()) throw new UsageError(`${path} is a directory, not a file`);
    total = st.size;
  } catch (e) {
    throw fileError(path, e);
  }
  return sha256Stream(createReadStream(path, { highWaterMark: HASH_CHUNK_BYTES }), total, path, onProgress);
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
