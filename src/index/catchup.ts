// Feeding the lookup index: from the sequencer as it integrates, and from the record
// bundles when it lags (first start, a listener failure, `stele index rebuild`).
import { parseCanonicalEntry } from '../entry.js';
import type { LogReader } from '../reader.js';
import { type BatchListener, type IntegratedBatch, type PublishedCheckpoint, batchOfEntries } from '../sequencer/sequencer.js';
import { TILE_WIDTH } from '../tiles.js';
import type { LookupIndex } from './types.js';

/**
 * Indexes leaves [indexedSize, size) from the record bundles of the tree `checkpoint`
 * (which covers them); reports progress per bundle.
 */
export async function catchUpIndex(
  index: LookupIndex,
  reader: LogReader,
  size: number,
  checkpoint: PublishedCheckpoint,
  onProgress?: (indexed: number, size: number) => void,
): Promise<number> {
  let from = await index.indexedSize();
  while (from < size) {
    const n = Math.floor(from / TILE_WIDTH);
    const width = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    const records = await reader.bundle('records', n, width);
    const skip = from - n * TILE_WIDTH;
    await index.onBatch(batchOfEntries(from, records.slice(skip).map((r) => parseCanonicalEntry(r)), checkpoint));
    from = n * TILE_WIDTH + width;
    onProgress?.(from, size);
  }
  return from;
}

/** A listener that fills any gap from the bundles before indexing a new batch. */
export function indexFeeder(index: LookupIndex, reader: LogReader): BatchListener {
  return {
    async onBatch(batch: IntegratedBatch) {
      if ((await index.indexedSize()) < batch.fromSize) {
        await catchUpIndex(index, reader, batch.fromSize, batch.checkpoint);
      }
      await index.onBatch(batch);
    },
  };
}
