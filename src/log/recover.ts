// `stele log recover`: rebuilds the sequencer's lock record from what the log published.
// The published checkpoint is signed by the log key and every anchor it covers was
// acknowledged, so a lock that was lost (deleted, a table restored without its item) or rolled
// back (a restored backup) can be set to it without losing anything, provided the whole
// published tree verifies against it first (src/log/fsck.ts, the same check as `stele log
// fsck`). It never moves a lock backwards and never adopts a tree it could not verify.
import { type LockState, LockFormatError, type SequencerLock } from '../store/lock.js';
import { VersionConflictError } from '../store/store.js';
import { type FindingKind, type FsckOptions, type FsckResult, type FsckTarget, fsckLog } from './fsck.js';
import { logSignedNote } from './published.js';

export type RefusalReason =
  | 'no-checkpoint'
  | 'unverified'
  | 'beyond'
  | 'forked'
  | 'lock-newer'
  | 'lock-invalid'
  | 'conflict';

/** Recovery would lose or invent something; nothing was written. */
export class RecoverRefusedError extends Error {
  override name = 'RecoverRefusedError';
  constructor(
    readonly reason: RefusalReason,
    message: string,
    readonly fsck?: FsckResult,
  ) {
    super(message);
  }
}

export interface RecoverResult {
  /** `recovered`: the lock was written; `up-to-date`: it already equalled the checkpoint. */
  readonly status: 'recovered' | 'up-to-date';
  /** The lock record before: missing, or older with its size. */
  readonly previous: { readonly relation: string; readonly size?: number };
  readonly size: number;
  readonly root: string;
  readonly timestamp: string;
  readonly fsck: FsckResult;
}

/** Findings that mean the published state itself does not verify. */
const UNVERIFIED: readonly FindingKind[] = ['checkpoint', 'tree', 'missing', 'stale-partial', 'not-regular'];

export async function recoverLock(
  target: FsckTarget & { readonly lock: SequencerLock },
  opts: FsckOptions & { readonly now?: () => number } = {},
): Promise<RecoverResult> {
  // The version to swap against is read before the check, so a lock that changes meanwhile
  // (a server started after all) makes the swap fail rather than be overwritten.
  let before;
  try {
    before = await target.lock.read();
  } catch (e) {
    if (!(e instanceof LockFormatError)) throw e;
    throw new RecoverRefusedError(
      'lock-invalid',
      `${target.lockName} cannot be read (${e.message}); move it aside and run recover again`,
    );
  }
  const fsck = await fsckLog(target, opts);
  // Typed where declared, so that a call narrows like a throw.
  const refuse: (reason: RefusalReason, message: string) => never = (reason, message) => {
    throw new RecoverRefusedError(reason, message, fsck);
  };
  const cp = fsck.checkpoint;
  if (!cp)
    refuse(
      'no-checkpoint',
      `no published checkpoint verifies under the log key: nothing to recover from (${fsck.findings[0]?.message ?? 'no checkpoint'})`,
    );
  const bad = fsck.findings.find((f) => f.severity === 'problem' && UNVERIFIED.includes(f.kind));
  if (bad) refuse('unverified', `the published log does not verify, so it cannot be recovered from: ${bad.message}`);
  const beyond = fsck.findings.filter((f) => f.kind === 'beyond');
  if (beyond.length > 0) {
    const more = beyond.length > 1 ? ` and ${beyond.length - 1} more` : '';
    refuse(
      'beyond',
      `objects lie beyond the published tree of size ${cp.size} (${beyond[0]!.object}${more}): a newer lost state wrote them; recovering to size ${cp.size} could fork the log`,
    );
  }
  const lock = fsck.lock;
  if (lock.relation === 'newer')
    refuse(
      'lock-newer',
      `nothing to recover: the lock record (size ${lock.size}) is newer than the published checkpoint (size ${cp.size}); \`stele serve\` publishes it at start`,
    );
  if (lock.relation === 'forked' || lock.relation === 'invalid')
    refuse(lock.relation === 'forked' ? 'forked' : 'lock-invalid', lock.detail);
  if (lock.relation === 'equal') {
    return {
      status: 'up-to-date',
      previous: { relation: 'equal', size: lock.size! },
      size: cp.size,
      root: cp.root,
      timestamp: cp.timestamp ?? '',
      fsck,
    };
  }
  // Missing or older: set it to the published checkpoint. Its publish time comes from
  // checkpoint.json; when only the note holds the newest size, now stands in (the sequencer
  // only needs checkpoint times to increase).
  const timestamp = cp.timestamp ?? new Date((opts.now ?? Date.now)()).toISOString();
  const next: LockState = { size: cp.size, root: cp.root, timestamp, note: logSignedNote(cp.note, target.key) };
  try {
    await target.lock.swap(before?.version ?? null, next);
  } catch (e) {
    if (e instanceof VersionConflictError)
      refuse(
        'conflict',
        `${target.lockName} changed while the log was being checked (is a server running on it?); nothing was written`,
      );
    throw e;
  }
  const after = await target.lock.read();
  if (!after || after.state.size !== next.size || after.state.root !== next.root)
    throw new Error(`${target.lockName} does not read back as written`);
  return {
    status: 'recovered',
    previous: { relation: lock.relation, ...(lock.size !== undefined ? { size: lock.size } : {}) },
    size: next.size,
    root: next.root,
    timestamp,
    fsck,
  };
}
