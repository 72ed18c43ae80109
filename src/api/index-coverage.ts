// An answer that something is absent is only as good as the index behind it: while the index
// is rebuilt (an upgrade, a lost index) it covers fewer leaves than the tree, and its silence
// would be a wrong 404. Such an answer is a 503 instead, which a client retries.
import type { LookupIndex } from '../index/types.js';
import type { PublishedCheckpoint } from '../sequencer/contract.js';
import { ApiError } from '../http/errors.js';

/** Throws 503 `index_not_ready` unless the index covers every leaf of `cp`. */
export async function indexCovers(index: LookupIndex, cp: PublishedCheckpoint): Promise<void> {
  const indexed = await index.indexedSize();
  if (indexed < cp.size)
    throw new ApiError(
      503,
      'index_not_ready',
      `the lookup index covers ${indexed} of ${cp.size} entries (it is being rebuilt); retry shortly`,
      { 'Retry-After': '5' },
    );
}
