// Hash tiles held in memory, with a synchronous lookup over them: the sequencer's right edge,
// a published batch's tiles, and the tiles a reader or auditor has already verified.
import type { SyncHashLookup } from '../core/merkle.js';
import { type HashTile, locateAll, tileWidthAt } from '../core/tiles.js';

const tileKey = (level: number, index: number): string => `${level}/${index}`;

/** Hash tiles held in memory (a sequencer's right edge and the tiles of its last batch). */
export class TileSet {
  private readonly tiles = new Map<string, HashTile>();

  constructor(tiles: Iterable<HashTile> = []) {
    for (const t of tiles) this.add(t);
  }

  add(tile: HashTile): void {
    const key = tileKey(tile.level, tile.index);
    const had = this.tiles.get(key);
    if (!had || had.width < tile.width) this.tiles.set(key, tile);
  }

  get(level: number, index: number): HashTile | undefined {
    return this.tiles.get(tileKey(level, index));
  }

  all(): IterableIterator<HashTile> {
    return this.tiles.values();
  }

  /** A synchronous lookup for a tree of `size` leaves; throws if a needed tile is absent. */
  lookup(size: number): SyncHashLookup {
    return (refs) =>
      locateAll(refs, size).map((s) => {
        const tile = this.get(s.level, s.index);
        if (!tile || tile.width < tileWidthAt(s.level, s.index, size)) {
          throw new RangeError(`tile ${s.level}/${s.index} is not in memory`);
        }
        return tile.hashAt(s.row, s.pos);
      });
  }
}
