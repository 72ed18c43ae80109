// Where fsck's tree recomputation starts, and what it keeps as it goes (src/log/fsck-state.ts):
//   - `--since <size>|last`: from the bundle of a checkpoint fsck verified before, pinned to
//     it (src/log/since.ts): only what is new is recomputed. A tree now smaller than that
//     checkpoint, or of its size with another root, is a rollback, found without recomputing.
//   - otherwise from the progress a killed check saved (same pin), or from the start; the
//     progress is saved as the check goes, and removed when it ends.
import type { AuditState } from '../read/audit.js';
import { bytesEqual, hashFromHex, toHex } from '../core/hash.js';
import type { ObjectReader, ObjectStore } from '../store/store.js';
import { FsckStateStore, type VerifiedCheckpoint } from './fsck-state.js';
import { stateBefore } from './since.js';

/** `--since` names no checkpoint fsck verified (or the log keeps no fsck state). */
export class FsckSinceError extends Error {
  override name = 'FsckSinceError';
}

export interface Pin {
  readonly size: number;
  readonly root: Uint8Array;
}

export interface AuditPlan {
  readonly pin: Pin;
  readonly start?: AuditState;
  readonly onState?: (state: AuditState) => Promise<void>;
  /** A rollback below the verified checkpoint: the message (nothing to recompute). */
  readonly rollback?: string;
  /** The verified checkpoint `--since` starts from. */
  readonly since?: VerifiedCheckpoint;
}

/** The verified checkpoint `since` names, or FsckSinceError saying why there is none. */
export async function sinceCheckpoint(
  state: ObjectStore | undefined,
  since: number | 'last',
): Promise<VerifiedCheckpoint> {
  if (!state) throw new FsckSinceError('--since: this log keeps no fsck state (a full fsck cannot record one here)');
  const found = await new FsckStateStore(state).verifiedAt(since);
  if (found) return found;
  const sizes = (await new FsckStateStore(state).verified()).map((v) => v.size);
  throw new FsckSinceError(
    `--since ${since}: fsck has verified no checkpoint${since === 'last' ? '' : ` of size ${since}`}${sizes.length > 0 ? ` (verified sizes: ${sizes.slice(-5).join(', ')})` : '; run a full `stele log fsck` first'}`,
  );
}

/** Where the recomputation of `tree` starts, pinned to `pin` unless `since` pins it. */
export async function planAudit(
  state: ObjectStore | undefined,
  source: ObjectReader,
  tree: Pin,
  pin: Pin,
  since: VerifiedCheckpoint | undefined,
): Promise<AuditPlan> {
  if (since) {
    const at = { size: since.size, root: hashFromHex(since.root) };
    const when = `verified by fsck at ${since.verifiedAt}`;
    if (tree.size < since.size)
      return {
        pin: at,
        since,
        rollback: `the tree (size ${tree.size}) is smaller than the checkpoint of size ${since.size} ${when}: the log was rolled back`,
      };
    if (tree.size === since.size && !bytesEqual(tree.root, at.root))
      return {
        pin: at,
        since,
        rollback: `the tree of size ${tree.size} has another root than the one ${when}: the log forked`,
      };
    return { pin: at, since, ...(since.size > 0 ? { start: await stateBefore(source, since.size, tree.size) } : {}) };
  }
  if (!state) return { pin };
  const states = new FsckStateStore(state);
  const saved = await states.progress();
  const same = saved && saved.pin.size === pin.size && saved.pin.root === toHex(pin.root);
  const start = same && saved.state.bundle * 256 <= tree.size ? saved.state : undefined;
  return { pin, ...(start ? { start } : {}), onState: (s) => states.saveProgress(pin, s) };
}

/** After the check: the progress is done with; a clean tree is a checkpoint `--since` can start from. */
export async function finishAudit(state: ObjectStore | undefined, tree: Pin, clean: boolean): Promise<void> {
  if (!state) return;
  const states = new FsckStateStore(state);
  await states.clearProgress();
  if (clean) await states.recordVerified(tree.size, tree.root);
}
