// Where `stele log fsck --since` starts: the audit's state at the bundle holding the last leaf
// of a checkpoint fsck verified before, read from the stored tiles instead of recomputed. The
// audit pins that checkpoint, so the root it recomputes at that size from these hashes must be
// the recorded one: tiles below it that changed since, or a log that forked, fail there.
import type { AuditState } from '../read/audit.js';
import { readTileBytes } from '../read/tilestore.js';
import { TILE_WIDTH, tileWidthAt } from '../core/tiles.js';
import type { ObjectReader } from '../store/store.js';

/** The state before bundle ⌊(since − 1) / 256⌋ of a tree of `size` ≥ `since` > 0. */
export async function stateBefore(source: ObjectReader, since: number, size: number): Promise<AuditState> {
  const bundle = Math.floor((since - 1) / TILE_WIDTH);
  const prior =
    bundle === 0 ? new Uint8Array(32) : (await readTileBytes(source, 'entries', bundle - 1, TILE_WIDTH)).subarray(-32);
  const pending: Uint8Array[][] = [[]];
  const tileIndex: number[] = [0];
  // At level l, ⌊bundle / 256^(l−1)⌋ hashes are complete: the tile in progress holds the last of them.
  for (let level = 1, count = bundle; count > 0; level++, count = Math.floor(count / TILE_WIDTH)) {
    const index = Math.floor(count / TILE_WIDTH);
    const k = count % TILE_WIDTH;
    tileIndex[level] = index;
    const tile = k === 0 ? null : await readTileBytes(source, level, index, tileWidthAt(level, index, size));
    pending[level] = Array.from({ length: k }, (_, j) => tile!.slice(32 * j, 32 * j + 32));
  }
  return {
    bundle,
    prior,
    lastTimestamp: '',
    pending,
    tileIndex,
    entriesChecked: 0,
    bundlesChecked: 0,
    hashTilesChecked: 0,
    pinRoot: null,
  };
}
