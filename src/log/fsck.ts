// `stele log fsck`: checks a log's own storage (a data directory or a bucket) the way a
// verifier checks a mirror, and then what only the operator can see. The tree itself is
// recomputed by the offline audit (src/read/audit.ts: every entry hash along the chain,
// every leaf, every hash tile at every level, the root), against the newest signed
// checkpoint; around it, from a listing of every stored key:
//   - every object the checkpoint implies is present (a partial tile, or its full tile);
//   - nothing lies beyond the tree (a tile or bundle wider or further than its size implies);
//   - older partial tiles still stored are prefixes of the verified ones (clients at older
//     sizes read them);
//   - no `.tmp-*` leftovers of crashed writes, no names that are not the log's, no symlinks
//     or other non-regular files (a symlink in the served tree can serve any file);
//   - the sequencer's lock record against the published checkpoint.
// The tree checked is the one a start builds on: the published checkpoint's, or the lock
// record's when that is newer (committed, published at the next start), with the objects a
// start re-creates from the lock's staged batch. So a `log/` older than its lock (restored
// from a backup) is the missing objects it is, as `stele serve` finds them.
import { availableParallelism } from 'node:os';
import { EMPTY_ROOT, hashFromHex, toHex } from '../core/hash.js';
import { keyIdOf, type NoteVerifier } from '../core/note.js';
import { TILE_WIDTH, tilePath } from '../core/tiles.js';
import { NOT_WITNESSED, type Trust } from '../core/verify/index.js';
import { type AuditOptions, type AuditResult, auditLog } from '../read/audit.js';
import { CHECKPOINT_KEY } from '../store/layout.js';
import type { LockState } from '../store/lock.js';
import type { ObjectReader } from '../store/store.js';
import { checkLock, type LockReport, stagedObjects } from './fsck-lock.js';
import {
  checkStalePartials,
  classifyListing,
  type Finding,
  type FindingKind,
  Findings,
  type FsckTarget,
  impliedObjects,
} from './fsck-objects.js';
import { finishAudit, planAudit, sinceCheckpoint } from './fsck-resume.js';
import type { VerifiedCheckpoint } from './fsck-state.js';
import { type PublishedState, readPublished } from './published-state.js';

export {
  FINDINGS_PER_KIND,
  type FileKind,
  type Finding,
  type FindingKind,
  type FsckTarget,
  impliedObjects,
} from './fsck-objects.js';

/** The tree fsck checked: the published checkpoint's, or the lock record's when a start would publish that one. */
export interface CheckedTree {
  readonly size: number;
  readonly root: string;
  readonly from: 'published' | 'lock';
}

export type { LockRelation, LockReport } from './fsck-lock.js';

export interface FsckResult {
  readonly ok: boolean;
  readonly where: string;
  readonly origin: string;
  /** The checkpoint the tree was checked against (the newest signed one), if any. */
  readonly checkpoint: {
    readonly size: number;
    readonly root: string;
    readonly from: string;
    readonly timestamp?: string;
    readonly note: string;
  } | null;
  /** The tree recomputation (absent when there is no checkpoint to check against). */
  readonly audit?: Pick<
    AuditResult,
    'tree' | 'signature' | 'entriesChecked' | 'bundlesChecked' | 'hashTilesChecked' | 'failure'
  >;
  readonly lock: LockReport;
  /** The tree recomputed (and whose objects must all be present); null when there is none. */
  readonly tree: CheckedTree | null;
  /** With `since`: the verified checkpoint the check started from. */
  readonly since?: { readonly size: number; readonly root: string; readonly verifiedAt: string };
  /** Where the recomputation started when it continued a killed check (entries already checked then). */
  readonly resumedAt?: number;
  /** The first bad object: the audit's when the tree does not verify, else the first problem's. */
  readonly firstBad?: string;
  readonly problems: number;
  readonly notices: number;
  /** Findings, at most FINDINGS_PER_KIND of each kind (`problems`/`notices` count them all). */
  readonly findings: Finding[];
  /** Findings of each kind, all of them. */
  readonly counts: Partial<Record<FindingKind, number>>;
  /** Every object of the checked tree that is missing (the findings name the first few). */
  readonly missingObjects: string[];
  readonly objectsListed: number;
  readonly stalePartialsChecked: number;
  readonly elapsedMs: number;
}

export interface FsckOptions {
  /** Bundles read ahead by the audit (default 8, or 4 per thread). */
  readonly window?: number;
  /** Threads checking bundles (default: one per core). */
  readonly threads?: number;
  /**
   * Check only what is new since this checkpoint size fsck verified before ('last': the newest
   * one): the tree from there, pinned to it; no listing, no older partials. FsckSinceError if
   * there is none.
   */
  readonly since?: number | 'last';
  readonly onProgress?: (entriesDone: number, total: number) => void;
}

