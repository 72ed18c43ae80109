// SHA-256 of a local file, streamed: Blob.stream() chunks go into an incremental hash, so a
// multi-gigabyte file is never held in memory and never leaves the machine.
import { sha256 } from '@noble/hashes/sha2.js';
import { toHex } from './bytes.js';

export interface HashProgress {
  readonly bytes: number;
  readonly total: number;
}

export async function hashBlob(
  blob: Blob,
  onProgress?: (p: HashProgress) => void,
  signal?: AbortSignal,
): Promise<string> {
  const h = sha256.create();
  const reader = blob.stream().getReader();
  let bytes = 0;
  let last = 0;
  try {
    for (;;) {
      if (signal?.aborted) throw new DOMException('hashing cancelled', 'AbortError');
      const { done, value } = await reader.read();
      if (done) break;
      h.update(value);
      bytes += value.length;
      const now = performance.now();
      if (onProgress && now - last > 50) {
        last = now;
        onProgress({ bytes, total: blob.size });
      }
    }
  } finally {
    reader.releaseLock();
  }
  onProgress?.({ bytes, total: blob.size });
  return toHex(h.digest());
}
