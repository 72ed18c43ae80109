// A worker thread of the index rebuild (src/index/rebuild.ts): reads a run of record bundles
// through the reader's checks (nothing corrupt is indexed), parses each entry and makes its
// rows, bundle by bundle as the sequencer's batches would, so the main thread only sorts and
// writes them.
import { parentPort } from 'node:worker_threads';
import { parseCanonicalEntry } from '../core/entry.js';
import { concatBytes, hashFromHex } from '../core/hash.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { LogReader } from '../read/reader.js';
import { FsObjectStore } from '../store/fs.js';
import { type Tagged, announceLoaded } from '../store/threads.js';
import { batchRows } from './batch-rows.js';

export interface RowsRequest {
  /** The log's public directory. */
  readonly publicDir: string;
  /** The tree read (its checkpoint's size and root, hex). */
  readonly size: number;
  readonly root: string;
  readonly salt: Uint8Array;
  /** Leaves [from, to): `from` starts a bundle. */
  readonly from: number;
  readonly to: number;
}

/** Rows of one set, packed side by side (fixed width), and what else the leaves add. */
export interface RowsReply {
  readonly digest: Uint8Array;
  readonly artifact: Uint8Array;
  readonly label: Uint8Array;
  readonly counts: [string, number][];
  /** A record that failed the reader's checks (or did not parse): the message, and nothing else. */
  readonly error?: string;
}

/** One reader per thread, kept across requests for the tiles it has authenticated. */
let reader: { readonly dir: string; readonly reader: LogReader } | undefined;

async function rows(req: RowsRequest): Promise<RowsReply> {
  if (reader?.dir !== req.publicDir)
    reader = { dir: req.publicDir, reader: new LogReader(new FsObjectStore(req.publicDir), { cacheBytes: 64 << 20 }) };
  const tree = { size: req.size, root: hashFromHex(req.root) };
  const out = { digest: [] as Buffer[], artifact: [] as Buffer[], label: [] as Buffer[] };
  const counts = new Map<string, number>();
  for (let from = req.from; from < req.to; from += TILE_WIDTH) {
    const to = Math.min(req.to, from + TILE_WIDTH);
    const entries = (await reader.reader.records(from, to, tree)).map((r) => parseCanonicalEntry(r));
    const batch = batchRows(req.salt, from, to, (seq) => entries[seq - from]!);
    out.digest.push(...batch.rows.digest);
    out.artifact.push(...batch.rows.artifact);
    out.label.push(...batch.rows.label);
    for (const [type, n] of batch.counts) counts.set(type, (counts.get(type) ?? 0) + n);
  }
  // A buffer of their own (concatBytes makes one), unlike a pooled Buffer's, can be transferred.
  return {
    digest: concatBytes(...out.digest),
    artifact: concatBytes(...out.artifact),
    label: concatBytes(...out.label),
    counts: [...counts],
  };
}

parentPort!.on('message', ({ id, body }: Tagged<RowsRequest>) => {
  rows(body).then(
    (reply) =>
      parentPort!.postMessage({ id, body: reply } satisfies Tagged<RowsReply>, [
        reply.digest.buffer as ArrayBuffer,
        reply.artifact.buffer as ArrayBuffer,
        reply.label.buffer as ArrayBuffer,
      ]),
    (e: unknown) => {
      const empty = new Uint8Array();
      const reply = { digest: empty, artifact: empty, label: empty, counts: [], error: (e as Error).message };
      parentPort!.postMessage({ id, body: reply } satisfies Tagged<RowsReply>);
    },
  );
});

// Its modules are evaluated: it may be terminated from now on (src/store/threads.ts).
announceLoaded();
