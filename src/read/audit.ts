// Full offline audit of a log copy (a mirror directory or a tile URL): recomputes, from
// nothing but the records, every entry hash along the chain, every leaf, every hash tile at
// every level and the root, and checks the checkpoint's signature and cosignatures and its
// consistency with the pinned checkpoint. It streams bundle by bundle (bounded memory) and
// stops at the first object that disagrees, naming it.
import { EMPTY_ROOT, bytesEqual, toHex } from '../core/hash.js';
import { treeHashSync } from '../core/merkle.js';
import type { ObjectReader } from '../store/store.js';
import { HashTile, TILE_WIDTH, TileFormatError, tilePath, tileRoot } from '../core/tiles.js';
import { RequestThread, startModuleWorker } from '../store/threads.js';
import {
  type AuditFailure,
  type BundleInput,
  type BundleVerdict,
  checkBundle,
  firstDifference,
} from './bundle-check.js';
import { TileSet } from './tile-set.js';
import { MissingObjectError, readTileBytes } from './tilestore.js';
import { orderedPipeline } from './pipeline.js';
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
export interface AuditState {
  /** The next bundle to check. */
  readonly bundle: number;
  /** The entry hash before it. */
  readonly prior: Uint8Array;
  /** The timestamp of the entry before it ('' when unknown). */
  readonly lastTimestamp: string;
  /** Per level ≥ 1: the hashes of the tile being filled, and that tile's index. */
  readonly pending: readonly (readonly Uint8Array[])[];
  readonly tileIndex: readonly number[];
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

class AuditStop extends Error {
  constructor(readonly failure: AuditFailure) {
    super(failure.message);
  }
}

async function fetchObject(
  source: ObjectReader,
  kind: number | 'entries' | 'records',
  index: number,
  width: number,
): Promise<Uint8Array> {
  try {
    return await readTileBytes(source, kind, index, width);
  } catch (e) {
    if (e instanceof MissingObjectError)
      throw new AuditStop({
        object: tilePath({ kind, index, width }),
        message: `${tilePath({ kind, index, width })} is missing`,
      });
    // A stored object that cannot be read as one (a compressed record bundle that does not
    // decompress within bounds) is a finding about that object, not a failure of the check.
    if (e instanceof TileFormatError)
      throw new AuditStop({ object: tilePath({ kind, index, width }), message: e.message });
    throw e;
  }
}

export async function auditLog(opts: AuditOptions): Promise<AuditResult> {
  const t0 = performance.now();
  const { source, trust } = opts;
  const noteBytes = opts.note !== undefined ? Buffer.from(opts.note) : await source.get('checkpoint');
  if (!noteBytes) {
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
  const cp = checkCheckpoint({ note: Buffer.from(noteBytes).toString('utf8') }, trust);
  const size = cp.size;
  const bundles = Math.ceil(size / TILE_WIDTH);

  // Recomputed hashes per level not yet grouped into a full tile (< 256 each).
  const start = opts.start;
  const pending: Uint8Array[][] = start ? start.pending.map((l) => [...l]) : [[]];
  const tileIndex: number[] = start ? [...start.tileIndex] : [0];
  let lastRow0: Uint8Array | null = null;
  let lastTimestamp = start?.lastTimestamp ?? '';
  let entriesChecked = start?.entriesChecked ?? 0;
  let bundlesChecked = start?.bundlesChecked ?? 0;
  let hashTilesChecked = start?.hashTilesChecked ?? 0;
  let pinRoot: Uint8Array | null = trust.pin.size === 0 ? EMPTY_ROOT : (start?.pinRoot ?? null);
  const firstBundle = start?.bundle ?? 0;

  const rootFrom = (treeSize: number, row0: Uint8Array | null): Uint8Array => {
    if (treeSize === 0) return EMPTY_ROOT;
    const tiles = new TileSet();
    if (row0 && row0.length > 0) tiles.add(new HashTile(0, Math.floor(treeSize / TILE_WIDTH), row0));
    for (let l = 1; l < pending.length; l++) {
      if (pending[l]!.length > 0) tiles.add(new HashTile(l, tileIndex[l]!, Buffer.concat(pending[l]!)));
    }
    return treeHashSync(treeSize, tiles.lookup(treeSize));
  };

  /** Adds a recomputed hash at tile level `level`; checks each upper tile as it completes. */
  const pushUp = async (level: number, h: Uint8Array): Promise<void> => {
    pending[level] ??= [];
    tileIndex[level] ??= 0;
    pending[level]!.push(h);
    if (pending[level]!.length < TILE_WIDTH) return;
    const index = tileIndex[level]!;
    const row = Buffer.concat(pending[level]!);
    const stored = await fetchObject(source, level, index, TILE_WIDTH);
    const path = tilePath({ kind: level, index, width: TILE_WIDTH });
    if (stored.length !== row.length || !bytesEqual(stored, row)) {
      const j = firstDifference(stored, row);
      const span = TILE_WIDTH ** level;
      const first = (index * TILE_WIDTH + j) * span;
      throw new AuditStop({
        object: path,
        seq: first,
        message:
          stored.length !== row.length
            ? `${path} has ${stored.length} bytes, not ${row.length}`
            : `${path} hash ${j} (leaves ${first}–${first + span - 1}) differs from the hash recomputed from the level-${level - 1} tiles`,
      });
    }
    hashTilesChecked++;
    pending[level] = [];
    tileIndex[level] = index + 1;
    await pushUp(level + 1, tileRoot(row));
  };

  // Threads pay off over many bundles (each starts in a fraction of a second).
  const checker = opts.threads && bundles - firstBundle >= 32 ? new BundleChecker(opts.threads) : null;
  /** Each bundle's check, started as its objects arrive; the chain's start is the entry hash before it, as stored. */
  let priorOf: Promise<Uint8Array> = Promise.resolve(start?.prior ?? new Uint8Array(32));
  const load = (n: number): Promise<BundleVerdict> => {
    const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    const objects = Promise.all([
      fetchObject(source, 'entries', n, w),
      fetchObject(source, 'records', n, w),
      fetchObject(source, 0, n, w),
    ]);
    const input = Promise.all([objects, priorOf]).then(
      ([[entries, records, tile0], prior]): BundleInput => ({ n, w, entries, records, tile0, prior }),
    );
    // A bundle that is wrong fails its own check first; the next one's start matters no more.
    priorOf = objects.then(([entries]) => entries.subarray(Math.max(0, entries.length - 32)));
    priorOf.catch(() => undefined);
    return input.then((i) => (checker ? checker.check(i) : checkBundle(i)));
  };

  let stateAt = performance.now();
  const consume = async (n: number, verdict: BundleVerdict) => {
    const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    if (verdict.firstTimestamp !== undefined && verdict.firstTimestamp < lastTimestamp) {
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
    lastTimestamp = verdict.lastTimestamp!;
    hashTilesChecked++;
    const inThis = trust.pin.size > n * TILE_WIDTH && trust.pin.size <= n * TILE_WIDTH + w;
    const k = trust.pin.size - n * TILE_WIDTH;
    if (inThis && k < w) pinRoot = rootFrom(trust.pin.size, row.subarray(0, k * 32));
    if (w === TILE_WIDTH) await pushUp(1, tileRoot(row));
    else lastRow0 = row;
    if (inThis && k === w) pinRoot = rootFrom(trust.pin.size, w === TILE_WIDTH ? null : row);
    entriesChecked += w;
    bundlesChecked++;
    opts.onProgress?.(entriesChecked, size);
    if (opts.onState && w === TILE_WIDTH && performance.now() - stateAt >= (opts.stateEveryMs ?? 250)) {
      stateAt = performance.now();
      await opts.onState({
        bundle: n + 1,
        prior: verdict.lastEntryHash!,
        lastTimestamp,
        pending: pending.map((l) => [...l]),
        tileIndex: [...tileIndex],
        entriesChecked,
        bundlesChecked,
        hashTilesChecked,
        pinRoot,
      });
    }
  };

  let failure: AuditFailure | undefined;
  let treeOk: Outcome;
  try {
    const window = Math.max(opts.window ?? 8, 4 * (opts.threads ?? 0));
    await orderedPipeline(firstBundle, bundles, window, load, consume).finally(() => checker?.close());
    // The right edge: every partial upper tile, then the root.
    for (let l = 1; l < pending.length; l++) {
      const w = pending[l]!.length;
      if (w === 0) continue;
      const index = tileIndex[l]!;
      const path = tilePath({ kind: l, index, width: w });
      const stored = await fetchObject(source, l, index, w);
      const row = Buffer.concat(pending[l]!);
      if (!bytesEqual(stored.subarray(0, row.length), row) || stored.length < row.length) {
        const j = firstDifference(stored, row);
        throw new AuditStop({
          object: path,
          seq: (index * TILE_WIDTH + j) * TILE_WIDTH ** l,
          message: `${path} hash ${j} differs from the hash recomputed from the level-${l - 1} tiles`,
        });
      }
      hashTilesChecked++;
    }
    const root = rootFrom(size, lastRow0);
    if (!bytesEqual(root, cp.root)) {
      throw new AuditStop({
        object: 'checkpoint',
        message: `the recomputed root ${toHex(root)} differs from the checkpoint's ${toHex(cp.root)}`,
      });
    }
    treeOk = {
      ok: true,
      detail: `recomputed ${entriesChecked} entry hashes (chained), ${entriesChecked} leaves, ${hashTilesChecked} hash tiles and the root ${toHex(root).slice(0, 16)}…`,
    };
  } catch (e) {
    if (!(e instanceof AuditStop)) throw e;
    failure = e.failure;
    treeOk = { ok: false, detail: e.failure.message };
  }

  let pin: PinOutcome;
  if (trust.pin.size === 0) pin = { ok: true, detail: 'no pinned checkpoint to compare (empty pin)' };
  else if (trust.pin.size > size) {
    // A copy that lags behind the pin: stale unless a proof to the pin shows otherwise.
    const transport = opts.isTransportError ?? (() => false);
    const older = await checkCopyConsistency(
      trust.pin,
      { size, root: cp.root },
      null,
      opts.proveToPin ?? null,
      transport,
      transport,
    );
    pin =
      'status' in older
        ? older.status === 'SKIP'
          ? { ok: true, status: 'SKIP', detail: older.detail, ...(older.reason ? { reason: older.reason } : {}) }
          : { ok: older.status === 'PASS', detail: older.detail }
        : older;
    if (!pin.ok) failure ??= { object: 'checkpoint', seq: size, message: pin.detail };
  } else if (pinRoot === null)
    pin = { ok: false, detail: `not checked: the audit stopped before size ${trust.pin.size}` };
  else if (!bytesEqual(pinRoot, trust.pin.root)) {
    pin = {
      ok: false,
      detail: `the recomputed root at the pinned size ${trust.pin.size} differs from the pinned root: the log forked`,
    };
    failure ??= { object: 'checkpoint', seq: trust.pin.size, message: pin.detail };
  } else pin = { ok: true, detail: `the recomputed root at the pinned size ${trust.pin.size} equals the pinned root` };

  const ok = cp.signature.ok && cp.witnesses.ok && pin.ok && treeOk.ok;
  if (!failure && !cp.signature.ok) failure = { object: 'checkpoint', message: cp.signature.detail };
  return {
    ok,
    origin: cp.origin,
    treeSize: size,
    rootHash: toHex(cp.root),
    signature: cp.signature,
    witnesses: cp.witnesses,
    pin,
    tree: treeOk,
    entriesChecked,
    bundlesChecked,
    hashTilesChecked,
    ...(failure ? { failure } : {}),
    elapsedMs: performance.now() - t0,
  };
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
