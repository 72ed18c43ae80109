// The writer thread of the local-directory store: runs each write request (src/store/fs.ts)
// with synchronous calls (src/store/fs-writer.ts) and answers once (src/store/threads.ts's
// RequestThread sends them).
import { parentPort, workerData } from 'node:worker_threads';
import { FsWriter, type PathObject } from './fs-writer.js';
import { ImmutableConflictError, VersionConflictError } from './store.js';
import { type Tagged, announceLoaded } from './threads.js';

export type WriteRequest =
  | {
      readonly op: 'createAll';
      readonly keys: readonly string[];
      readonly paths: readonly string[];
      readonly ends: readonly number[];
      readonly bytes: Uint8Array;
      readonly durable: boolean;
      readonly repairTorn: boolean;
    }
  | { readonly op: 'persist'; readonly paths: readonly string[] }
  | {
      readonly op: 'swap';
      readonly key: string;
      readonly path: string;
      readonly data: Uint8Array;
      readonly expected: string | null;
      readonly durable: boolean;
    }
  | { readonly op: 'delete'; readonly path: string }
  | { readonly op: 'sweepPartials'; readonly paths: readonly string[] };

/** A request and the writer it is for (one per store root and fsync setting). */
export interface ToWriter {
  readonly root: string;
  readonly fsync: boolean;
  readonly request: WriteRequest;
}

/** An error as it crosses back: enough to rebuild the store's own error classes and errno codes. */
export interface WriterError {
  readonly name: string;
  readonly message: string;
  readonly key?: string;
  readonly code?: string;
}

export interface FromWriter {
  readonly puts: number;
  readonly result?: string;
  readonly error?: WriterError;
}

const writers = new Map<string, FsWriter>();

function run(writer: FsWriter, r: WriteRequest): string | undefined {
  switch (r.op) {
    case 'createAll': {
      const objects: PathObject[] = r.keys.map((key, i) => ({
        key,
        path: r.paths[i]!,
        data: r.bytes.subarray(i === 0 ? 0 : r.ends[i - 1]!, r.ends[i]!),
      }));
      writer.createAll(objects, r.durable, r.repairTorn);
      return undefined;
    }
    case 'persist':
      writer.persist(r.paths);
      return undefined;
    case 'swap':
      return writer.swap(r.key, r.path, r.data, r.expected, r.durable);
    case 'delete':
      writer.delete(r.path);
      return undefined;
    case 'sweepPartials':
      writer.sweepPartials(r.paths);
      return undefined;
  }
}

function describe(e: unknown): WriterError {
  const err = e as Error & { code?: string };
  const key = e instanceof ImmutableConflictError || e instanceof VersionConflictError ? e.key : undefined;
  return {
    name: err.name ?? 'Error',
    message: err.message ?? String(e),
    ...(key !== undefined ? { key } : {}),
    ...(typeof err.code === 'string' ? { code: err.code } : {}),
  };
}

parentPort!.on('message', ({ id, body: { root, fsync, request } }: Tagged<ToWriter>) => {
  const name = `${fsync ? 'sync' : 'nosync'}:${root}`;
  let writer = writers.get(name);
  if (!writer) writers.set(name, (writer = new FsWriter(root, fsync, (workerData as { badgeName: string }).badgeName)));
  const before = writer.puts;
  let answer: { result?: string; error?: WriterError };
  try {
    answer = { result: run(writer, request) };
  } catch (e) {
    answer = { error: describe(e) };
  }
  parentPort!.postMessage({ id, body: { ...answer, puts: writer.puts - before } } satisfies Tagged<FromWriter>);
});

// Its modules are evaluated: it may be terminated from now on (src/store/threads.ts).
announceLoaded();
