// Full offline audit of a log copy (a mirror directory or a tile URL): recomputes, from
// nothing but the records, every entry hash along the chain, every leaf, every hash tile at
// every level and the root, and checks the checkpoint's signature and cosignatures and its
// consistency with the pinned checkpoint. It streams bundle by bundle (bounded memory) and
// stops at the first object that disagrees, naming it.
import { EMPTY_ROOT, bytesEqual, toHex } from '../core/hash.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH, tilePath, tileRoot } from '../core/tiles.js';
import { RequestThread, startModuleWorker } from '../store/threads.js';
import { type AuditFailure, type BundleInput, type BundleVerdict, checkBundle } from './bundle-check.js';
import { orderedPipeline } from './pipeline.js';
import { AuditStop, UpperTiles, type UpperTilesState, fetchObject } from './upper-tiles.js';
import {
  type CheckedCheckpoint,
  type Outcome,
  type ProveConsistency,
  type Trust,
  checkCheckpoint,
  checkCopyConsistency,
} from '../core/verify/index.js';

export type { AuditFailure } from './bundle-check.js';

export interface AuditOptions {
  readonly source: ObjectReader;
  readonly trust: Trust;
  /** Bundles fetched ahead (default 8). */
  readonly window?: number;
  readonly onProgress?: (entriesDone: number, total: number) => void;
  /**
   * The checkpoint note to audit the tree against, when the caller has already chosen it
   * (`stele log fsck` picks the newer of `checkpoint` and `checkpoint.json`); default: the
   * source's `checkpoint`.
   */
  readonly note?: string;
  /** Consistency proofs up to the pin (the log's API): tells a copy older than the pin from a rollback. */
  readonly proveToPin?: ProveConsistency | null;
  /** Whether a failure to get that proof is the transport's (reported as such, no verdict), not the log's. */
  readonly isTransportError?: (e: unknown) => boolean;
  /** Worker threads checking bundles side by side (default 0: on this thread). */
  readonly threads?: number;
  /** Where to start: the state an earlier audit of the same tree's prefix reached (`onState`). */
  readonly start?: AuditState;
  /** Told the state after a full bundle, at most once per `stateEveryMs` (default 250). */
  readonly onState?: (state: AuditState) => void | Promise<void>;
  readonly stateEveryMs?: number;
}

/**
 * How far an audit has come, at the end of a full bundle: enough to go on from there. What it
 * holds was recomputed from the objects before `bundle` (or, for `stele log fsck --since`,
 * read from tiles a verified checkpoint vouches for); the root recomputed at the end depends
 * on all of it.
 */
export interface AuditState extends UpperTilesState {
  /** The next bundle to check. */
  readonly bundle: number;
  /** The entry hash before it. */
  readonly prior: Uint8Array;
  /** The timestamp of the entry before it ('' when unknown). */
  readonly lastTimestamp: string;
  readonly entriesChecked: number;
  readonly bundlesChecked: number;
  readonly hashTilesChecked: number;
  /** The root recomputed at the pinned size, once the audit has passed it. */
  readonly pinRoot: Uint8Array | null;
}

/**
 * The pinned checkpoint's check: `status` SKIP when it could not be made (a copy older than
 * the pin, no proof to the pin at hand): not a failure, and not counted as passed.
 */
export type PinOutcome = Outcome & { status?: 'SKIP'; reason?: string };

export interface AuditResult {
  readonly ok: boolean;
  readonly origin: string;
  readonly treeSize: number;
  readonly rootHash: string;
  readonly signature: Outcome;
  readonly witnesses: CheckedCheckpoint['witnesses'];
  readonly pin: PinOutcome;
  /** Tree recomputation: entries, bundles and tiles checked before the first failure. */
  readonly tree: Outcome;
  readonly entriesChecked: number;
  readonly bundlesChecked: number;
  readonly hashTilesChecked: number;
  readonly failure?: AuditFailure;
  readonly elapsedMs: number;
}

/** The result of auditing a source without a checkpoint. */
function noCheckpoint(trust: Trust, t0: number): AuditResult {
  const fail = { ok: false, detail: 'no checkpoint' };
  return {
    ok: false,
    origin: trust.origin,
    treeSize: 0,
    rootHash: '',
    signature: fail,
    witnesses: { ok: false, status: 'FAIL', detail: 'no checkpoint', valid: 0, quorum: trust.quorum.text, names: [] },
    pin: fail,
    tree: fail,
    entriesChecked: 0,
    bundlesChecked: 0,
    hashTilesChecked: 0,
    failure: { object: 'checkpoint', message: 'the log has no checkpoint' },
    elapsedMs: performance.now() - t0,
  };
}

