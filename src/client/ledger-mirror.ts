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
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { entryHash } from '../core/entry.js';
import { bytesEqual, leafHash, toHex } from '../core/hash.js';
import { treeHash, treeHashSync } from '../core/merkle.js';
import { LogReader } from '../read/reader.js';
import type { ObjectReader } from '../store/store.js';
import {
  HashTile,
  TILE_WIDTH,
  TileHashReader,
  type TileKind,
  levelHashCount,
  tilePath,
  tileRoot,
  tileWidthAt,
} from '../core/tiles.js';
import { decodeBundle, encodeBundle } from '../core/bundle.js';
import { TileSet } from '../read/tile-set.js';
import { MissingObjectError, readTileBytes } from '../read/tilestore.js';
import { follow } from '../monitor/follow.js';
import { DirObjectReader } from './objects.js';
import { ClientError, VerificationError } from './errors.js';
import { orderedPipeline, parallelRange } from '../read/pipeline.js';
import { type CheckedCheckpoint, type Outcome, type Trust, checkCheckpoint } from './rules.js';
import { fsReason, makeDataDir } from '../store/files.js';
import { contentOf, storedForm } from '../store/stored-form.js';

export interface MirrorOptions {
  readonly source: ObjectReader;
  /** How to name the source in messages. */
  readonly sourceName: string;
  readonly dest: string;
  readonly trust: Trust;
  /** Parallel fetches (default 16). */
  readonly concurrency?: number;
  /** Re-verify objects a previous run already verified (default: only new ones). */
  readonly reverify?: boolean;
  readonly onProgress?: (done: number, total: number) => void;
}

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

const isMissing = (e: unknown) => ['ENOENT', 'ENOTDIR'].includes((e as NodeJS.ErrnoException)?.code ?? '');

class Dest {
  private readonly dirs = new Set<string>();
  constructor(readonly root: string) {}

  /** An object's content (a record bundle decompressed); null if absent, or stored compressed but broken (fetched again). */
  async read(key: string): Promise<Uint8Array | null> {
    let stored: Uint8Array;
    try {
      stored = new Uint8Array(await fs.readFile(join(this.root, key)));
    } catch (e) {
      if (isMissing(e)) return null;
      throw new ClientError('io', `cannot read ${join(this.root, key)}: ${fsReason(e)}`);
    }
    return contentOf(key, stored).catch(() => null);
  }

  /** Writes an object as the log stores it: a record bundle compressed. */
  async write(key: string, content: Uint8Array): Promise<void> {
    const path = join(this.root, key);
    const data = await storedForm(key, content);
    try {
      const dir = dirname(path);
      if (!this.dirs.has(dir)) {
        await fs.mkdir(dir, { recursive: true });
        this.dirs.add(dir);
      }
      const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
      await fs.writeFile(tmp, data);
      await fs.rename(tmp, path);
    } catch (e) {
      throw new ClientError('io', `cannot write ${path}: ${fsReason(e)}`);
    }
  }

  /** Removes partial versions of (kind, index) other than `keepWidth`. */
  async prunePartials(kind: TileKind, index: number, keepWidth: number | null): Promise<void> {
    const dir = join(this.root, `${tilePath({ kind, index, width: TILE_WIDTH })}.p`);
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch {
      return;
    }
    for (const name of names)
      if (name !== String(keepWidth)) await fs.rm(join(dir, name), { force: true }).catch(() => undefined);
    await fs.rmdir(dir).catch(() => undefined);
  }
}

/** Hash tiles of the new tree, each verified against the checkpoint before it is handed out. */
class VerifiedTiles {
  private readonly cache = new LRUCache<string, { tile: HashTile; local: boolean }>({ max: 512 });
  private readonly inflight = new Map<string, Promise<{ tile: HashTile; local: boolean }>>();
  fetched = 0;
  reused = 0;

  constructor(
    private readonly source: ObjectReader,
    private readonly sourceName: string,
    private readonly dest: Dest,
    readonly size: number,
    private readonly partials: Map<number, HashTile>,
  ) {}

  async tile(level: number, index: number): Promise<HashTile> {
    const w = tileWidthAt(level, index, this.size);
    if (w === 0) throw new RangeError(`tile ${level}/${index} is beyond tree size ${this.size}`);
    if (w < TILE_WIDTH) return this.partials.get(level)!;
    return (await this.full(level, index)).tile;
  }

