// Feeding the lookup index: from the sequencer as it integrates, and from the record
// bundles when it lags (first start, a listener failure, `stele index rebuild`). Records
// are read through the reader's checks, so nothing corrupt is indexed.
import type { Logger } from 'pino';
import { parseCanonicalEntry } from '../core/entry.js';
import type { LogReader } from '../read/reader.js';
import {
  type BatchListener,
  type IntegratedBatch,
  type PublishedCheckpoint,
  batchOfEntries,
} from '../sequencer/contract.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { orderedPipeline } from '../read/pipeline.js';
import type { LookupIndex } from './types.js';

/**
 * Indexes leaves [indexedSize, size) from the record bundles of the tree `checkpoint`
 * (which covers them); reports progress per bundle. Returns the leaves indexed: fewer than
 * `size` when `stop` aborted it (at a bundle's end; the next catch-up goes on from there).
 */
export async function catchUpIndex(
  index: LookupIndex,
  reader: LogReader,
  size: number,
  checkpoint: PublishedCheckpoint,
  onProgress?: (indexed: number, size: number) => void,
  stop?: AbortSignal,
): Promise<number> {
  const start = await index.indexedSize();
  if (start >= size) return start;
  // Bundle by bundle, the next ones read (and verified) while one is indexed: reading is
  // waiting on storage (a file, an S3 GET), indexing is work here.
  const first = Math.floor(start / TILE_WIDTH);
  const end = Math.ceil(size / TILE_WIDTH);
  let from = start;
  const stopped = new Error('stopped');
  await orderedPipeline(
    first,
    end,
    CATCH_UP_READ_AHEAD,
    (n) => reader.records(Math.max(start, n * TILE_WIDTH), Math.min(size, (n + 1) * TILE_WIDTH), checkpoint),
    async (n, records) => {
      if (stop?.aborted) throw stopped;
      await index.onBatch(
        batchOfEntries(
          from,
          records.map((r) => parseCanonicalEntry(r)),
          checkpoint,
        ),
      );
      from = Math.min(size, (n + 1) * TILE_WIDTH);
      onProgress?.(from, size);
    },
  ).catch((e: unknown) => {
    if (e !== stopped) throw e;
  });
  return from;
}

/** Bundles read ahead of the one being indexed. */
const CATCH_UP_READ_AHEAD = 8;

/**
 * At start, before any batch: makes the index agree with the tree of `checkpoint`. An index
 * holding leaves beyond it (restored from elsewhere, or kept across a rolled-back log) has
 * rows naming entries the tree does not have, and counts of them: it is cleared and rebuilt
 * from the record bundles, as is one written by an older version. Then whatever it lacks is indexed. Rows it holds below the tree
 * size are trusted no further than the API's lookups check them (the entry must carry the key).
 */
export async function reconcileIndex(
  index: LookupIndex,
  reader: LogReader,
  checkpoint: PublishedCheckpoint,
  logger?: Logger,
  stop?: AbortSignal,
): Promise<number> {
  const indexed = await index.indexedSize();
  if (indexed > checkpoint.size) {
    logger?.warn(
      { indexed, treeSize: checkpoint.size },
      'the lookup index is ahead of the tree; rebuilding it from the record bundles',
    );
    await index.clear();
  } else if (await index.outdated()) {
    // An older index lacks rows this version reads (anchor identities, labels).
    logger?.info({ indexed }, 'the lookup index is of an older version; rebuilding it from the record bundles');
    await index.clear();
  }
  return catchUpIndex(index, reader, checkpoint.size, checkpoint, undefined, stop);
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

/**
 * reconcileIndex beside a running log: resolves once the index agrees with the tree, once
 * `stop` aborted it (a shutdown: the next start goes on from what is indexed), or once the
 * attempt failed (logged: the next batch's feeder fills whatever gap is left).
 */
export function reconcileBeside(
  index: LookupIndex,
  reader: LogReader,
  checkpoint: PublishedCheckpoint,
  logger?: Logger,
  stop?: AbortSignal,
): Promise<void> {
  return reconcileIndex(index, reader, checkpoint, logger, stop).then(
    () => undefined,
    (e: unknown) => logger?.error({ err: (e as Error).message }, 'index catch-up failed; the next batch retries it'),
  );
}
