// Finding entries in a copy of the log by what they record (a file's digest, an artifact
// label) when there is no API to ask: the record bundles are read in order and parsed. For
// a local mirror directory the digest and label index is kept beside the client
// configuration, so a second lookup reads no bundle; it is tied to the tree it was built
// from (size and root) and extended, not rebuilt, when the mirror grew by appending. What
// the index names is only where to look: every entry found is then verified (rules 3, 4).
import { createHash } from 'node:crypto';
import { promises as fs, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type CanonicalEntry, parseCanonicalEntry } from '../core/entry.js';
import { toHex } from '../core/hash.js';
import { TILE_WIDTH } from '../core/tiles.js';
import type { LogReader } from '../read/reader.js';
import { fsReason, replaceFile } from '../store/files.js';
import { DirObjectReader } from './objects.js';
import { orderedPipeline } from '../read/pipeline.js';

const FORMAT = 'stele-entry-index/v1';

/** One label occurrence: the entry at `seq` records `artifact` in `scope` (null: none). */
export type LabelHit = readonly [scope: string | null, seq: number];

/** Where the entries of one tree are, by digest (the earliest) and by artifact label (all). */
export interface EntryIndexData {
  format: typeof FORMAT;
  /** The directory indexed (for a reader of the cache file). */
  source: string;
  treeSize: number;
  rootHash: string;
  digests: Record<string, number>;
  artifacts: Record<string, LabelHit[]>;
}

export type ScanProgress = (entriesDone: number, total: number) => void;

/** The tree being searched: its size and root, as verified from its checkpoint. */
export interface IndexedTree {
  readonly size: number;
  readonly root: Uint8Array;
}

const own = (o: object, k: string) => Object.hasOwn(o, k);

/**
 * Reads the records of leaves [from, size) bundle by bundle, in order, calling `visit` for
 * each; `visit` returning true stops the scan. Reading runs a few bundles ahead.
 */
export async function scanRecords(
  reader: LogReader,
  from: number,
  size: number,
  visit: (seq: number, entry: CanonicalEntry) => boolean | undefined,
  onProgress?: ScanProgress,
  window = 8,
): Promise<void> {
  const first = Math.floor(from / TILE_WIDTH);
  const last = Math.ceil(size / TILE_WIDTH);
  let stopped = false;
  const stop = new Error('stop');
  try {
    await orderedPipeline(
      first,
      last,
      window,
      (n) => reader.bundle('records', n, Math.min(TILE_WIDTH, size - n * TILE_WIDTH)),
      (n, records) => {
        for (let i = 0; i < records.length; i++) {
          const seq = n * TILE_WIDTH + i;
          if (seq < from) continue;
          let entry: CanonicalEntry;
          try {
            entry = parseCanonicalEntry(records[i]!);
          } catch {
            continue; // not an entry: the leaf check of whatever is found will say so
          }
          if (visit(seq, entry)) {
            stopped = true;
            throw stop;
          }
        }
        onProgress?.(Math.min(size, (n + 1) * TILE_WIDTH), size);
      },
    );
  } catch (e) {
    if (!(stopped && e === stop)) throw e;
  }
}

function emptyIndex(source: string): EntryIndexData {
  return { format: FORMAT, source, treeSize: 0, rootHash: '', digests: {}, artifacts: {} };
}

function addEntry(ix: EntryIndexData, seq: number, e: CanonicalEntry): void {
  if (!own(ix.digests, e.digest)) ix.digests[e.digest] = seq;
  if (typeof e.artifact === 'string') {
    const hits = own(ix.artifacts, e.artifact) ? ix.artifacts[e.artifact]! : (ix.artifacts[e.artifact] = []);
    hits.push([typeof e.scope === 'string' ? e.scope : null, seq]);
  }
}

/** The cache file of a mirror directory's index: beside the configuration, named by the directory. */
export function indexCachePath(configFile: string, dir: string): string {
  const name = createHash('sha256').update(dir).digest('hex').slice(0, 24);
  return join(dirname(configFile), 'mirror-index', `${name}.json`);
}

