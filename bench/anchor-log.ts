// A local log of `size` anchors with its LMDB index, as `stele serve` reads it: the API
// benchmark's log, and the one test/interop/goref.test.ts checks the Go reference on. Anchor
// i has digest i in hex and artifact `a<i>`, so a query can name any leaf by digest.
import { join } from 'node:path';
import { anchorRequest } from '../src/core/anchor.js';
import { LmdbIndex } from '../src/index/lmdb.js';
import { openLocalLog } from '../src/serve/local-log.js';

/** The digest of anchor i: i in hex, 64 digits. */
export const digestOf = (i: number): string => i.toString(16).padStart(64, '0');

/** Writes the log into `dataDir`, `wave` anchors submitted at a time (each wave one or more batches). */
export async function buildAnchorLog(dataDir: string, origin: string, size: number, wave = 65_536): Promise<void> {
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { sequencer } = await openLocalLog({
    dataDir,
    origin,
    fsync: false,
    batchInterval: 1,
    maxBatch: 65_536,
    listeners: [index],
  });
  for (let from = 0; from < size; from += wave) {
    const n = Math.min(wave, size - from);
    await Promise.all(
      Array.from({ length: n }, (_, k) =>
        sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + k), { artifact: `a${from + k}` })),
      ),
    );
  }
  await sequencer.close();
  await index.close();
}
