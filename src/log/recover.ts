// `stele log recover`: rebuilds the sequencer's lock record from what the log published.
// The published checkpoint is signed by the log key and every anchor it covers was
// acknowledged, so a lock that was lost (deleted, a table restored without its item) or rolled
// back (a restored backup) can be set to it without losing anything, provided the whole
// published tree verifies against it first (src/log/fsck.ts, the same check as `stele log
// fsck`). It never moves a lock backwards and never adopts a tree it could not verify.
// Beside the lock, it rewrites a public checkpoint object that does not verify from its
// verified twin (a start would serve it as it is). Where the log directory lacks objects of
// the lock record's tree (older than the lock: restored from a backup), it says which, and
// where they can come from: going back to the published size would fork the log.
import { openCheckpoint } from '../core/checkpoint.js';
import { encodePublishedCheckpoint } from '../sequencer/contract.js';
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY } from '../store/layout.js';
import { type LockState, LockFormatError, type SequencerLock } from '../store/lock.js';
import { VersionConflictError } from '../store/store.js';
import { decodeBundle, encodeBundle } from '../core/bundle.js';
import { EMPTY_ROOT, HASH_SIZE, hashFromHex } from '../core/hash.js';
import { TILE_WIDTH, parseTilePath, tilePath } from '../core/tiles.js';
import type { ObjectReader, StoredObject } from '../store/store.js';
import {
  type FindingKind,
  type FsckOptions,
  type FsckResult,
  type FsckTarget,
  auditTree,
  fsckLog,
  overlay,
} from './fsck.js';
import { logSignedNote, readPublished } from './published-state.js';

export type RefusalReason =
  | 'no-checkpoint'
  | 'missing-objects'
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
  /** Public checkpoint objects rewritten from their verified twin (they did not verify). */
  readonly republished: string[];
  /** Objects of the lock record's tree copied from `objectsFrom`, once they verified. */
  readonly fetched: string[];
  readonly fsck: FsckResult;
}

/** Missing objects named in a refusal; the rest are counted. */
const NAMED = 5;

/** Findings that mean the published state itself does not verify. */
const UNVERIFIED: readonly FindingKind[] = ['checkpoint', 'tree', 'missing', 'stale-partial', 'not-regular'];

export interface RecoverOptions extends FsckOptions {
  readonly now?: () => number;
  /**
   * Where the objects of the lock record's tree that the log lacks may be copied from: a
   * mirror's tiles, a copy of the log directory. Each is verified (the whole tree is) before
   * any is written.
   */
  readonly objectsFrom?: ObjectReader & { describe(): string };
}

export async function recoverLock(
  target: FsckTarget & { readonly lock: SequencerLock },
  opts: RecoverOptions = {},
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
  const lock = fsck.lock;
  const tree = fsck.tree;
  const missing = fsck.findings.filter((f) => f.severity === 'problem' && f.kind === 'missing');
  if (tree && missing.length > 0) return recoverMissing(target, opts, fsck, tree, missing, before, refuse);
  const cp = fsck.checkpoint;
  if (!cp) {
    if (tree?.from === 'lock' && fsck.ok)
      refuse(
        'lock-newer',
        `nothing to recover: no checkpoint is published, and the lock record's tree (size ${tree.size}) verifies; \`stele serve\` publishes it at start`,
      );
    refuse(
      'no-checkpoint',
      `no published checkpoint verifies under the log key: nothing to recover from (${fsck.findings[0]?.message ?? 'no checkpoint'})`,
    );
  }
  // A checkpoint object that does not verify, beside a verified twin, is rewritten from it:
  // it is not the tree that is wrong, and a start would serve that object as it is.
  const unverified = (await readPublished(target.store, target.key)).problems.filter((p) => p.unverified);
  const rewritable = new Set(unverified.map((p) => p.object));
  const bad = fsck.findings.find(
    (f) =>
      f.severity === 'problem' && UNVERIFIED.includes(f.kind) && !(f.kind === 'checkpoint' && rewritable.has(f.object)),
  );
  if (bad) refuse('unverified', `the published log does not verify, so it cannot be recovered from: ${bad.message}`);
  const beyond = fsck.findings.filter((f) => f.kind === 'beyond');
  if (beyond.length > 0) {
    const more = beyond.length > 1 ? ` and ${beyond.length - 1} more` : '';
    refuse(
      'beyond',
      `objects lie beyond the published tree of size ${cp.size} (${beyond[0]!.object}${more}): a newer lost state wrote them; recovering to size ${cp.size} could fork the log`,
    );
  }
  if (lock.relation === 'newer')
    refuse(
      'lock-newer',
      `nothing to recover: the lock record (size ${lock.size}) is newer than the published checkpoint (size ${cp.size}); \`stele serve\` publishes it at start`,
    );
  if (lock.relation === 'forked' || lock.relation === 'invalid')
    refuse(lock.relation === 'forked' ? 'forked' : 'lock-invalid', lock.detail);
  const republished = await rewriteCheckpoints(target, [...rewritable], cp, before?.state, opts.now ?? Date.now);
  if (lock.relation === 'equal') {
    return {
      status: republished.length > 0 ? 'recovered' : 'up-to-date',
      previous: { relation: 'equal', size: lock.size! },
      size: cp.size,
      root: cp.root,
      timestamp: cp.timestamp ?? '',
      republished,
      fetched: [],
      fsck,
    };
  }
  return setLock(target, opts, fsck, cp, before, republished, refuse);
}