/**
 * Recomputes the tree of `note` (signed by `key`) from `source`, pinned to the tree it must
 * extend: the offline audit, as `stele ledger audit` makes it.
 */
export function auditTree(
  key: NoteVerifier,
  source: ObjectReader,
  note: string,
  pin: { readonly size: number; readonly root: Uint8Array },
  opts: FsckOptions & Pick<AuditOptions, 'start' | 'onState'> = {},
): Promise<AuditResult> {
  const trust: Trust = {
    origin: key.name,
    keyId: keyIdOf(key.publicKey),
    log: key,
    witnesses: [],
    quorum: NOT_WITNESSED,
    pin,
  };
  return auditLog({
    source,
    trust,
    note,
    window: opts.window,
    threads: opts.threads ?? availableParallelism(),
    onProgress: opts.onProgress,
    ...(opts.start ? { start: opts.start } : {}),
    ...(opts.onState ? { onState: opts.onState } : {}),
  });
}

/** `store`, with `extra` objects in front of it. */
export const overlay = (store: ObjectReader, extra: ReadonlyMap<string, Uint8Array>): ObjectReader =>
  extra.size === 0 ? store : { get: async (key) => extra.get(key) ?? store.get(key) };

/** The tree a start builds on, with the note that signs it. */
interface TreeToCheck {
  readonly size: number;
  readonly root: Uint8Array;
  readonly note: string;
  readonly from: 'published' | 'lock';
  /** The lock record, when the tree is its (newer than what is published). */
  readonly lock?: LockState;
}

export async function fsckLog(target: FsckTarget, opts: FsckOptions = {}): Promise<FsckResult> {
  const t0 = performance.now();
  const since = opts.since === undefined ? undefined : await sinceCheckpoint(target.state, opts.since);
  const out = new Findings();
  const published = await readPublished(target.store, target.key);
  for (const p of published.problems) out.add('problem', 'checkpoint', p.object, p.message);
  for (const n of published.notices) out.add('notice', 'checkpoint', n.object, n.message);
  const cp = published.checkpoint;
  const size = cp?.size ?? 0;
  const checked = await checkLock(target, cp, out);
  const tree = treeToCheck(cp, checked.report, checked.state, published.absent, out);
  // A check since a verified checkpoint reads what is new, and lists nothing.
  const { present, stale, listed } = since
    ? { present: null, stale: [], listed: 0 }
    : await classifyListing(target, size, checked.state, out);
  const restaged = tree?.lock ? await stagedObjects(target, tree.lock, out) : new Map<string, Uint8Array>();
  const missing = tree && present ? missingObjects(tree, present, restaged, out) : new Set<string>();
  const { audit, lock, stalePartialsChecked, resumedAt } = tree
    ? await checkTree(target, opts, { tree, cp, lock: checked, restaged, since, missing, stale }, out)
    : { lock: checked.report, stalePartialsChecked: 0 };
  const firstBad = audit?.failure?.object ?? out.list.find((f) => f.severity === 'problem')?.object;
  return {
    ok: out.problems === 0,
    where: target.where,
    origin: target.key.name,
    checkpoint: cp
      ? {
          size: cp.size,
          root: toHex(cp.root),
          from: cp.from,
          note: cp.note,
          ...(cp.timestamp !== undefined ? { timestamp: cp.timestamp } : {}),
        }
      : null,
    ...(audit ? { audit } : {}),
    lock,
    tree: tree ? { size: tree.size, root: toHex(tree.root), from: tree.from } : null,
    ...(since ? { since } : {}),
    ...(resumedAt !== undefined && !since ? { resumedAt } : {}),
    ...(firstBad !== undefined ? { firstBad } : {}),
    problems: out.problems,
    notices: out.notices,
    findings: out.list,
    counts: Object.fromEntries(out.perKind),
    missingObjects: [...missing],
    objectsListed: listed,
    stalePartialsChecked,
    elapsedMs: performance.now() - t0,
  };
}

/**
 * The tree a start builds on: a verified lock record ahead of what is published (a start
 * publishes it), else the published checkpoint's; none when neither exists.
 */
function treeToCheck(
  cp: PublishedState | null,
  lock: LockReport,
  lockState: LockState | undefined,
  absent: boolean,
  out: Findings,
): TreeToCheck | null {
  const ahead =
    lockState !== undefined && (lock.relation === 'newer' || (lock.relation === 'unchecked' && !cp))
      ? lockState
      : undefined;
  if (absent)
    out.add(
      ahead ? 'notice' : 'problem',
      'checkpoint',
      CHECKPOINT_KEY,
      ahead
        ? `the log has published no checkpoint: the next start publishes the lock record's (size ${ahead.size})`
        : 'the log has published no checkpoint',
    );
  if (ahead) return { size: ahead.size, root: hashFromHex(ahead.root), note: ahead.note, from: 'lock', lock: ahead };
  return cp && { size: cp.size, root: cp.root, note: cp.note, from: 'published' };
}

