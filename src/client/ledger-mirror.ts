// `stele ledger mirror`: copies a log's checkpoint, hash tiles and bundles into a local
// directory, incrementally and resumably, keeping an object only after verifying it against
// the signed checkpoint:
//   1. the checkpoint must be signed by the pinned key (and meet the witness threshold);
//   2. the right-edge partial tiles must hash to its root;
//   3. every full hash tile must hash to the entry its parent tile (already verified) holds;
//   4. every entry bundle item must be the preimage of its leaf, every record must hash
//      (with the previous entry hash) to its entry hash;
//   5. the previous mirror checkpoint and the pinned one must be prefixes of the new tree
//      (their roots recomputed from the new, verified tiles) before anything is written.
// The checkpoint is written last, so an interrupted run leaves a consistent mirror plus
// verified tiles that the next run reuses instead of downloading again.
import { bytesEqual, toHex } from '../core/hash.js';
import { treeHashSync } from '../core/merkle.js';
import { LogReader } from '../read/reader.js';
import type { ObjectReader } from '../store/store.js';
import { HashTile, TILE_WIDTH, type TileKind, levelHashCount, tilePath } from '../core/tiles.js';
import { TileSet } from '../read/tile-set.js';
import { follow } from '../monitor/follow.js';
import { DirObjectReader } from './objects.js';
import { ClientError, VerificationError } from './errors.js';
import { type CheckedCheckpoint, type Outcome, type Trust, checkCheckpoint } from './rules.js';
import { makeDataDir } from '../store/files.js';
import { Dest, type MirrorOptions, TileCopy, VerifiedTiles, readSourceObject } from './mirror-copy.js';

export type { MirrorOptions } from './mirror-copy.js';

export interface MirrorResult {
  readonly status: 'updated' | 'up-to-date' | 'source-behind';
  readonly origin: string;
  readonly treeSize: number;
  readonly rootHash: string;
  readonly previousSize: number | null;
  readonly signature: Outcome;
  readonly witnesses: CheckedCheckpoint['witnesses'];
  readonly consistency: Outcome;
  readonly pin: Outcome;
  /** Objects downloaded and verified. */
  readonly fetched: number;
  /** Objects already in the mirror, verified again or covered by the previous checkpoint. */
  readonly reused: number;
  readonly elapsedMs: number;
}

export async function mirrorLog(opts: MirrorOptions): Promise<MirrorResult> {
  const t0 = performance.now();
  const { source, sourceName, trust } = opts;
  await makeDataDir(opts.dest, { what: 'the mirror directory' });
  const dest = new Dest(opts.dest);

  // 1. The source's checkpoint, verified; the mirror's own previous one, if it verifies.
  const { noteBytes, cp } = await sourceCheckpoint(source, sourceName, trust);
  const size = cp.size;
  const old = await mirrorCheckpoint(dest, trust);
  const base = {
    origin: cp.origin,
    treeSize: size,
    rootHash: toHex(cp.root),
    previousSize: old?.size ?? null,
    signature: cp.signature,
    witnesses: cp.witnesses,
  };
  if (trust.pin.size > size) {
    throw new VerificationError(
      `checkpoint from ${sourceName} is older than your pin (${size} < ${trust.pin.size}): mirror from a source at least as new as the pin`,
    );
  }
  if (old && size < old.size) {
    const ok = await sourceBehind(opts, cp, old);
    return {
      ...base,
      status: 'source-behind',
      consistency: ok,
      pin: ok,
      fetched: 0,
      reused: 0,
      elapsedMs: performance.now() - t0,
    };
  }

  // 2. Right-edge partial tiles, checked against the root.
  const levels: number[] = [];
  for (let level = 0; levelHashCount(level, size) > 0; level++) levels.push(level);
  const partials = await rightEdge(source, sourceName, cp, levels);
  const vt = new VerifiedTiles(source, sourceName, dest, size, partials);
  // 5 (before any write). Previous mirror and pin must be prefixes of the new tree.
  const { consistency, pin } = await checkPrefixes(vt, old, trust, size, sourceName);

  // 3 and 4. Full hash tiles of levels ≥ 1 top down, then level 0 with the bundles in order.
  const oldSize = opts.reverify ? 0 : (old?.size ?? 0);
  const copy = new TileCopy(opts, dest, vt, partials, size, oldSize, levels);
  await copy.upperTiles();
  await copy.bundles();

  // The new checkpoint last, then the partial tiles it no longer needs.
  const unchanged = old !== null && old.size === size && bytesEqual(old.root, cp.root);
  await dest.write('checkpoint', noteBytes);
  await prunePartials(dest, levels, size, old?.size);
  return {
    ...base,
    status: unchanged ? 'up-to-date' : 'updated',
    consistency,
    pin,
    fetched: vt.fetched + copy.bundleFetches + partials.size,
    reused: vt.reused + copy.bundleReuse,
    elapsedMs: performance.now() - t0,
  };
}