type Refuse = (reason: RefusalReason, message: string) => never;
type HeldLockRecord = Awaited<ReturnType<SequencerLock['read']>>;

/**
 * The log lacks objects of the tree it must keep (the lock's, or the checkpoint's): refused,
 * naming them, unless `objectsFrom` has them; then they are copied once the whole tree
 * verifies, and the lock record is recovered as ever.
 */
async function recoverMissing(
  target: FsckTarget & { readonly lock: SequencerLock },
  opts: RecoverOptions,
  fsck: FsckResult,
  tree: NonNullable<FsckResult['tree']>,
  missing: readonly FsckResult['findings'][number][],
  before: HeldLockRecord,
  refuse: Refuse,
): Promise<RecoverResult> {
  const lock = fsck.lock;
  const count = fsck.counts.missing ?? missing.length;
  const named = missing.slice(0, NAMED).map((f) => f.object);
  const whose =
    tree.from === 'lock'
      ? `the tree its lock record commits to (size ${tree.size})`
      : `the tree of its published checkpoint (size ${tree.size})`;
  const why =
    tree.from === 'lock'
      ? `The public objects are older than the lock record (restored from a backup?); going back to the published size ${fsck.checkpoint?.size ?? 0} would sign a second tree where clients may have seen size ${tree.size}, a fork.`
      : 'The tiles are older than the checkpoint (restored from a backup?) or were deleted.';
  if (!opts.objectsFrom)
    refuse(
      'missing-objects',
      `${target.where} lacks ${count} object${count === 1 ? '' : 's'} of ${whose}: ${named.join(', ')}${count > named.length ? `, … (\`stele log fsck --json\` lists them)` : ''}. ${why} They can come from a mirror of this log (its tiles) or a copy of the log directory taken at size ${tree.size} or later: \`stele log recover --objects-from <tiles URL or directory>\` copies them once the whole tree verifies`,
    );
  const note = tree.from === 'lock' ? before?.state.note : fsck.checkpoint?.note;
  if (note === undefined) return refuse('conflict', `${target.lockName} changed while the log was being checked`);
  const fetched = await fetchMissing(target, opts.objectsFrom, fsck, note, refuse, opts);
  // With the objects in place, the rest (the lock record) is recovered as ever, if it needs to be.
  const rest = await recoverLock(target, { ...opts, objectsFrom: undefined }).catch((e: unknown) => {
    if (e instanceof RecoverRefusedError && e.reason === 'lock-newer') return null;
    throw e;
  });
  return rest
    ? { ...rest, status: 'recovered', fetched }
    : {
        status: 'recovered',
        previous: { relation: lock.relation, ...(lock.size !== undefined ? { size: lock.size } : {}) },
        size: tree.size,
        root: tree.root,
        timestamp: before?.state.timestamp ?? '',
        republished: [],
        fetched,
        fsck,
      };
}

