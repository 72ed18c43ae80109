// Real logs for the operator-command tests: written by the real sequencer (src/serve/local-log.ts)
// in waves, one batch or more per wave, so the directory holds full tiles, the right-edge
// partial tiles and older partials: as `stele serve` leaves it, but with the partials of full
// tiles kept (as a log written before they were swept has them), so fsck compares them.
import { createHash } from 'node:crypto';
import { cpSync } from 'node:fs';
import { anchorRequest } from '../../src/core/anchor.js';
import { openLocalLog } from '../../src/serve/local-log.js';

export const digestOf = (label: string, i: number): string =>
  createHash('sha256').update(`${label}/${i}`).digest('hex');

/**
 * Anchors `waves[k]` entries in wave k (all submitted at once, so a wave is one batch up to
 * maxBatch), closes the log, and returns the published sizes. `afterWave` runs between waves
 * with the log open (e.g. to copy the lock record as a backup).
 */
export async function makeLog(
  dataDir: string,
  origin: string,
  waves: readonly number[],
  afterWave?: (size: number) => void | Promise<void>,
): Promise<number[]> {
  const log = await openLocalLog({
    dataDir,
    origin,
    fsync: false,
    batchInterval: 5,
    maxBatch: 100_000,
    sweepPartials: false,
  });
  const sizes: number[] = [];
  let n = 0;
  try {
    for (const count of waves) {
      const wave = [];
      for (let i = 0; i < count; i++)
        wave.push(
          log.sequencer.submit(
            anchorRequest('ledger_anchor', 'Anchored', digestOf(origin, n++), { artifact: `a${n % 7}`, scope: 'test' }),
          ),
        );
      await Promise.all(wave);
      sizes.push(log.sequencer.checkpoint.size);
      await afterWave?.(log.sequencer.checkpoint.size);
    }
  } finally {
    await log.sequencer.close();
  }
  return sizes;
}

/** A copy of a data directory to corrupt. */
export function copyLog(from: string, to: string): string {
  cpSync(from, to, { recursive: true, verbatimSymlinks: true });
  return to;
}