/** The cached index, read with a blocking call (once per command; its parse is most of the cost). */
function readCache(path: string, source: string): EntryIndexData | null {
  let doc: EntryIndexData;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8')) as EntryIndexData;
  } catch {
    return null; // none yet, or unreadable: rebuilt from the bundles
  }
  const ok =
    doc?.format === FORMAT &&
    doc.source === source &&
    Number.isSafeInteger(doc.treeSize) &&
    typeof doc.rootHash === 'string' &&
    typeof doc.digests === 'object' &&
    doc.digests !== null &&
    typeof doc.artifacts === 'object' &&
    doc.artifacts !== null;
  return ok ? doc : null;
}

/** Saves the index; a cache that cannot be written (read-only home, full disk) is said, not fatal. */
async function writeCache(path: string, ix: EntryIndexData, onNotice?: (line: string) => void): Promise<void> {
  try {
    await fs.mkdir(dirname(path), { recursive: true, mode: 0o700 });
    await replaceFile(path, JSON.stringify(ix));
  } catch (e) {
    onNotice?.(`cannot cache the mirror index at ${path} (${fsReason(e)}): carrying on without it`);
  }
}

/** How an index was had: from the cache as it was, extended by the new entries, or built. */
export type IndexOrigin = 'cached' | 'extended' | 'built';

/**
 * The full index of `tree` in a copy of the log. A directory's index is cached at
 * `cacheFile`: used when it is of this very tree, extended when its tree is a prefix of
 * this one (the root at its size recomputed from the tiles), rebuilt otherwise.
 */
export async function entryIndex(
  source: { readonly reader: LogReader; readonly published: number; readonly name: string },
  tree: IndexedTree,
  cacheFile: string | null,
  on: { readonly progress?: ScanProgress | undefined; readonly notice?: ((line: string) => void) | undefined } = {},
): Promise<{ index: EntryIndexData; origin: IndexOrigin }> {
  const { reader, published, name: sourceName } = source;
  const rootHash = toHex(tree.root);
  let ix = cacheFile ? readCache(cacheFile, sourceName) : null;
  let origin: IndexOrigin = 'built';
  if (ix && ix.treeSize === tree.size && ix.rootHash === rootHash) return { index: ix, origin: 'cached' };
  if (ix && ix.treeSize > 0 && ix.treeSize < tree.size) {
    const prefixRoot = await reader.treeHash(ix.treeSize, published).catch(() => null);
    if (prefixRoot && toHex(prefixRoot) === ix.rootHash) origin = 'extended';
    else ix = null;
  } else ix = null;
  const index = ix ?? emptyIndex(sourceName);
  await scanRecords(
    reader,
    index.treeSize,
    tree.size,
    (seq, e) => {
      addEntry(index, seq, e);
      return false;
    },
    on.progress,
  );
  index.treeSize = tree.size;
  index.rootHash = rootHash;
  if (cacheFile) await writeCache(cacheFile, index, on.notice);
  return { index, origin };
}

/** The cache file for a source, or null when it is not a local directory (URLs are not cached). */
export function cacheFileFor(source: unknown, configFile: string): string | null {
  return source instanceof DirObjectReader ? indexCachePath(configFile, source.dir) : null;
}

/** The earliest leaf recording `digest` in leaves [0, size), by scanning (stops at the first). */
export async function scanForDigest(
  reader: LogReader,
  size: number,
  digest: string,
  onProgress?: ScanProgress,
): Promise<number | undefined> {
  let found: number | undefined;
  await scanRecords(
    reader,
    0,
    size,
    (seq, e) => {
      if (e.digest !== digest) return false;
      found = seq;
      return true;
    },
    onProgress,
  );
  return found;
}

/**
 * The latest entry of each scope recording artifact `name` (only `scope`'s when given, null
 * meaning no scope): what a lookup by artifact id answers, per scope. Sorted by leaf.
 */
export function latestByScope(hits: readonly LabelHit[], scope?: string | null): LabelHit[] {
  const last = new Map<string | null, number>();
  for (const [s, seq] of hits) if (scope === undefined || s === scope) last.set(s, Math.max(seq, last.get(s) ?? -1));
  return [...last.entries()].map(([s, seq]) => [s, seq] as const).sort((a, b) => a[1] - b[1]);
}
