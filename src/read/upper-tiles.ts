// The audit's recomputation of the tree above level 0: each level-0 tile's root is pushed up,
// every upper tile is compared with the stored one as it completes, then the partial tiles of
// the right edge, and the root is computed from what was recomputed (never from what was read).
import { EMPTY_ROOT, bytesEqual } from '../core/hash.js';
import { treeHashSync } from '../core/merkle.js';
import { HashTile, TILE_WIDTH, TileFormatError, tilePath, tileRoot } from '../core/tiles.js';
import type { ObjectReader } from '../store/store.js';
import { type AuditFailure, firstDifference } from './bundle-check.js';
import { TileSet } from './tile-set.js';
import { MissingObjectError, readTileBytes } from './tilestore.js';

/** The first object that disagrees: the audit stops there and names it. */
export class AuditStop extends Error {
  constructor(readonly failure: AuditFailure) {
    super(failure.message);
  }
}

/** A stored object, or an AuditStop naming it when it is missing or cannot be read as one. */
export async function fetchObject(
  source: ObjectReader,
  kind: number | 'entries' | 'records',
  index: number,
  width: number,
): Promise<Uint8Array> {
  try {
    return await readTileBytes(source, kind, index, width);
  } catch (e) {
    if (e instanceof MissingObjectError)
      throw new AuditStop({
        object: tilePath({ kind, index, width }),
        message: `${tilePath({ kind, index, width })} is missing`,
      });
    // A stored object that cannot be read as one (a compressed record bundle that does not
    // decompress within bounds) is a finding about that object, not a failure of the check.
    if (e instanceof TileFormatError)
      throw new AuditStop({ object: tilePath({ kind, index, width }), message: e.message });
    throw e;
  }
}

/** Where the recomputation of the upper levels stands (part of an AuditState). */
export interface UpperTilesState {
  /** Per level ≥ 1: the hashes of the tile being filled, and that tile's index. */
  readonly pending: readonly (readonly Uint8Array[])[];
  readonly tileIndex: readonly number[];
}

export class UpperTiles {
  /** Recomputed hashes per level not yet grouped into a full tile (< 256 each). */
  private readonly pending: Uint8Array[][];
  private readonly tileIndex: number[];
  /** Upper tiles compared with the stored ones so far. */
  checked = 0;

  constructor(
    private readonly source: ObjectReader,
    start?: UpperTilesState,
  ) {
    this.pending = start ? start.pending.map((l) => [...l]) : [[]];
    this.tileIndex = start ? [...start.tileIndex] : [0];
  }

  state(): UpperTilesState {
    return { pending: this.pending.map((l) => [...l]), tileIndex: [...this.tileIndex] };
  }

  /** Adds a recomputed hash at tile level `level`; checks each upper tile as it completes. */
  async push(level: number, h: Uint8Array): Promise<void> {
    const { pending, tileIndex } = this;
    pending[level] ??= [];
    tileIndex[level] ??= 0;
    pending[level]!.push(h);
    if (pending[level]!.length < TILE_WIDTH) return;
    const index = tileIndex[level]!;
    const row = Buffer.concat(pending[level]!);
    const stored = await fetchObject(this.source, level, index, TILE_WIDTH);
    const path = tilePath({ kind: level, index, width: TILE_WIDTH });
    if (stored.length !== row.length || !bytesEqual(stored, row)) {
      const j = firstDifference(stored, row);
      const span = TILE_WIDTH ** level;
      const first = (index * TILE_WIDTH + j) * span;
      throw new AuditStop({
        object: path,
        seq: first,
        message:
          stored.length !== row.length
            ? `${path} has ${stored.length} bytes, not ${row.length}`
            : `${path} hash ${j} (leaves ${first}–${first + span - 1}) differs from the hash recomputed from the level-${level - 1} tiles`,
      });
    }
    this.checked++;
    pending[level] = [];
    tileIndex[level] = index + 1;
    await this.push(level + 1, tileRoot(row));
  }

  /** The right edge: every partial upper tile compared with its stored (possibly wider) tile. */
  async checkRightEdge(): Promise<void> {
    const { pending, tileIndex } = this;
    for (let l = 1; l < pending.length; l++) {
      const w = pending[l]!.length;
      if (w === 0) continue;
      const index = tileIndex[l]!;
      const path = tilePath({ kind: l, index, width: w });
      const stored = await fetchObject(this.source, l, index, w);
      const row = Buffer.concat(pending[l]!);
      if (!bytesEqual(stored.subarray(0, row.length), row) || stored.length < row.length) {
        const j = firstDifference(stored, row);
        throw new AuditStop({
          object: path,
          seq: (index * TILE_WIDTH + j) * TILE_WIDTH ** l,
          message: `${path} hash ${j} differs from the hash recomputed from the level-${l - 1} tiles`,
        });
      }
      this.checked++;
    }
  }

  /** The root of the first `treeSize` leaves, from the recomputed hashes and `row0`, the partial level-0 row. */
  rootAt(treeSize: number, row0: Uint8Array | null): Uint8Array {
    if (treeSize === 0) return EMPTY_ROOT;
    const tiles = new TileSet();
    if (row0 && row0.length > 0) tiles.add(new HashTile(0, Math.floor(treeSize / TILE_WIDTH), row0));
    const { pending, tileIndex } = this;
    for (let l = 1; l < pending.length; l++) {
      if (pending[l]!.length > 0) tiles.add(new HashTile(l, tileIndex[l]!, Buffer.concat(pending[l]!)));
    }
    return treeHashSync(treeSize, tiles.lookup(treeSize));
  }
}