export async function auditLog(opts: AuditOptions): Promise<AuditResult> {
  const t0 = performance.now();
  const { source, trust } = opts;
  const noteBytes = opts.note !== undefined ? Buffer.from(opts.note) : await source.get('checkpoint');
  if (!noteBytes) return noCheckpoint(trust, t0);
  const cp = checkCheckpoint({ note: Buffer.from(noteBytes).toString('utf8') }, trust);
  const tree = new TreeAudit(opts, cp.size);
  let failure: AuditFailure | undefined;
  let treeOk: Outcome;
  try {
    treeOk = await tree.run(cp.root);
  } catch (e) {
    if (!(e instanceof AuditStop)) throw e;
    failure = e.failure;
    treeOk = { ok: false, detail: e.failure.message };
  }
  const pin = await pinOutcome(opts, cp, tree.pinRoot);
  if (pin.failure) failure ??= pin.failure;
  const ok = cp.signature.ok && cp.witnesses.ok && pin.outcome.ok && treeOk.ok;
  if (!failure && !cp.signature.ok) failure = { object: 'checkpoint', message: cp.signature.detail };
  return {
    ok,
    origin: cp.origin,
    treeSize: cp.size,
    rootHash: toHex(cp.root),
    signature: cp.signature,
    witnesses: cp.witnesses,
    pin: pin.outcome,
    tree: treeOk,
    entriesChecked: tree.entriesChecked,
    bundlesChecked: tree.bundlesChecked,
    hashTilesChecked: tree.hashTilesChecked,
    ...(failure ? { failure } : {}),
    elapsedMs: performance.now() - t0,
  };
}

/**
 * The tree's recomputation from the bundles: each bundle checked (on worker threads when
 * asked) as its objects arrive, consumed in order (timestamps, level-0 tiles, the upper
 * tiles, the root at the pinned size), then the right edge and the root.
 */
class TreeAudit {
  private readonly upper: UpperTiles;
  private readonly bundles: number;
  private readonly firstBundle: number;
  private readonly checker: BundleChecker | null;
  /** The level-0 row of a partial last bundle. */
  private lastRow0: Uint8Array | null = null;
  private lastTimestamp: string;
  /** Level-0 tiles checked (and, from a start state, every tile checked before it). */
  private level0Checked: number;
  /** Each bundle's check waits for the entry hash before it, as stored. */
  private priorOf: Promise<Uint8Array>;
  private stateAt = performance.now();
  entriesChecked: number;
  bundlesChecked: number;
  /** The root recomputed at the pinned size, once the audit has passed it. */
  pinRoot: Uint8Array | null;

  constructor(
    private readonly opts: AuditOptions,
    private readonly size: number,
  ) {
    const { start } = opts;
    this.upper = new UpperTiles(opts.source, start);
    this.bundles = Math.ceil(size / TILE_WIDTH);
    this.firstBundle = start?.bundle ?? 0;
    // Threads pay off over many bundles (each starts in a fraction of a second).
    this.checker = opts.threads && this.bundles - this.firstBundle >= 32 ? new BundleChecker(opts.threads) : null;
    this.lastTimestamp = start?.lastTimestamp ?? '';
    this.entriesChecked = start?.entriesChecked ?? 0;
    this.bundlesChecked = start?.bundlesChecked ?? 0;
    this.level0Checked = start?.hashTilesChecked ?? 0;
    this.pinRoot = opts.trust.pin.size === 0 ? EMPTY_ROOT : (start?.pinRoot ?? null);
    this.priorOf = Promise.resolve(start?.prior ?? new Uint8Array(32));
  }

  get hashTilesChecked(): number {
    return this.level0Checked + this.upper.checked;
  }

  /** Every bundle, the right edge and the root; an AuditStop at the first object that disagrees. */
  async run(root: Uint8Array): Promise<Outcome> {
    const window = Math.max(this.opts.window ?? 8, 4 * (this.opts.threads ?? 0));
    await orderedPipeline(
      this.firstBundle,
      this.bundles,
      window,
      (n) => this.load(n),
      (n, verdict) => this.consume(n, verdict),
    ).finally(() => this.checker?.close());
    await this.upper.checkRightEdge();
    const recomputed = this.upper.rootAt(this.size, this.lastRow0);
    if (!bytesEqual(recomputed, root)) {
      throw new AuditStop({
        object: 'checkpoint',
        message: `the recomputed root ${toHex(recomputed)} differs from the checkpoint's ${toHex(root)}`,
      });
    }
    const n = this.entriesChecked;
    return {
      ok: true,
      detail: `recomputed ${n} entry hashes (chained), ${n} leaves, ${this.hashTilesChecked} hash tiles and the root ${toHex(recomputed).slice(0, 16)}…`,
    };
  }

  private width(n: number): number {
    return Math.min(TILE_WIDTH, this.size - n * TILE_WIDTH);
  }

  /** Bundle `n`'s check, started as its objects arrive. */
  private load(n: number): Promise<BundleVerdict> {
    const w = this.width(n);
    const objects = Promise.all([
      fetchObject(this.opts.source, 'entries', n, w),
      fetchObject(this.opts.source, 'records', n, w),
      fetchObject(this.opts.source, 0, n, w),
    ]);
    const input = Promise.all([objects, this.priorOf]).then(
      ([[entries, records, tile0], prior]): BundleInput => ({ n, w, entries, records, tile0, prior }),
    );
    // A bundle that is wrong fails its own check first; the next one's start matters no more.
    this.priorOf = objects.then(([entries]) => entries.subarray(Math.max(0, entries.length - 32)));
    this.priorOf.catch(() => undefined);
    const { checker } = this;
    return input.then((i) => (checker ? checker.check(i) : checkBundle(i)));
  }