  full(level: number, index: number): Promise<{ tile: HashTile; local: boolean }> {
    const key = `${level}/${index}`;
    const hit = this.cache.get(key);
    if (hit) return Promise.resolve(hit);
    let p = this.inflight.get(key);
    if (!p) {
      p = this.loadFull(level, index).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  private async loadFull(level: number, index: number): Promise<{ tile: HashTile; local: boolean }> {
    const parent = await this.tile(level + 1, Math.floor(index / TILE_WIDTH));
    const expected = parent.hashAt(0, index % TILE_WIDTH);
    const path = tilePath({ kind: level, index, width: TILE_WIDTH });
    const local = await this.dest.read(path);
    let result: { tile: HashTile; local: boolean };
    if (local && local.length === TILE_WIDTH * 32 && bytesEqual(tileRoot(local), expected)) {
      this.reused++;
      result = { tile: new HashTile(level, index, local), local: true };
    } else {
      const data = await this.source.get(path);
      if (!data) throw new ClientError('io', `${path} is missing at ${this.sourceName}`);
      if (data.length !== TILE_WIDTH * 32 || !bytesEqual(tileRoot(data), expected)) {
        throw new VerificationError(
          `${path} from ${this.sourceName} does not match the checkpoint (its hash is not the one in ${parent.path} at position ${index % TILE_WIDTH}): tampered tile`,
        );
      }
      this.fetched++;
      result = { tile: new HashTile(level, index, data), local: false };
    }
    // Level-0 tiles are read once (with their bundles); only parents are worth keeping.
    if (level > 0) this.cache.set(`${level}/${index}`, result);
    return result;
  }

  /** Root of the new tree's prefix of `size` leaves, computed only from verified tiles. */
  rootAt(size: number): Promise<Uint8Array> {
    return treeHash(
      size,
      new TileHashReader(size, async (level, index, width) => {
        const t = await this.tile(level, index);
        return new HashTile(level, index, t.data.subarray(0, width * 32));
      }),
    );
  }
}

async function readSourceObject(
  source: ObjectReader,
  name: string,
  kind: TileKind,
  index: number,
  width: number,
): Promise<Uint8Array> {
  try {
    return await readTileBytes(source, kind, index, width);
  } catch (e) {
    if (e instanceof MissingObjectError)
      throw new ClientError('io', `${tilePath({ kind, index, width })} is missing at ${name}`);
    throw e;
  }
}

export async function mirrorLog(opts: MirrorOptions): Promise<MirrorResult> {
  const t0 = performance.now();
  const { source, sourceName, trust } = opts;
  const concurrency = opts.concurrency ?? 16;
  await makeDataDir(opts.dest, { what: 'the mirror directory' });
  const dest = new Dest(opts.dest);

  // 1. The source's checkpoint, verified.
  const noteBytes = await source.get('checkpoint');
  if (!noteBytes) throw new ClientError('io', `${sourceName} has no checkpoint`);
  const note = Buffer.from(noteBytes).toString('utf8');
  const cp = checkCheckpoint({ note }, trust);
  if (!cp.signature.ok) throw new VerificationError(`checkpoint from ${sourceName}: ${cp.signature.detail}`);
  if (!cp.witnesses.ok) throw new VerificationError(`checkpoint from ${sourceName}: ${cp.witnesses.detail}`);
  const size = cp.size;

  // The mirror's own previous checkpoint, if it verifies.
  const oldNoteBytes = await dest.read('checkpoint');
  let old: { size: number; root: Uint8Array } | null = null;
  if (oldNoteBytes) {
    const oc = checkCheckpoint({ note: Buffer.from(oldNoteBytes).toString('utf8') }, trust);
    if (oc.signature.ok) old = { size: oc.size, root: oc.root };
  }
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
    // The source is behind the mirror: fine if its tree is a prefix of ours.
    const root = await new LogReader(new DirObjectReader(opts.dest), { unverified: true }).treeHash(size, old.size);
    if (!bytesEqual(root, cp.root))
      throw new VerificationError(
        `checkpoint from ${sourceName} (size ${size}) is not a prefix of the mirror's tree (size ${old.size}): the log forked`,
      );
    const ok = {
      ok: true,
      detail: `the source (size ${size}) is behind the mirror (size ${old.size}) and consistent with it`,
    };
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
  const partials = new Map<number, HashTile>();
  const levels: number[] = [];
  for (let level = 0; levelHashCount(level, size) > 0; level++) levels.push(level);
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
  const vt = new VerifiedTiles(source, sourceName, dest, size, partials);

  // 5 (before any write). Previous mirror and pin must be prefixes of the new tree.
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

  // 3. Full hash tiles of levels ≥ 1, top down (level 0 goes with the bundles).
  const oldSize = opts.reverify ? 0 : (old?.size ?? 0);
  const bundles = Math.ceil(size / TILE_WIDTH);
  const firstBundle = Math.floor(oldSize / TILE_WIDTH);
  let total = partials.size + 3 * (bundles - firstBundle);
  const plan = levels
    .filter((l) => l >= 1)
    .reverse()
    .map((level) => {
      const full = Math.floor(levelHashCount(level, size) / TILE_WIDTH);
      const from = Math.floor(levelHashCount(level, oldSize) / TILE_WIDTH);
      total += full - from;
      return { level, from, full };
    });
  let done = 0;
  const progress = (k = 1) => {
    done += k;
    opts.onProgress?.(done, total);
  };
  for (const { level, from, full } of plan) {
    await parallelRange(from, full, concurrency, async (index) => {
      const r = await vt.full(level, index);
      if (!r.local) await dest.write(r.tile.path, r.tile.data);
      progress();
    });
  }
  for (const [level, tile] of partials) {
    if (level >= 1) await dest.write(tile.path, tile.data);
    if (level >= 1) progress();
  }

  // 4. Level-0 tiles with their entry and record bundles, in order (the chain needs it).
  let prior: Uint8Array = new Uint8Array(32);
  if (firstBundle > 0) {
    const path = tilePath({ kind: 'entries', index: firstBundle - 1, width: TILE_WIDTH });
    const data =
      (await dest.read(path)) ?? (await readSourceObject(source, sourceName, 'entries', firstBundle - 1, TILE_WIDTH));
    const items = decodeBundle(data, path);
    if (items.length !== TILE_WIDTH) throw new VerificationError(`${path} does not have ${TILE_WIDTH} items`);
    prior = items[TILE_WIDTH - 1]!;
  }
  let bundleFetches = 0;
  let bundleReuse = 0;
  const readBundleBytes = async (kind: 'entries' | 'records', index: number, width: number) => {
    const local = await dest.read(tilePath({ kind, index, width }));
    if (local) {
      bundleReuse++;
      return { data: local, local: true };
    }
    bundleFetches++;
    return { data: await readSourceObject(source, sourceName, kind, index, width), local: false };
  };
  await orderedPipeline(
    firstBundle,
    bundles,
    concurrency,
    async (n) => {
      const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
      const [tile, entries, records] = await Promise.all([
        w < TILE_WIDTH ? Promise.resolve({ tile: partials.get(0)!, local: false }) : vt.full(0, n),
        readBundleBytes('entries', n, w),
        readBundleBytes('records', n, w),
      ]);
      return { w, tile, entries, records };
    },
    async (n, { w, tile, entries, records }) => {
      const ePath = tilePath({ kind: 'entries', index: n, width: w });
      const rPath = tilePath({ kind: 'records', index: n, width: w });
      const check = (
        eData: Uint8Array,
        rData: Uint8Array,
        from: string,
      ): { eItems: Uint8Array[]; rItems: Uint8Array[]; last: Uint8Array } => {
        const decode = (data: Uint8Array, path: string) => {
          let items: Uint8Array[];
          try {
            items = decodeBundle(data, path);
          } catch (e) {
            throw new VerificationError(`${path} from ${from}: ${(e as Error).message}`);
          }
          if (items.length < w) throw new VerificationError(`${path} from ${from} has ${items.length} items, not ${w}`);
          return items.slice(0, w);
        };
        const eItems = decode(eData, ePath);
        const rItems = decode(rData, rPath);
        let p = prior;
        for (let i = 0; i < w; i++) {
          const seq = n * TILE_WIDTH + i;
          if (!bytesEqual(leafHash(eItems[i]!), tile.tile.hashAt(0, i))) {
            throw new VerificationError(
              `${ePath} item ${i} (entry ${seq}) from ${from} is not the preimage of leaf ${seq} in ${tile.tile.path}: tampered bundle`,
            );
          }
          if (!bytesEqual(entryHash(seq, rItems[i]!, p), eItems[i]!)) {
            throw new VerificationError(
              `record ${seq} (${rPath} item ${i}) from ${from} does not hash to its entry hash: tampered record`,
            );
          }
          p = eItems[i]!;
        }
        return { eItems, rItems, last: p };
      };
      let checked: ReturnType<typeof check>;
      try {
        checked = check(entries.data, records.data, entries.local || records.local ? opts.dest : sourceName);
      } catch (e) {
        if (!(e instanceof VerificationError) || !(entries.local || records.local)) throw e;
        // A local copy that no longer verifies (altered on disk, or left by another log): fetch it again.
        entries.data = await readSourceObject(source, sourceName, 'entries', n, w);
        records.data = await readSourceObject(source, sourceName, 'records', n, w);
        entries.local = records.local = false;
        bundleFetches += 2;
        checked = check(entries.data, records.data, sourceName);
      }
      prior = checked.last;
      await Promise.all([
        tile.local ? undefined : dest.write(tile.tile.path, tile.tile.data),
        entries.local ? undefined : dest.write(ePath, encodeBundle(checked.eItems)),
        records.local ? undefined : dest.write(rPath, encodeBundle(checked.rItems)),
      ]);
      progress(3);
    },
  );

  // The new checkpoint last, then the partial tiles it no longer needs.
  const unchanged = old !== null && old.size === size && bytesEqual(old.root, cp.root);
  await dest.write('checkpoint', noteBytes);
  const kinds: TileKind[] = [...levels, 'entries', 'records'];
  for (const kind of kinds) {
    const level = typeof kind === 'number' ? kind : 0;
    const count = levelHashCount(level, size);
    const keep = count % TILE_WIDTH;
    const edges = new Set([Math.floor(count / TILE_WIDTH)]);
    if (old) edges.add(Math.floor(levelHashCount(level, old.size) / TILE_WIDTH));
    for (const index of edges)
      await dest.prunePartials(kind, index, index === Math.floor(count / TILE_WIDTH) && keep > 0 ? keep : null);
  }

  const fetched = vt.fetched + bundleFetches + partials.size;
  return {
    ...base,
    status: unchanged ? 'up-to-date' : 'updated',
    consistency,
    pin,
    fetched,
    reused: vt.reused + bundleReuse,
    elapsedMs: performance.now() - t0,
  };
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