/** The source's checkpoint, which must be signed by the pinned key and meet the witness quorum. */
async function sourceCheckpoint(source: ObjectReader, sourceName: string, trust: Trust) {
  const noteBytes = await source.get('checkpoint');
  if (!noteBytes) throw new ClientError('io', `${sourceName} has no checkpoint`);
  const note = Buffer.from(noteBytes).toString('utf8');
  const cp = checkCheckpoint({ note }, trust);
  if (!cp.signature.ok) throw new VerificationError(`checkpoint from ${sourceName}: ${cp.signature.detail}`);
  if (!cp.witnesses.ok) throw new VerificationError(`checkpoint from ${sourceName}: ${cp.witnesses.detail}`);
  return { noteBytes, cp };
}

/** The mirror's previous checkpoint, if it has one that verifies. */
async function mirrorCheckpoint(dest: Dest, trust: Trust): Promise<{ size: number; root: Uint8Array } | null> {
  const oldNoteBytes = await dest.read('checkpoint');
  if (!oldNoteBytes) return null;
  const oc = checkCheckpoint({ note: Buffer.from(oldNoteBytes).toString('utf8') }, trust);
  return oc.signature.ok ? { size: oc.size, root: oc.root } : null;
}

/** A source behind the mirror is fine if its tree is a prefix of the mirror's; else the log forked. */
async function sourceBehind(
  opts: MirrorOptions,
  cp: CheckedCheckpoint,
  old: { size: number; root: Uint8Array },
): Promise<Outcome> {
  const root = await new LogReader(new DirObjectReader(opts.dest), { unverified: true }).treeHash(cp.size, old.size);
  if (!bytesEqual(root, cp.root))
    throw new VerificationError(
      `checkpoint from ${opts.sourceName} (size ${cp.size}) is not a prefix of the mirror's tree (size ${old.size}): the log forked`,
    );
  return {
    ok: true,
    detail: `the source (size ${cp.size}) is behind the mirror (size ${old.size}) and consistent with it`,
  };
}

/** The right-edge partial tiles of every level, which together must hash to the checkpoint's root. */
async function rightEdge(
  source: ObjectReader,
  sourceName: string,
  cp: CheckedCheckpoint,
  levels: readonly number[],
): Promise<Map<number, HashTile>> {
  const size = cp.size;
  const partials = new Map<number, HashTile>();
  await Promise.all(
    levels.map(async (level) => {
      const count = levelHashCount(level, size);
      const w = count % TILE_WIDTH;
      if (w === 0) return;
      const index = Math.floor(count / TILE_WIDTH);
      const data = await readSourceObject(source, sourceName, level, index, w);
      if (data.length !== w * 32)
        throw new VerificationError(
          `${tilePath({ kind: level, index, width: w })} from ${sourceName} has ${data.length} bytes, not ${w * 32}`,
        );
      partials.set(level, new HashTile(level, index, data));
    }),
  );
  if (size > 0) {
    const root = treeHashSync(size, new TileSet(partials.values()).lookup(size));
    if (!bytesEqual(root, cp.root)) {
      throw new VerificationError(
        `the right-edge tiles from ${sourceName} (${[...partials.values()].map((t) => t.path).join(', ')}) do not hash to the checkpoint root: tampered tile`,
      );
    }
  }
  return partials;
}

