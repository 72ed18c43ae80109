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
import { type AuditOptions, type AuditResult, auditLog } from '../read/audit.js';
import {
  type FsckTarget,
  type Finding,
  type FindingKind,
  Findings,
  checkStalePartials,
  classifyListing,
  impliedObjects,
} from './fsck-objects.js';
import { finishAudit, planAudit, sinceCheckpoint } from './fsck-resume.js';
import { NOT_WITNESSED, type Trust } from '../core/verify/index.js';
import { openCheckpoint } from '../core/checkpoint.js';
import { EMPTY_ROOT, hashFromHex, toHex } from '../core/hash.js';
import { type NoteVerifier, keyIdOf } from '../core/note.js';
import { CHECKPOINT_KEY } from '../store/layout.js';
import type { LockState } from '../store/lock.js';
import { TILE_WIDTH, TileFormatError, tilePath } from '../core/tiles.js';
import { decodeBundle } from '../core/bundle.js';
import { loadEdge } from '../sequencer/recover.js';
import { LogIntegrityError, MissingObjectError } from '../read/tilestore.js';
import type { ObjectReader } from '../store/store.js';
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

/** How the lock record stands to the published checkpoint. */
export type LockRelation = 'equal' | 'older' | 'newer' | 'forked' | 'missing' | 'invalid' | 'unchecked';

export interface LockReport {
  readonly relation: LockRelation;
  readonly size?: number;
  readonly root?: string;
  readonly detail: string;
}

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

/** Reads the lock record and says how it stands to `published`. */
async function checkLock(
  target: FsckTarget,
  published: PublishedState | null,
  out: Findings,
): Promise<{ report: LockReport; state?: LockState }> {
  const { lock, lockName, key } = target;
  if (!lock) return { report: { relation: 'unchecked', detail: 'not checked' } };
  let held;
  try {
    held = await lock.read();
  } catch (e) {
    const detail = `${lockName} cannot be read: ${(e as Error).message}`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'invalid', detail } };
  }
  if (!held) {
    const detail = `there is no lock record (${lockName}): a start would not know the log's size; \`stele log recover\` rebuilds it from the published checkpoint`;
    if (published) out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'missing', detail } };
  }
  const { state } = held;
  const base = { size: state.size, root: state.root };
  try {
    const c = openCheckpoint(state.note, key);
    if (c.size !== state.size || toHex(c.root) !== state.root)
      throw new Error('its note does not match its size and root');
  } catch (e) {
    const detail = `${lockName} does not verify under the log key: ${(e as Error).message}`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'invalid', ...base, detail }, state };
  }
  if (!published)
    return {
      report: { relation: 'unchecked', ...base, detail: `size ${state.size}; no published checkpoint to compare` },
      state,
    };
  const cpRoot = toHex(published.root);
  if (state.size === published.size) {
    if (state.root === cpRoot)
      return {
        report: { relation: 'equal', ...base, detail: `size ${state.size} and root equal the published checkpoint's` },
        state,
      };
    const detail = `${lockName} and the published checkpoint sign two different roots for size ${state.size}: the log forked`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'forked', ...base, detail }, state };
  }
  if (state.size > published.size) {
    const detail = `${lockName} (size ${state.size}) is newer than the published checkpoint (size ${published.size}): a batch committed but not yet published; the next start publishes it`;
    out.add('notice', 'lock', lockName, detail);
    return { report: { relation: 'newer', ...base, detail }, state };
  }
  const detail = `${lockName} (size ${state.size}) is older than the published checkpoint (size ${published.size}): a restored or rolled-back lock; \`stele log recover\` rebuilds it`;
  out.add('problem', 'lock', lockName, detail);
  return { report: { relation: 'older', ...base, detail }, state };
}

/**
 * The objects a start re-creates from the lock record's staged batch, by key, as
 * src/sequencer/sequencer.ts re-applies it (the edge at its start size, then its records);
 * none if nothing is staged or its staging object is gone (its objects were durable). What
 * stops a start from re-applying it is a finding.
 */