/**
 * Sets a missing or older lock record to the published checkpoint. Its publish time comes
 * from checkpoint.json; when only the note holds the newest size, now stands in (the
 * sequencer only needs checkpoint times to increase).
 */
async function setLock(
  target: FsckTarget & { readonly lock: SequencerLock },
  opts: RecoverOptions,
  fsck: FsckResult,
  cp: NonNullable<FsckResult['checkpoint']>,
  before: HeldLockRecord,
  republished: string[],
  refuse: Refuse,
): Promise<RecoverResult> {
  const lock = fsck.lock;
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
    republished,
    fetched: [],
    fsck,
  };
}

/**
 * Copies the objects of the checked tree that the log lacks from `source` (a partial it no
 * longer has is cut from its full tile), once the whole tree verifies with them against
 * `note` (the tree's checkpoint) and extends the published one; writes nothing else.
 */
async function fetchMissing(
  target: FsckTarget,
  source: ObjectReader & { describe(): string },
  fsck: FsckResult,
  note: string,
  refuse: (reason: RefusalReason, message: string) => never,
  opts: FsckOptions,
): Promise<string[]> {
  const objects: StoredObject[] = [];
  const lacking: string[] = [];
  for (const key of fsck.missingObjects) {
    const data = await fetchObject(source, key);
    if (data) objects.push({ key, data });
    else lacking.push(key);
  }
  if (lacking.length > 0)
    refuse(
      'missing-objects',
      `${source.describe()} lacks ${lacking.length} of the ${fsck.missingObjects.length} missing objects too (${lacking.slice(0, NAMED).join(', ')}); nothing was written`,
    );
  // The tree must extend the published checkpoint (clients have seen it).
  const cp = fsck.checkpoint;
  const pin =
    cp && cp.size < (fsck.tree?.size ?? 0)
      ? { size: cp.size, root: hashFromHex(cp.root) }
      : { size: 0, root: EMPTY_ROOT };
  const extra = new Map(objects.map((o) => [o.key, o.data]));
  const r = await auditTree(target.key, overlay(target.store, extra), note, pin, opts);
  if (!r.tree.ok || !r.signature.ok || !r.pin.ok)
    refuse(
      'unverified',
      `the objects from ${source.describe()} do not complete the tree (size ${fsck.tree?.size ?? 0}): ${r.failure?.message ?? (r.pin.ok ? r.tree.detail : r.pin.detail)}; nothing was written`,
    );
  await target.store.createAll(objects);
  return objects.map((o) => o.key);
}

/** Object `key` from `source`; a partial it lacks is cut from its full tile. */
async function fetchObject(source: ObjectReader, key: string): Promise<Uint8Array | null> {
  const data = await source.get(key);
  const id = parseTilePath(key);
  if (data || !id || id.width === TILE_WIDTH) return data;
  const full = await source.get(tilePath({ ...id, width: TILE_WIDTH }));
  if (!full) return null;
  return typeof id.kind === 'number'
    ? full.subarray(0, id.width * HASH_SIZE)
    : encodeBundle(decodeBundle(full, key).slice(0, id.width));
}

/**
 * Rewrites each of `keys` (checkpoint objects that do not verify) from the verified
 * checkpoint `cp`: the note as published, or the note with its publish time (the lock's at
 * that size, else now). Returns the keys written.
 */
async function rewriteCheckpoints(
  target: FsckTarget,
  keys: readonly string[],
  cp: NonNullable<FsckResult['checkpoint']>,
  lock: LockState | undefined,
  now: () => number,
): Promise<string[]> {
  const written: string[] = [];
  for (const key of keys) {
    let data: Uint8Array;
    if (key === CHECKPOINT_KEY) data = Buffer.from(cp.note);
    else if (key === CHECKPOINT_JSON_KEY) {
      const timestamp = cp.timestamp ?? (lock?.size === cp.size ? lock.timestamp : new Date(now()).toISOString());
      data = encodePublishedCheckpoint({ ...openCheckpoint(cp.note, target.key), timestamp });
    } else continue;
    const current = await target.store.getVersioned(key);
    await target.store.swap(key, data, current?.version ?? null);
    written.push(key);
  }
  return written;
}
