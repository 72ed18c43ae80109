// `stele index rebuild`: the LMDB index made again from the record bundles of a local log,
// on every core, resumable. Worker threads (src/index/rebuild-worker.ts) read and check the
// records, parse them and make their rows, runs of bundles each; the main thread gathers
// their rows in leaf order into chunks and writes each chunk sorted, in one transaction with
// the size it reaches (LmdbIndex.writeRows). That size is the durable high-water mark: a
// rebuild killed mid-way continues from it when run again, and ends with the same rows.
//
// Why large chunks: the rows' keys are salted hashes, so they land on the index's pages at
// random, and a transaction copies every page it changes. Many small transactions (as the
// sequencer's batches make) copy about a page per row and fsync each, ever more of those pages
// uncached as the index grows. A chunk twice as large as the index already is copies each page once
// for several rows; and as the chunks double, the pages copied (and left free in the file)
// stay a fraction of it.
import { availableParallelism } from 'node:os';
import type { TreeHead } from '../read/reader.js';
import { LogIntegrityError } from '../read/tilestore.js';
import { toHex } from '../core/hash.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { RequestThread, startModuleWorker } from '../store/threads.js';
import type { LmdbIndex } from './lmdb.js';
import type { RowsReply, RowsRequest } from './rebuild-worker.js';

/** Leaves a worker reads per request: 16 bundles. */
const RUN = 16 * TILE_WIDTH;
/** Requests in flight per worker: one being worked, one waiting. */
const AHEAD = 2;

export interface RebuildOptions {
  /** Worker threads (default: one per core). */
  readonly threads?: number;
  /** Most leaves gathered per transaction (default 4 M); a chunk is otherwise twice as large as the index so far. */
  readonly maxChunk?: number;
  /** Leaves whose rows are made (not yet necessarily written), and the size being reached. */
  readonly onProgress?: (done: number, size: number) => void;
  /** Called after each chunk is committed, with the durable size (tests stop a rebuild there). */
  readonly onCommitted?: (size: number) => void;
}

export interface RebuildResult {
  /** Leaves indexed. */
  readonly size: number;
  /** Where this run started: 0, or the high-water mark of an interrupted rebuild it continued. */
  readonly resumedFrom: number;
}

/** The fewest leaves per chunk. */
const MIN_CHUNK = 1 << 16;

/** Leaves the chunk starting at `indexed` gathers: twice as many as are indexed already, within bounds. */
export function chunkLeaves(indexed: number, max = 4 << 20): number {
  return Math.min(max, Math.max(MIN_CHUNK, 2 * indexed));
}

/** Rebuilds `index` from the record bundles in `publicDir` of the tree `tree`, continuing an interrupted rebuild. */
export async function rebuildIndex(
  index: LmdbIndex,
  publicDir: string,
  tree: TreeHead,
  opts: RebuildOptions = {},
): Promise<RebuildResult> {
  let resumed = await index.beginRebuild();
  // A rebuild of a larger (another, or rolled-back) tree cannot be continued on this one.
  if (resumed && (await index.indexedSize()) > tree.size) {
    await index.endRebuild();
    resumed = await index.beginRebuild();
  }
  const from = await index.indexedSize();
  const base = { publicDir, size: tree.size, root: toHex(tree.root), salt: index.saltBytes() };
  const threads = Array.from(
    { length: Math.max(1, opts.threads ?? availableParallelism()) },
    () =>
      new RequestThread<RowsRequest, RowsReply>(
        () => startModuleWorker(import.meta.url, 'rebuild-worker'),
        'index rebuild thread',
      ),
  );
  try {
    const runs: [number, number][] = [];
    for (let at = from; at < tree.size; at = Math.min(tree.size, at + RUN))
      runs.push([at, Math.min(tree.size, at + RUN)]);
    const pending: Promise<RowsReply>[] = [];
    let next = 0;
    const send = () => {
      const [a, b] = runs[next]!;
      const p = threads[next % threads.length]!.request({ ...base, from: a, to: b });
      p.catch(() => undefined); // awaited in order below
      pending.push(p);
      next++;
    };
    let gathered = emptyChunk(from);
    for (let i = 0; i < runs.length; i++) {
      while (next < runs.length && pending.length < threads.length * AHEAD) send();
      const reply = await pending.shift()!;
      if (reply.error !== undefined) throw new LogIntegrityError(reply.error);
      addTo(gathered, reply);
      const end = runs[i]![1];
      opts.onProgress?.(end, tree.size);
      // A short chunk left at the end would copy pages for few rows: the last chunk takes it in.
      const limit = chunkLeaves(gathered.start, opts.maxChunk);
      if ((end - gathered.start >= limit && tree.size - end >= limit / 2) || end === tree.size) {
        await index.writeRows({ ...gathered, end });
        opts.onCommitted?.(end);
        gathered = emptyChunk(end);
      }
    }
    await index.endRebuild();
    return { size: tree.size, resumedFrom: resumed ? from : 0 };
  } finally {
    await Promise.all(threads.map((t) => t.close()));
  }
}

interface Gathered {
  readonly start: number;
  readonly digest: Uint8Array[];
  readonly artifact: Uint8Array[];
  readonly label: Uint8Array[];
  readonly counts: Map<string, number>;
}

function emptyChunk(start: number): Gathered {
  return { start, digest: [], artifact: [], label: [], counts: new Map() };
}

function addTo(g: Gathered, reply: RowsReply): void {
  g.digest.push(reply.digest);
  g.artifact.push(reply.artifact);
  g.label.push(reply.label);
  for (const [type, n] of reply.counts) g.counts.set(type, (g.counts.get(type) ?? 0) + n);
}
