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
  return async (identity, digest) => {
    const cp = checkpoint();
    let found: Awaited<ReturnType<LogReader['entryWithProof']>> | undefined;
    // The index's rows are candidates (short keys; a stale row of a restored index): the
    // earliest published entry that really has the identity is the one.
    const seq = await index.findAnchor(identity, digest, async (candidate) => {
      if (candidate >= cp.size) return false;
      const entry = await reader.entryWithProof(candidate, cp);
      if (anchorIdentity(entry.entry) !== identity) return false;
      found = entry;
      return true;
    });
    const proven = found;
    if (seq === undefined || proven === undefined) return undefined;
    return {
      seq,
      entry: proven.entry,
      entryHash: proven.entryHash,
      checkpoint: cp,
      inclusionProof: () => proven.auditPath,
      existing: true,
    };
  };
}
