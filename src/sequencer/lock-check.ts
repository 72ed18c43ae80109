// What a sequencer checks before it builds on a lock record: that the lock is at least as
// new as everything the log has published. A lost lock taken for a new log, or a lock
// restored from an old copy, would have the same key sign a second history: a fork. So a
// start that finds published objects without a lock, a lock older than the signed public
// checkpoint, or tiles and bundles beyond the lock's size refuses, and says how to recover
// (`stele log recover` rebuilds the lock from the published checkpoint once it verifies).
import { openCheckpoint } from '../core/checkpoint.js';
import { toHex } from '../core/hash.js';
import type { NoteVerifier } from '../core/note.js';
import { type LockState, LockFormatError } from '../store/lock.js';
import type { ObjectStore } from '../store/store.js';
import { TILE_WIDTH, TileFormatError, type TileKind, parseTilePath, tilePath } from '../core/tiles.js';
import { LogStateError, type PublishedCheckpoint, decodePublishedCheckpoint } from './contract.js';
import { LogIntegrityError, MissingObjectError } from '../read/tilestore.js';

const RECOVER_HINT =
  'run `stele log fsck` to inspect it and `stele log recover` to rebuild the lock from the published checkpoint';

/** The larger of the two public checkpoint objects (their bytes) that verifies under the log key, or null. */
export function publishedCheckpointOf(
  json: Uint8Array | undefined,
  note: Uint8Array | undefined,
  verifier: NoteVerifier,
): PublishedCheckpoint | null {
  const found: PublishedCheckpoint[] = [];
  try {
    if (json) found.push(decodePublishedCheckpoint(json, verifier));
  } catch {
    // unreadable or not ours: the note may still speak, and the tiles are checked regardless
  }
  try {
    if (note) found.push({ ...openCheckpoint(Buffer.from(note).toString('utf8'), verifier), timestamp: '' });
  } catch {
    // as above
  }
  return found.sort((a, b) => b.size - a.size)[0] ?? null;
}

/**
 * The first tile or bundle that covers a leaf at or beyond `size`, or null. Any such object
 * sits in the level-0 tile or bundle holding leaf `size` (its full form, or a partial wider
 * than the tree) or in the next one, so six listings answer, whatever the log's size.
 */
export async function firstObjectBeyond(store: ObjectStore, size: number): Promise<string | null> {
  const index = Math.floor(size / TILE_WIDTH);
  const width = size % TILE_WIDTH;
  for (const kind of [0, 'entries', 'records'] as TileKind[]) {
    for (const n of [index, index + 1]) {
      const prefix = tilePath({ kind, index: n, width: TILE_WIDTH });
      for await (const key of store.list(prefix)) {
        const tile = parseTilePath(key);
        if (tile && tile.kind === kind && tile.index === n && (n > index || tile.width > width)) return key;
      }
    }
  }
  return null;
}

/** Refuses a start from a missing lock where the log has published objects. */
export async function assertNothingPublished(store: ObjectStore, cp: PublishedCheckpoint | null): Promise<void> {
  const found = cp ? `a signed checkpoint of size ${cp.size}` : await firstObjectBeyond(store, 0);
  if (found) {
    throw new LogStateError(
      `the log has published objects (${found}) but no lock record: the lock was lost, and starting a new log here would fork it; ${RECOVER_HINT}`,
    );
  }
}

/** Refuses a lock record older than what the log has published. */
export async function assertLockCurrent(
  store: ObjectStore,
  lock: LockState,
  published: PublishedCheckpoint | null,
): Promise<void> {
  if (published && published.size > lock.size) {
    throw new LogStateError(
      `the lock record (size ${lock.size}) is older than the published checkpoint (size ${published.size}): it was restored from an old copy; ${RECOVER_HINT}`,
    );
  }
  if (published && published.size === lock.size && toHex(published.root) !== lock.root) {
    throw new LogStateError(
      `the lock record and the published checkpoint have different roots at size ${lock.size}: the log has forked; ${RECOVER_HINT}`,
    );
  }
  const beyond = await firstObjectBeyond(store, lock.size);
  if (beyond) {
    throw new LogStateError(
      `${beyond} lies beyond the lock record's tree size ${lock.size}: the lock was rolled back; ${RECOVER_HINT}`,
    );
  }
}

/**
 * What a start that could not load the tree its lock record commits to says: an object
 * missing or failing its check, or a lock record that cannot be read, needs the operator
 * (exit 4, as `stele log fsck` finds it), not a retry. Anything else is passed on.
 */
export function openFailure(e: unknown): unknown {
  const storage =
    e instanceof MissingObjectError ||
    e instanceof LogIntegrityError ||
    e instanceof TileFormatError ||
    e instanceof LockFormatError;
  if (!storage) return e;
  return new LogStateError(
    `${(e as Error).message}: the log's storage does not hold the tree its lock record commits to; run \`stele log fsck\` to see what is missing or corrupt, and \`stele log recover\`, which says where it can come from`,
  );
}
