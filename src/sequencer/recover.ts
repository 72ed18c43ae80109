// Loading the right edge of a published tree from storage, verified against its root
// before the sequencer builds on it.
import { ZERO_HASH, entryHash } from '../core/entry.js';
import { HASH_SIZE, bytesEqual, leafHash, toHex } from '../core/hash.js';
import { TileHashReader, TILE_WIDTH, levelHashCount } from '../core/tiles.js';
import { proveInclusion } from '../core/merkle.js';
import { checkInclusion } from '../core/verify/index.js';
import type { ObjectStore } from '../store/store.js';
import { LogIntegrityError, readBundle, readTileBytes, storeTileFetcher } from '../read/tilestore.js';
import { RightEdge } from './right-edge.js';

/** Reads and verifies the right edge of the tree of `size` leaves whose root is `root`. */
export async function loadEdge(store: ObjectStore, size: number, root: Uint8Array): Promise<RightEdge> {
  if (size === 0) return RightEdge.empty();
  const rows: Uint8Array[] = [];
  const reads: Promise<void>[] = [];
  for (let level = 0; levelHashCount(level, size) > 0; level++) {
    const count = levelHashCount(level, size);
    const width = count % TILE_WIDTH;
    rows[level] = new Uint8Array(0);
    if (width > 0) {
      reads.push(
        readTileBytes(store, level, Math.floor(count / TILE_WIDTH), width).then((data) => {
          if (data.length !== width * HASH_SIZE)
            throw new LogIntegrityError(`level ${level} right-edge tile has the wrong size`);
          rows[level] = data;
        }),
      );
    }
  }
  const bundle = Math.floor(size / TILE_WIDTH);
  const w0 = size % TILE_WIDTH;
  const [entries, records, prevEntries] = await Promise.all([
    w0 > 0 ? readBundle(store, 'entries', bundle, w0) : [],
    w0 > 0 ? readBundle(store, 'records', bundle, w0) : [],
    bundle > 0 ? readBundle(store, 'entries', bundle - 1, TILE_WIDTH) : [],
    ...reads,
  ]);
  while (rows.length > 0 && rows[rows.length - 1]!.length === 0) rows.pop();

  const priorOfBundle = prevEntries.length > 0 ? prevEntries[prevEntries.length - 1]! : ZERO_HASH;
  let lastEntryHash = priorOfBundle;
  if (w0 > 0) {
    entries.forEach((eh, i) => {
      if (!bytesEqual(leafHash(eh), rows[0]!.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE))) {
        throw new LogIntegrityError(`entry bundle ${bundle} item ${i} does not match its hash tile`);
      }
      const prior = i === 0 ? priorOfBundle : entries[i - 1]!;
      if (!bytesEqual(entryHash(bundle * TILE_WIDTH + i, records[i]!, prior), eh)) {
        throw new LogIntegrityError(`record ${bundle * TILE_WIDTH + i} does not hash to its entry hash`);
      }
    });
    lastEntryHash = entries[w0 - 1]!;
  } else {
    // The last entry sits in a full bundle: authenticate it through an inclusion proof.
    const proof = await proveInclusion(size - 1, size, new TileHashReader(size, storeTileFetcher(store)));
    if (!checkInclusion(size - 1, size, leafHash(lastEntryHash), proof, { size, root }).ok) {
      throw new LogIntegrityError(`last entry ${size - 1} is not in the tree of root ${toHex(root)}`);
    }
  }
  const edge = new RightEdge(size, rows, entries, records, lastEntryHash);
  if (!bytesEqual(edge.root(), root)) {
    throw new LogIntegrityError(`right-edge tiles of size ${size} hash to ${toHex(edge.root())}, not ${toHex(root)}`);
  }
  return edge;
}
