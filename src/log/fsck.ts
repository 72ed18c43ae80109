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
import { finishAudit, planAudit, sinceCheckpoint } from './fsck-resume.js';
import { parallelRange } from '../read/pipeline.js';
import { NOT_WITNESSED, type Trust } from '../core/verify/index.js';
import { openCheckpoint } from '../core/checkpoint.js';
import { EMPTY_ROOT, bytesEqual, hashFromHex, toHex } from '../core/hash.js';
import { type NoteVerifier, keyIdOf } from '../core/note.js';
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY, EXPLORER_CONFIG_KEY } from '../store/layout.js';
import type { LockState, SequencerLock } from '../store/lock.js';
import type { ObjectStore } from '../store/store.js';
import {
  TILE_WIDTH,
  type TileId,
  type TileKind,
  levelHashCount,
  parseTilePath,
  tilePath,
  tileWidthAt,
} from '../core/tiles.js';
import { decodeBundle, encodeBundle } from '../core/bundle.js';
import { TileFormatError } from '../core/tiles.js';
import { loadEdge } from '../sequencer/recover.js';
import { LogIntegrityError, MissingObjectError, readTileBytes } from '../read/tilestore.js';
import type { ObjectReader } from '../store/store.js';
import { type PublishedState, readPublished } from './published-state.js';

/** What a stored key is on disk; a bucket holds only objects, so it has no such question. */
export type FileKind = 'file' | 'symlink' | 'other' | 'missing';

export interface FsckTarget {
  /** Where the log is, for messages (a directory, `s3://bucket/prefix`). */
  readonly where: string;
  /** The public objects: read, and listed. */
  readonly store: ObjectStore;
  /** The sequencer's lock record; null to leave it unchecked. */
  readonly lock: SequencerLock | null;
  /** How the lock record is named in messages (`private/lock.json`, `DynamoDB item …`). */
  readonly lockName: string;
  /** The log key (its name is the origin). */
  readonly key: NoteVerifier;
  /** A local directory's answer to "is this key a regular file?" (lstat, never following links). */
  readonly fileKind?: (key: string) => Promise<{ kind: FileKind; detail?: string }>;
  /** The sequencer's private objects, where a staged batch's records are; absent: a staged batch named by key is not read. */
  readonly staging?: ObjectReader;
  /** Where fsck keeps its own state (verified checkpoints, progress): the private objects; absent: none kept. */
  readonly state?: ObjectStore;
}

/** The tree fsck checked: the published checkpoint's, or the lock record's when a start would publish that one. */
export interface CheckedTree {
  readonly size: number;
  readonly root: string;
  readonly from: 'published' | 'lock';
}

export type FindingKind =
  | 'checkpoint'
  | 'tree'
  | 'missing'
  | 'beyond'
  | 'unpublished'
  | 'stale-partial'
  | 'tmp'
  | 'mutex'
  | 'unexpected'
  | 'not-regular'
  | 'lock'
  | 'rollback';

export interface Finding {
  /** A problem makes fsck fail (exit 1); a notice is odd but harmless. */
  readonly severity: 'problem' | 'notice';
  readonly kind: FindingKind;
  readonly object: string;
  readonly message: string;
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

/** A broken directory can have millions of bad names; the report keeps the first of each kind. */
export const FINDINGS_PER_KIND = 20;

class Findings {
  readonly list: Finding[] = [];
  problems = 0;
  notices = 0;
  readonly perKind = new Map<FindingKind, number>();

