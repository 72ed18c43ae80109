// The mirror's objects: the destination directory (written atomically, stored as the source
// serves them), the source's hash tiles verified against the new checkpoint before use, and the
// copy of tiles and bundles beyond what the mirror holds (steps 3 and 4 of ledger-mirror.ts).
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { entryHash } from '../core/entry.js';
import { bytesEqual, leafHash } from '../core/hash.js';
import { treeHash } from '../core/merkle.js';
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
import { MissingObjectError, readTileBytes } from '../read/tilestore.js';
import { ClientError, VerificationError } from './errors.js';
import { orderedPipeline, parallelRange } from '../read/pipeline.js';
import type { Trust } from './rules.js';
import { fsReason } from '../store/files.js';
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

const isMissing = (e: unknown) => ['ENOENT', 'ENOTDIR'].includes((e as NodeJS.ErrnoException)?.code ?? '');

export class Dest {
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
export class VerifiedTiles {
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

export async function readSourceObject(
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

/** Steps 3 and 4: copies the verified tiles and bundles beyond what the mirror holds, with progress. */
export class TileCopy {
  bundleFetches = 0;
  bundleReuse = 0;
  private done = 0;
  private total: number;
  private readonly concurrency: number;
  private readonly firstBundle: number;
  private readonly bundleCount: number;

  constructor(
    private readonly opts: MirrorOptions,
    private readonly dest: Dest,
    private readonly vt: VerifiedTiles,
    private readonly partials: Map<number, HashTile>,
    private readonly size: number,
    private readonly oldSize: number,
    private readonly levels: readonly number[],
  ) {
    this.concurrency = opts.concurrency ?? 16;
    this.bundleCount = Math.ceil(size / TILE_WIDTH);
    this.firstBundle = Math.floor(oldSize / TILE_WIDTH);
    this.total = partials.size + 3 * (this.bundleCount - this.firstBundle);
  }

  private progress(k = 1): void {
    this.done += k;
    this.opts.onProgress?.(this.done, this.total);
  }

  /** Full hash tiles of levels ≥ 1, top down (level 0 goes with the bundles), then the partials. */
  async upperTiles(): Promise<void> {
    const { size, oldSize } = this;
    const plan = this.levels
      .filter((l) => l >= 1)
      .reverse()
      .map((level) => {
        const full = Math.floor(levelHashCount(level, size) / TILE_WIDTH);
        const from = Math.floor(levelHashCount(level, oldSize) / TILE_WIDTH);
        this.total += full - from;
        return { level, from, full };
      });
    for (const { level, from, full } of plan) {
      await parallelRange(from, full, this.concurrency, async (index) => {
        const r = await this.vt.full(level, index);
        if (!r.local) await this.dest.write(r.tile.path, r.tile.data);
        this.progress();
      });
    }
    for (const [level, tile] of this.partials) {
      if (level >= 1) await this.dest.write(tile.path, tile.data);
      if (level >= 1) this.progress();
    }
  }

  /** Level-0 tiles with their entry and record bundles, in order (the chain of entry hashes needs it). */
  async bundles(): Promise<void> {
    const { opts, size } = this;
    let prior = await this.priorEntryHash();
    await orderedPipeline(
      this.firstBundle,
      this.bundleCount,
      this.concurrency,
      async (n) => {
        const w = Math.min(TILE_WIDTH, size - n * TILE_WIDTH);
        const [tile, entries, records] = await Promise.all([
          w < TILE_WIDTH ? Promise.resolve({ tile: this.partials.get(0)!, local: false }) : this.vt.full(0, n),
          this.readBundleBytes('entries', n, w),
          this.readBundleBytes('records', n, w),
        ]);
        return { w, tile, entries, records };
      },
      async (n, { w, tile, entries, records }) => {
        const ePath = tilePath({ kind: 'entries', index: n, width: w });
        const rPath = tilePath({ kind: 'records', index: n, width: w });
        const check = (eData: Uint8Array, rData: Uint8Array, from: string) =>
          checkBundles({ n, w, tile: tile.tile, prior, ePath, rPath, from }, eData, rData);
        let checked: ReturnType<typeof check>;
        try {
          checked = check(entries.data, records.data, entries.local || records.local ? opts.dest : opts.sourceName);
        } catch (e) {
          if (!(e instanceof VerificationError) || !(entries.local || records.local)) throw e;
          // A local copy that no longer verifies (altered on disk, or left by another log): fetch it again.
          entries.data = await readSourceObject(opts.source, opts.sourceName, 'entries', n, w);
          records.data = await readSourceObject(opts.source, opts.sourceName, 'records', n, w);
          entries.local = records.local = false;
          this.bundleFetches += 2;
          checked = check(entries.data, records.data, opts.sourceName);
        }
        prior = checked.last;
        await Promise.all([
          tile.local ? undefined : this.dest.write(tile.tile.path, tile.tile.data),
          entries.local ? undefined : this.dest.write(ePath, encodeBundle(checked.eItems)),
          records.local ? undefined : this.dest.write(rPath, encodeBundle(checked.rItems)),
        ]);
        this.progress(3);
      },
    );
  }

  /** The entry hash before the first bundle copied: the last item of the bundle before it. */
  private async priorEntryHash(): Promise<Uint8Array> {
    const { firstBundle, opts } = this;
    if (firstBundle === 0) return new Uint8Array(32);
    const path = tilePath({ kind: 'entries', index: firstBundle - 1, width: TILE_WIDTH });
    const data =
      (await this.dest.read(path)) ??
      (await readSourceObject(opts.source, opts.sourceName, 'entries', firstBundle - 1, TILE_WIDTH));
    const items = decodeBundle(data, path);
    if (items.length !== TILE_WIDTH) throw new VerificationError(`${path} does not have ${TILE_WIDTH} items`);
    return items[TILE_WIDTH - 1]!;
  }

  private async readBundleBytes(kind: 'entries' | 'records', index: number, width: number) {
    const local = await this.dest.read(tilePath({ kind, index, width }));
    if (local) {
      this.bundleReuse++;
      return { data: local, local: true };
    }
    this.bundleFetches++;
    return { data: await readSourceObject(this.opts.source, this.opts.sourceName, kind, index, width), local: false };
  }
}

/**
 * Bundle `n`'s entries and records (`w` items) against its level-0 tile: each entry hash the
 * preimage of its leaf, each record hashing (with the entry hash before it) to its entry hash.
 */
function checkBundles(
  at: {
    readonly n: number;
    readonly w: number;
    readonly tile: HashTile;
    readonly prior: Uint8Array;
    readonly ePath: string;
    readonly rPath: string;
    readonly from: string;
  },
  eData: Uint8Array,
  rData: Uint8Array,
): { eItems: Uint8Array[]; rItems: Uint8Array[]; last: Uint8Array } {
  const { n, w, tile, prior, ePath, rPath, from } = at;
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
    if (!bytesEqual(leafHash(eItems[i]!), tile.hashAt(0, i))) {
      throw new VerificationError(
        `${ePath} item ${i} (entry ${seq}) from ${from} is not the preimage of leaf ${seq} in ${tile.path}: tampered bundle`,
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
}
