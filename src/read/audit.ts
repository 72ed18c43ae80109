// Full offline audit of a log copy (a mirror directory or a tile URL): recomputes, from
// nothing but the records, every entry hash along the chain, every leaf, every hash tile at
// every level and the root, and checks the checkpoint's signature and cosignatures and its
// consistency with the pinned checkpoint. It streams bundle by bundle (bounded memory) and
// stops at the first object that disagrees, naming it.
import canonicalizeCjs from 'canonicalize';
import { artifactId, entryHash } from '../core/entry.js';
import { EMPTY_ROOT, bytesEqual, leafHash, toHex } from '../core/hash.js';
import { treeHashSync } from '../core/merkle.js';
import type { ObjectReader } from '../store/store.js';
import { HashTile, TILE_WIDTH, TileFormatError, tilePath, tileRoot } from '../core/tiles.js';
import { decodeBundle } from '../core/bundle.js';
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

const canonicalize = canonicalizeCjs as unknown as (value: unknown) => string | undefined;

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
}

/**
 * The pinned checkpoint's check: `status` SKIP when it could not be made (a copy older than
 * the pin, no proof to the pin at hand): not a failure, and not counted as passed.
 */
export type PinOutcome = Outcome & { status?: 'SKIP'; reason?: string };

export interface AuditFailure {
  /** The first object found wrong (tile/…, or `checkpoint`). */
  readonly object: string;
  /** The leaf index concerned, when one is. */
  readonly seq?: number;
  readonly message: string;
}

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

const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HEX64 = /^[0-9a-f]{64}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Problems with one record beyond its hash: shape, canonical form, artifact id. */
function recordProblem(bytes: Uint8Array): { problem?: string; timestamp?: string } {
  let text: string;
  let value: Record<string, unknown>;
  try {
    text = utf8.decode(bytes);
    value = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { problem: 'is not UTF-8 JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { problem: 'is not a JSON object' };
  if (value.v !== 1) return { problem: 'has no "v": 1' };
  for (const k of ['type', 'result', 'digest', 'timestamp'] as const)
    if (typeof value[k] !== 'string') return { problem: `has no string "${k}"` };
  if (!HEX64.test(value.digest as string)) return { problem: 'has a digest that is not 64 lowercase hex' };
  if (!TS.test(value.timestamp as string))
    return { problem: 'has a timestamp that is not ISO 8601 UTC with milliseconds' };
  if ('id' in value || 'proof' in value)
    return { problem: 'contains "id" or "proof", which are not part of the canonical entry' };
  if (value.artifact !== undefined) {
    const scope = typeof value.scope === 'string' ? value.scope : '';
    if (typeof value.artifact !== 'string' || value.artifactId !== artifactId(value.artifact, scope))
      return { problem: 'has an artifactId that does not match its artifact and scope' };
  }
  if (canonicalize(value) !== text) return { problem: 'is not in RFC 8785 canonical form' };
  return { timestamp: value.timestamp as string };
}

function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length) / 32;
  for (let j = 0; j < n; j++)
    if (!bytesEqual(a.subarray(32 * j, 32 * j + 32), b.subarray(32 * j, 32 * j + 32))) return j;
  return n;
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
  const pending: Uint8Array[][] = [[]];
  const tileIndex: number[] = [0];
  let lastRow0: Uint8Array | null = null;
  let prior: Uint8Array = new Uint8Array(32);
  let lastTimestamp = '';
  let entriesChecked = 0;
  let bundlesChecked = 0;
  let hashTilesChecked = 0;
  let pinRoot: Uint8Array | null = trust.pin.size === 0 ? EMPTY_ROOT : null;

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

  const load = (n: number) => {
    const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    return Promise.all([
      fetchObject(source, 'entries', n, w),
      fetchObject(source, 'records', n, w),
      fetchObject(source, 0, n, w),
    ]);
  };

  const consume = async (n: number, [entriesData, recordsData, tile0]: Uint8Array[]) => {
    const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
    const ePath = tilePath({ kind: 'entries', index: n, width: w });
    const rPath = tilePath({ kind: 'records', index: n, width: w });
    const tPath = tilePath({ kind: 0, index: n, width: w });
    const decode = (data: Uint8Array, path: string) => {
      try {
        const items = decodeBundle(data, path);
        if (items.length < w)
          throw new AuditStop({
            object: path,
            seq: n * TILE_WIDTH + items.length,
            message: `${path} has ${items.length} items, not ${w}`,
          });
        return items.slice(0, w);
      } catch (e) {
        if (e instanceof TileFormatError)
          throw new AuditStop({ object: path, seq: n * TILE_WIDTH, message: e.message });
        throw e;
      }
    };
    const entries = decode(entriesData!, ePath);
    const records = decode(recordsData!, rPath);
    const stored0 = tile0!;
    if (tile0!.length !== w * 32) {
      throw new AuditStop({
        object: tPath,
        seq: n * TILE_WIDTH,
        message: `${tPath} has ${tile0!.length} bytes, not ${w * 32}`,
      });
    }
    const row = Buffer.allocUnsafe(w * 32);
    for (let i = 0; i < w; i++) {
      const seq = n * TILE_WIDTH + i;
      const record = records[i]!;
      const eh = entryHash(seq, record, prior);
      const leaf = leafHash(eh);
      if (!bytesEqual(eh, entries[i]!)) {
        const tileLeaf = stored0.subarray(32 * i, 32 * i + 32);
        if (bytesEqual(leaf, tileLeaf)) {
          throw new AuditStop({
            object: ePath,
            seq,
            message: `${ePath} item ${i} (entry ${seq}) is wrong: the record chain and the hash tile agree on a different entry hash`,
          });
        }
        if (bytesEqual(leafHash(entries[i]!), tileLeaf)) {
          throw new AuditStop({
            object: rPath,
            seq,
            message: `record ${seq} (${rPath} item ${i}) does not hash to its entry hash: the record was altered or the chain is broken`,
          });
        }
        throw new AuditStop({
          object: rPath,
          seq,
          message: `entry ${seq}: the record (${rPath}), the entry hash (${ePath}) and the leaf (${tPath}) all disagree`,
        });
      }
      const { problem, timestamp } = recordProblem(record);
      if (problem)
        throw new AuditStop({ object: rPath, seq, message: `record ${seq} (${rPath} item ${i}) ${problem}` });
      if (timestamp! < lastTimestamp)
        throw new AuditStop({
          object: rPath,
          seq,
          message: `record ${seq} (${rPath} item ${i}) has a timestamp earlier than entry ${seq - 1}'s`,
        });
      lastTimestamp = timestamp!;
      row.set(leaf, 32 * i);
      prior = eh;
    }
    if (!bytesEqual(row, stored0)) {
      const j = firstDifference(stored0, row);
      throw new AuditStop({
        object: tPath,
        seq: n * TILE_WIDTH + j,
        message: `${tPath} hash ${j} (leaf ${n * TILE_WIDTH + j}) differs from the leaf recomputed from entry ${n * TILE_WIDTH + j}`,
      });
    }
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
  };

  let failure: AuditFailure | undefined;
  let treeOk: Outcome;
  try {
    await orderedPipeline(0, bundles, opts.window ?? 8, load, consume);
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