  /** Bundle `n`'s verdict, in order: its timestamps after the last bundle's, its row pushed up the tree. */
  private async consume(n: number, verdict: BundleVerdict): Promise<void> {
    const w = this.width(n);
    if (verdict.firstTimestamp !== undefined && verdict.firstTimestamp < this.lastTimestamp) {
      const rPath = tilePath({ kind: 'records', index: n, width: w });
      const seq = n * TILE_WIDTH;
      throw new AuditStop({
        object: rPath,
        seq,
        message: `record ${seq} (${rPath} item 0) has a timestamp earlier than entry ${seq - 1}'s`,
      });
    }
    if (verdict.failure || !verdict.row) throw new AuditStop(verdict.failure!);
    const row = verdict.row;
    this.lastTimestamp = verdict.lastTimestamp!;
    this.level0Checked++;
    const pinSize = this.opts.trust.pin.size;
    const inThis = pinSize > n * TILE_WIDTH && pinSize <= n * TILE_WIDTH + w;
    const k = pinSize - n * TILE_WIDTH;
    if (inThis && k < w) this.pinRoot = this.upper.rootAt(pinSize, row.subarray(0, k * 32));
    if (w === TILE_WIDTH) await this.upper.push(1, tileRoot(row));
    else this.lastRow0 = row;
    if (inThis && k === w) this.pinRoot = this.upper.rootAt(pinSize, w === TILE_WIDTH ? null : row);
    this.entriesChecked += w;
    this.bundlesChecked++;
    this.opts.onProgress?.(this.entriesChecked, this.size);
    if (w === TILE_WIDTH) await this.tellState(n + 1, verdict.lastEntryHash!);
  }

  /** The state after a full bundle, to `onState` at most once per `stateEveryMs`. */
  private async tellState(bundle: number, prior: Uint8Array): Promise<void> {
    const { onState, stateEveryMs = 250 } = this.opts;
    if (!onState || performance.now() - this.stateAt < stateEveryMs) return;
    this.stateAt = performance.now();
    await onState({
      bundle,
      prior,
      lastTimestamp: this.lastTimestamp,
      ...this.upper.state(),
      entriesChecked: this.entriesChecked,
      bundlesChecked: this.bundlesChecked,
      hashTilesChecked: this.hashTilesChecked,
      pinRoot: this.pinRoot,
    });
  }
}

/**
 * The pinned checkpoint's check: from the root recomputed at its size, or, for a copy behind
 * it, a proof to it; with the failure to report when it fails.
 */
async function pinOutcome(
  opts: AuditOptions,
  cp: CheckedCheckpoint,
  pinRoot: Uint8Array | null,
): Promise<{ outcome: PinOutcome; failure?: AuditFailure }> {
  const { pin } = opts.trust;
  const size = cp.size;
  const passes = (detail: string) => ({ outcome: { ok: true, detail } });
  const fails = (detail: string, seq: number) => ({
    outcome: { ok: false, detail },
    failure: { object: 'checkpoint', seq, message: detail },
  });
  if (pin.size === 0) return passes('no pinned checkpoint to compare (empty pin)');
  if (pin.size > size) {
    // A copy that lags behind the pin: stale unless a proof to the pin shows otherwise.
    const transport = opts.isTransportError ?? (() => false);
    const older = await checkCopyConsistency(
      pin,
      { size, root: cp.root },
      null,
      opts.proveToPin ?? null,
      transport,
      transport,
    );
    if (!('status' in older)) return older.ok ? { outcome: older } : { ...fails(older.detail, size), outcome: older };
    if (older.status === 'SKIP')
      return {
        outcome: { ok: true, status: 'SKIP', detail: older.detail, ...(older.reason ? { reason: older.reason } : {}) },
      };
    return older.status === 'PASS' ? passes(older.detail) : fails(older.detail, size);
  }
  // Not a failure the audit names: the tree's own failure stopped it before the pin.
  if (pinRoot === null)
    return { outcome: { ok: false, detail: `not checked: the audit stopped before size ${pin.size}` } };
  if (!bytesEqual(pinRoot, pin.root))
    return fails(
      `the recomputed root at the pinned size ${pin.size} differs from the pinned root: the log forked`,
      pin.size,
    );
  return passes(`the recomputed root at the pinned size ${pin.size} equals the pinned root`);
}

/** Worker threads checking bundles (src/read/bundle-check-worker.ts), sent to in turn. */
class BundleChecker {
  private readonly threads: RequestThread<BundleInput, BundleVerdict>[];
  private next = 0;

  constructor(count: number) {
    this.threads = Array.from(
      { length: count },
      () =>
        new RequestThread<BundleInput, BundleVerdict>(
          () => startModuleWorker(import.meta.url, 'bundle-check-worker'),
          'audit thread',
        ),
    );
  }

  check(input: BundleInput): Promise<BundleVerdict> {
    return this.threads[this.next++ % this.threads.length]!.request(input);
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.close()));
  }
}
