// One mirrored log's copy, laid out as tlog-tiles (checkpoint, tile/<L>/<N>[.p/<W>],
// tile/entries/<N>[.p/<W>], and for a Stele log tile/records/…) in an ObjectStore. A
// package becomes one entry bundle, its level-0 tile, and the upper tiles it completes;
// every object is immutable (a repeat after a crash writes identical bytes), so a bundle is
// safe to write before the state that counts it.
import { HASH_SIZE, concatBytes } from '../core/hash.js';
import type { ObjectStore, StoredObject } from '../store/store.js';
import { encodeBundle } from '../core/bundle.js';
import { TILE_WIDTH, tilePath } from '../core/tiles.js';
import { readBundle, readTileBytes } from '../read/tilestore.js';
import { rangeHash } from '../core/subtree.js';

export class MirrorCopy {
  constructor(readonly store: ObjectStore) {}

  /** Entries [index·256, index·256 + width) as stored. */
  entries(index: number, width: number): Promise<Uint8Array[]> {
    return width === 0 ? Promise.resolve([]) : readBundle(this.store, 'entries', index, width);
  }

  /**
   * Writes bundle `index` at the width of `entries`, its leaf hashes as the level-0 tile and
   * (for a full bundle) the upper tiles it completes; `records` is the Stele record bundle.
   */
  async writeBundle(
    index: number,
    entries: readonly Uint8Array[],
    leaves: readonly Uint8Array[],
    records?: readonly Uint8Array[],
  ): Promise<void> {
    const width = entries.length;
    const objects: StoredObject[] = [
      { key: tilePath({ kind: 'entries', index, width }), data: encodeBundle(entries) },
      { key: tilePath({ kind: 0, index, width }), data: concatBytes(...leaves) },
    ];
    if (records) objects.push({ key: tilePath({ kind: 'records', index, width }), data: encodeBundle(records) });
    await this.store.createAll(objects);
    if (width === TILE_WIDTH) await this.addUpper(1, index, rangeHash(leaves));
  }

  /** Appends `hash` (the root of level-(level−1) tile `pos`) to its level-`level` tile. */
  private async addUpper(level: number, pos: number, hash: Uint8Array): Promise<void> {
    const index = Math.floor(pos / TILE_WIDTH);
    const width = (pos % TILE_WIDTH) + 1;
    const before = width > 1 ? await readTileBytes(this.store, level, index, width - 1) : new Uint8Array(0);
    if (before.length !== (width - 1) * HASH_SIZE)
      throw new Error(`tile ${level}/${index} has ${before.length / HASH_SIZE} hashes, not ${width - 1}`);
    const row = concatBytes(before, hash);
    await this.store.createAll([{ key: tilePath({ kind: level, index, width }), data: row }]);
    if (width === TILE_WIDTH) {
      const hashes = Array.from({ length: TILE_WIDTH }, (_, i) => row.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE));
      await this.addUpper(level + 1, index, rangeHash(hashes));
    }
  }
}
