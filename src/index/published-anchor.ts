// The lookup half of merging duplicate anchors (src/sequencer/in-flight-duplicates.ts): the published
// entry with an anchor identity, read and authenticated from the tiles with its proof.
import { anchorIdentity } from '../core/duplicates.js';
import type { LogReader } from '../read/reader.js';
import type { FindPublished, PublishedCheckpoint } from '../sequencer/contract.js';
import type { LookupIndex } from './types.js';

export function publishedAnchorFinder(
  index: LookupIndex,
  reader: LogReader,
  checkpoint: () => PublishedCheckpoint,
): FindPublished {
  return async (identity) => {
    const seq = await index.findAnchor(identity);
    const cp = checkpoint();
    if (seq === undefined || seq >= cp.size) return undefined;
    const found = await reader.entryWithProof(seq, cp);
    // The index is derived data: a stale row (a restored index) is no reason to refuse a new entry.
    if (anchorIdentity(found.entry) !== identity) return undefined;
    return {
      seq,
      entry: found.entry,
      entryHash: found.entryHash,
      checkpoint: cp,
      inclusionProof: () => found.auditPath,
      existing: true,
    };
  };
}