  add(severity: Finding['severity'], kind: FindingKind, object: string, message: string): void {
    if (severity === 'problem') this.problems++;
    else this.notices++;
    const n = this.perKind.get(kind) ?? 0;
    this.perKind.set(kind, n + 1);
    if (n < FINDINGS_PER_KIND) this.list.push({ severity, kind, object, message });
  }
}

const levelOf = (kind: TileKind): number => (typeof kind === 'number' ? kind : 0);
const basename = (key: string): string => key.slice(key.lastIndexOf('/') + 1);
const WELL_KNOWN = new Set([CHECKPOINT_KEY, CHECKPOINT_JSON_KEY, EXPLORER_CONFIG_KEY]);

/** Every tile and bundle a tree of `size` needs, each at the width it has at that size. */
export function* impliedObjects(size: number): Iterable<TileId> {
  const bundles = Math.ceil(size / TILE_WIDTH);
  for (let n = 0; n < bundles; n++) {
    const width = tileWidthAt(0, n, size);
    for (const kind of ['entries', 'records', 0] as const) yield { kind, index: n, width };
  }
  for (let level = 1; levelHashCount(level, size) > 0; level++) {
    const tiles = Math.ceil(levelHashCount(level, size) / TILE_WIDTH);
    for (let n = 0; n < tiles; n++) yield { kind: level, index: n, width: tileWidthAt(level, n, size) };
  }
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

/** Lists every stored key and sorts it: the log's own objects, leftovers, strangers. */
async function classifyListing(target: FsckTarget, size: number, lockState: LockState | undefined, out: Findings) {
  const present = new Set<string>();
  /** Older partial tiles within the tree, to compare with the verified ones. */
  const stale: TileId[] = [];
  const keys: string[] = [];
  for await (const key of target.store.list('')) keys.push(key);
  const ahead = lockState && lockState.size > size ? lockState.size : size;
  for (const key of keys) {
    const name = basename(key);
    if (name.includes('.tmp-')) {
      out.add(
        'problem',
        'tmp',
        key,
        `${key} is a leftover of a crashed write: remove it (it is never part of the log, but a mirror copies it)`,
      );
      continue;
    }
    if (name.startsWith('.mutex-owner-') || name.endsWith('.lock')) {
      out.add(
        'notice',
        'mutex',
        key,
        `${key} is a swap mutex of a writer process (a later writer removes it once its owner is gone)`,
      );
      continue;
    }
    if (WELL_KNOWN.has(key)) continue;
    const id = parseTilePath(key);
    if (!id) {
      out.add('problem', 'unexpected', key, `${key} is not an object of the log`);
      continue;
    }
    present.add(key);
    const level = levelOf(id.kind);
    const need = tileWidthAt(level, id.index, size);
    if (id.width === need) continue; // read and verified by the audit
    if (id.width < need) stale.push(id);
    else if (id.width <= tileWidthAt(level, id.index, ahead)) {
      out.add(
        'notice',
        'unpublished',
        key,
        `${key} is beyond the published tree (size ${size}) but within the committed lock (size ${ahead}): the next start publishes it`,
      );
    } else {
      out.add(
        'problem',
        'beyond',
        key,
        `${key} is beyond the tree: a tree of size ${size} has ${need === 0 ? 'no such tile' : `only ${tilePath({ ...id, width: need })}`}`,
      );
    }
  }
  if (target.fileKind) {
    const fileKind = target.fileKind;
    await parallelRange(0, keys.length, 16, async (i) => {
      const key = keys[i]!;
      const { kind, detail } = await fileKind(key);
      if (kind === 'symlink')
        out.add(
          'problem',
          'not-regular',
          key,
          `${key} is a symbolic link${detail ? ` to ${detail}` : ''}: the log directory holds regular files only (a link can serve any file)`,
        );
      else if (kind === 'other')
        out.add('problem', 'not-regular', key, `${key} is not a regular file${detail ? ` (${detail})` : ''}`);
    });
  }
  return { present, stale, listed: keys.length };
}

/** Checks each older partial tile against the verified object of the same index. */
async function checkStalePartials(
  store: ObjectStore,
  size: number,
  stale: readonly TileId[],
  out: Findings,
): Promise<number> {
  const groups = new Map<string, TileId[]>();
  for (const id of stale) {
    const g = `${id.kind}/${id.index}`;
    groups.set(g, [...(groups.get(g) ?? []), id]);
  }
  let checked = 0;
  for (const ids of groups.values()) {
    const { kind, index } = ids[0]!;
    const width = tileWidthAt(levelOf(kind), index, size);
    const verified = await readTileBytes(store, kind, index, width);
    const items = typeof kind === 'number' ? null : decodeBundle(verified, tilePath({ kind, index, width }));
    for (const id of ids) {
      const key = tilePath(id);
      const bytes = await store.get(key);
      if (!bytes) continue; // deleted since the listing (the sweeper)
      const expected = items ? encodeBundle(items.slice(0, id.width)) : verified.subarray(0, id.width * 32);
      checked++;
      if (!bytesEqual(bytes, expected)) {
        out.add(
          'problem',
          'stale-partial',
          key,
          `${key} differs from the first ${id.width} ${items ? 'items' : 'hashes'} of the verified ${tilePath({ kind, index, width })}: clients at older tree sizes read a corrupted tile`,
        );
      }
    }
  }
  return checked;
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