/** The mirror's previous checkpoint and the pin must both be prefixes of the new tree. */
async function checkPrefixes(
  vt: VerifiedTiles,
  old: { size: number; root: Uint8Array } | null,
  trust: Trust,
  size: number,
  sourceName: string,
): Promise<{ consistency: Outcome; pin: Outcome }> {
  let consistency: Outcome = { ok: true, detail: 'no previous mirror checkpoint' };
  if (old && old.size > 0) {
    if (!bytesEqual(await vt.rootAt(old.size), old.root)) {
      throw new VerificationError(
        `the new checkpoint (size ${size}) is not consistent with the mirror's previous one (size ${old.size}): the log forked`,
      );
    }
    consistency = {
      ok: true,
      detail: `previous mirror size ${old.size} → ${size}: old root recomputed from the new verified tiles`,
    };
  }
  let pin: Outcome = { ok: true, detail: `the pinned tree is empty` };
  if (trust.pin.size > 0) {
    if (!bytesEqual(await vt.rootAt(trust.pin.size), trust.pin.root)) {
      throw new VerificationError(
        `the checkpoint from ${sourceName} (size ${size}) is not consistent with the pinned checkpoint (size ${trust.pin.size}): the log forked`,
      );
    }
    pin = {
      ok: true,
      detail: `pinned size ${trust.pin.size} → ${size}: pinned root recomputed from the verified tiles`,
    };
  }
  return { consistency, pin };
}

/** Deletes the partial tiles the new checkpoint no longer needs (at its right edge and the old one's). */
async function prunePartials(dest: Dest, levels: readonly number[], size: number, oldSize: number | undefined) {
  const kinds: TileKind[] = [...levels, 'entries', 'records'];
  for (const kind of kinds) {
    const level = typeof kind === 'number' ? kind : 0;
    const count = levelHashCount(level, size);
    const keep = count % TILE_WIDTH;
    const edges = new Set([Math.floor(count / TILE_WIDTH)]);
    if (oldSize !== undefined) edges.add(Math.floor(levelHashCount(level, oldSize) / TILE_WIDTH));
    for (const index of edges)
      await dest.prunePartials(kind, index, index === Math.floor(count / TILE_WIDTH) && keep > 0 ? keep : null);
  }
}

export interface FollowMirrorOptions extends MirrorOptions {
  /** Polling interval after a step that moved; doubles while nothing changes, up to maxInterval. */
  readonly interval: number;
  readonly maxInterval: number;
  readonly signal?: AbortSignal;
  /** Each completed step (an update, or nothing new). */
  readonly onStep?: (r: MirrorResult) => void;
  /** A step that failed for a reason that may pass (network, disk): retried after the backoff. */
  readonly onError?: (e: Error) => void;
}

/**
 * Keeps the mirror current (`ledger mirror --follow`): mirrorLog each step, on the monitor's
 * follow loop, so the mirror is at most one step behind the source. Returns when `signal`
 * aborts; throws the VerificationError that stopped it (a fork, a tampered object).
 */
export async function followMirror(opts: FollowMirrorOptions): Promise<void> {
  let fatal: VerificationError | undefined;
  await follow({
    interval: opts.interval,
    maxInterval: opts.maxInterval,
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.onError ? { onError: opts.onError } : {}),
    step: async () => {
      let r: MirrorResult;
      try {
        r = await mirrorLog(opts);
      } catch (e) {
        if (!(e instanceof VerificationError)) throw e;
        fatal = e;
        return 'stop';
      }
      opts.onStep?.(r);
      return r.status === 'updated' ? 'moved' : 'idle';
    },
  });
  if (fatal) throw fatal;
}