/** Every object the tree implies that is not stored, each a finding (the audit stops at the first). */
function missingObjects(
  tree: TreeToCheck,
  present: ReadonlySet<string>,
  restaged: ReadonlyMap<string, Uint8Array>,
  out: Findings,
): Set<string> {
  const missing = new Set<string>();
  const needs =
    tree.from === 'lock'
      ? `the lock record's tree of size ${tree.size} needs it (a start builds on it; is the log directory older than the lock record, restored from a backup?)`
      : `the checkpoint of size ${tree.size} needs it`;
  for (const id of impliedObjects(tree.size)) {
    const key = tilePath(id);
    if (present.has(key) || present.has(tilePath({ ...id, width: TILE_WIDTH })) || restaged.has(key)) continue;
    missing.add(key);
    out.add(
      'problem',
      'missing',
      key,
      `${key} is missing${id.width < TILE_WIDTH ? ' (and so is its full tile)' : ''}: ${needs}`,
    );
  }
  return missing;
}

/** What checkTree needs beside the target. */
interface TreeCheckInput {
  readonly tree: TreeToCheck;
  readonly cp: PublishedState | null;
  readonly lock: { readonly report: LockReport; readonly state?: LockState };
  readonly restaged: ReadonlyMap<string, Uint8Array>;
  readonly since: VerifiedCheckpoint | undefined;
  readonly missing: ReadonlySet<string>;
  readonly stale: Parameters<typeof checkStalePartials>[2];
}

/**
 * The tree recomputed by the audit, pinned to what it must extend: the published checkpoint
 * under a newer lock (clients have seen it), or a lock older than the checkpoint (is it a
 * restored backup of this tree, or of another tree: a fork?), or fsck's own last verified
 * checkpoint with `since`. Then the older partial tiles against the verified ones.
 */
async function checkTree(
  target: FsckTarget,
  opts: FsckOptions,
  { tree, cp, lock, restaged, since, missing, stale }: TreeCheckInput,
  out: Findings,
): Promise<{ audit?: FsckResult['audit']; lock: LockReport; stalePartialsChecked: number; resumedAt?: number }> {
  const pinned =
    tree.from === 'lock' && cp
      ? { size: cp.size, root: cp.root }
      : lock.report.relation === 'older' && lock.state
        ? { size: lock.state.size, root: hashFromHex(lock.state.root) }
        : { size: 0, root: EMPTY_ROOT };
  const source = overlay(target.store, restaged);
  const plan = await planAudit(target.state, source, tree, pinned, since);
  if (plan.rollback) {
    out.add('problem', 'rollback', CHECKPOINT_KEY, plan.rollback);
    return { lock: lock.report, stalePartialsChecked: 0 };
  }
  const { pin, start, onState } = plan;
  const r = await auditTree(target.key, source, tree.note, pin, {
    ...opts,
    ...(start ? { start } : {}),
    ...(onState ? { onState } : {}),
  });
  const treeOk = r.tree.ok && r.signature.ok;
  const audit = {
    tree: r.tree,
    signature: r.signature,
    entriesChecked: r.entriesChecked,
    bundlesChecked: r.bundlesChecked,
    hashTilesChecked: r.hashTilesChecked,
    ...(treeOk || !r.failure ? {} : { failure: r.failure }),
  };
  if (!treeOk && r.failure && !missing.has(r.failure.object))
    out.add('problem', 'tree', r.failure.object, r.failure.message);
  let report = lock.report;
  if (plan.since && !r.pin.ok && treeOk) {
    out.add(
      'problem',
      'rollback',
      CHECKPOINT_KEY,
      `the root recomputed at size ${pin.size} is not the one fsck verified at ${plan.since.verifiedAt}: objects below it changed, or the log forked`,
    );
  } else if (pin.size > 0 && !r.pin.ok && treeOk) {
    const detail =
      tree.from === 'lock'
        ? `${target.lockName}'s tree (size ${tree.size}) does not extend the published checkpoint (size ${pin.size}): the log forked`
        : `${target.lockName}'s root at size ${pin.size} is not the published tree's at that size: the lock is of another tree (a fork)`;
    out.add('problem', 'lock', target.lockName, detail);
    report = { ...report, relation: 'forked', detail };
  }
  const stalePartialsChecked = treeOk && cp ? await checkStalePartials(target.store, cp.size, stale, out) : 0;
  await finishAudit(target.state, tree, out.problems === 0);
  return { audit, lock: report, stalePartialsChecked, ...(start ? { resumedAt: start.bundle * TILE_WIDTH } : {}) };
}
