// Reading a published log from an ObjectStore: hash tiles (falling back from a deleted
// partial tile to the full one), bundles, and the signed checkpoint.
import { HASH_SIZE } from '../core/hash.js';
import type { ObjectReader } from '../store/store.js';
import { HashTile, TILE_WIDTH, type TileFetcher, type TileKind, tilePath } from '../core/tiles.js';
import { Bundle } from '../core/bundle.js';

/** Objects of the published log do not agree with each other or with its signed root: it was damaged or tampered with. */
export class LogIntegrityError extends Error {
  override name = 'LogIntegrityError';
}

export class MissingObjectError extends Error {
  override name = 'MissingObjectError';
  constructor(readonly key: string) {
    super(`${key} is missing from the log`);
  }
}

/** Reads tile (kind, index) at `width`; a missing partial is cut from the full tile. */
export async function readTileBytes(
  store: ObjectReader,
  kind: TileKind,
  index: number,
  width: number,
): Promise<Uint8Array> {
  const key = tilePath({ kind, index, width });
  const data = await store.get(key);
  if (data) return data;
  if (width < TILE_WIDTH) {
    const full = await store.get(tilePath({ kind, index, width: TILE_WIDTH }));
    if (full) return typeof kind === 'number' ? full.subarray(0, width * HASH_SIZE) : full;
  }
  throw new MissingObjectError(key);
}

/** Hash tile (level, index) at `width` hashes, checking its size. */
export async function readHashTile(
  store: ObjectReader,
  level: number,
  index: number,
  width: number,
): Promise<HashTile> {
  const tile = new HashTile(level, index, await readTileBytes(store, level, index, width));
  if (tile.width !== width)
    throw new MissingObjectError(`${tilePath({ kind: level, index, width })} (has ${tile.width} hashes)`);
  return tile;
}

/** A TileFetcher over a store (uncached; LogReader adds the cache). */
export function storeTileFetcher(store: ObjectReader): TileFetcher {
  return (level, index, width) => readHashTile(store, level, index, width);
}

/** Bundle (kind, index), checked to hold at least `width` items (a full one may hold more). */
export async function readCompactBundle(
  store: ObjectReader,
  kind: 'entries' | 'records',
  index: number,
  width: number,
): Promise<Bundle> {
  const key = tilePath({ kind, index, width });
  const bundle = Bundle.decode(await readTileBytes(store, kind, index, width), key);
  if (bundle.length < width) throw new MissingObjectError(`${key} (has ${bundle.length} items)`);
  return bundle;
}

/** The first `width` items of bundle (kind, index). */
export async function readBundle(
  store: ObjectReader,
  kind: 'entries' | 'records',
  index: number,
  width: number,
): Promise<Uint8Array[]> {
  return (await readCompactBundle(store, kind, index, width)).items(width);
}