async function stagedObjects(target: FsckTarget, state: LockState, out: Findings): Promise<Map<string, Uint8Array>> {
  const staged = state.staged;
  const none = new Map<string, Uint8Array>();
  if (!staged) return none;
  const data = staged.key !== undefined ? await target.staging?.get(staged.key) : Buffer.from(staged.records, 'base64');
  if (!data) return none;
  const label = staged.key ?? `the batch staged in ${target.lockName}`;
  try {
    const base = await loadEdge(target.store, staged.fromSize, hashFromHex(staged.fromRoot));
    const result = base.append(decodeBundle(data, label, Number.MAX_SAFE_INTEGER));
    if (result.edge.size !== state.size || toHex(result.root) !== state.root)
      throw new LogIntegrityError(`${label} does not reproduce the lock record's root`);
    return new Map(result.objects.map((o) => [o.key, o.data]));
  } catch (e) {
    if (e instanceof MissingObjectError) {
      out.add(
        'problem',
        'missing',
        e.key,
        `${e.key} is missing: a start re-applies the batch staged in ${target.lockName} onto size ${staged.fromSize}, and needs it`,
      );
    } else if (e instanceof LogIntegrityError || e instanceof TileFormatError) {
      out.add('problem', 'tree', label, `a start cannot re-apply ${label}: ${e.message}`);
    } else throw e;
    return none;
  }
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
  let lock = checked.report;
  const lockState = checked.state;
  // A verified lock ahead of what is published is what a start builds on (and then publishes).
  const ahead =
    lockState !== undefined && (lock.relation === 'newer' || (lock.relation === 'unchecked' && !cp))
      ? lockState
      : undefined;
  if (published.absent)
    out.add(
      ahead ? 'notice' : 'problem',
      'checkpoint',
      CHECKPOINT_KEY,
      ahead
        ? `the log has published no checkpoint: the next start publishes the lock record's (size ${ahead.size})`
        : 'the log has published no checkpoint',
    );
  const tree = ahead
    ? { size: ahead.size, root: hashFromHex(ahead.root), note: ahead.note, from: 'lock' as const }
    : cp && { size: cp.size, root: cp.root, note: cp.note, from: 'published' as const };
  // A check since a verified checkpoint reads what is new, and lists nothing.
  const { present, stale, listed } = since
    ? { present: null, stale: [], listed: 0 }
    : await classifyListing(target, size, lockState, out);
  const restaged = ahead ? await stagedObjects(target, ahead, out) : new Map<string, Uint8Array>();

  // Every object the tree implies, all of them (the audit below stops at the first).
  const missing = new Set<string>();
  if (tree && present) {
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
  }

  let audit: FsckResult['audit'];
  let stalePartialsChecked = 0;
  let plan: Awaited<ReturnType<typeof planAudit>> | undefined;
  if (tree) {
    // The tree is pinned to what it must extend: the published checkpoint under a newer lock
    // (clients have seen it), or a lock older than the checkpoint (is it a restored backup of
    // this tree, or of another tree: a fork?).
    const pinned =
      tree.from === 'lock' && cp
        ? { size: cp.size, root: cp.root }
        : lock.relation === 'older' && lockState
          ? { size: lockState.size, root: hashFromHex(lockState.root) }
          : { size: 0, root: EMPTY_ROOT };
    plan = await planAudit(target.state, overlay(target.store, restaged), tree, pinned, since);
    if (plan.rollback) out.add('problem', 'rollback', CHECKPOINT_KEY, plan.rollback);
  }
  if (tree && plan && !plan.rollback) {
    const { pin: pinned, start, onState } = plan;
    const r = await auditTree(target.key, overlay(target.store, restaged), tree.note, pinned, {
      ...opts,
      ...(start ? { start } : {}),
      ...(onState ? { onState } : {}),
    });
    const treeOk = r.tree.ok && r.signature.ok;
    audit = {
      tree: r.tree,
      signature: r.signature,
      entriesChecked: r.entriesChecked,
      bundlesChecked: r.bundlesChecked,
      hashTilesChecked: r.hashTilesChecked,
      ...(treeOk || !r.failure ? {} : { failure: r.failure }),
    };
    if (!treeOk && r.failure && !missing.has(r.failure.object)) {
      out.add('problem', 'tree', r.failure.object, r.failure.message);
    }
    if (plan.since && !r.pin.ok && treeOk) {
      out.add(
        'problem',
        'rollback',
        CHECKPOINT_KEY,
        `the root recomputed at size ${pinned.size} is not the one fsck verified at ${plan.since.verifiedAt}: objects below it changed, or the log forked`,
      );
    } else if (pinned.size > 0 && !r.pin.ok && treeOk) {
      const detail =
        tree.from === 'lock'
          ? `${target.lockName}'s tree (size ${tree.size}) does not extend the published checkpoint (size ${pinned.size}): the log forked`
          : `${target.lockName}'s root at size ${pinned.size} is not the published tree's at that size: the lock is of another tree (a fork)`;
      out.add('problem', 'lock', target.lockName, detail);
      lock = { ...lock, relation: 'forked', detail };
    }
    if (treeOk && cp) stalePartialsChecked = await checkStalePartials(target.store, size, stale, out);
    await finishAudit(target.state, tree, out.problems === 0);
  }

  const treeFailure = audit?.failure?.object;
  const firstProblem = out.list.find((f) => f.severity === 'problem')?.object;
  const firstBad = treeFailure ?? firstProblem;
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
    ...(plan?.start && !since ? { resumedAt: plan.start.bundle * TILE_WIDTH } : {}),
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
