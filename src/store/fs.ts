// ObjectStore on a local directory. Reads go through libuv's pool; every write (creates,
// swaps, delete; persist's fsyncs on a second thread) is one request to a writer thread,
// which does it with synchronous calls (src/store/fs-writer.ts says how, and why a thread).
import { promises as fs, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TILE_WIDTH, parseTilePath } from '../core/tiles.js';
import { RequestThread, startModuleWorker } from './threads.js';
import { isAbandonedTemp } from './files.js';
import { FsObjectReader } from './fs-reader.js';
import { badgeName, contentVersion } from './fs-writer.js';
import type { FromWriter, ToWriter, WriteRequest, WriterError } from './fs-writer-thread.js';
import {
  ImmutableConflictError,
  type ObjectStore,
  type CreateOptions,
  type StoredObject,
  type SwapOptions,
  type VersionedObject,
  VersionConflictError,
} from './store.js';

export { contentVersion } from './fs-writer.js';

export interface FsStoreOptions {
  /** fsync files and directories (default true; tests of throughput may turn it off). */
  readonly fsync?: boolean;
  /**
   * Delete a tile's partial versions once its full tile is durable (default false). C2SP
   * tlog-tiles allows it and readers fall back to the full tile; a log written in small
   * batches otherwise keeps several times more bytes of partials than of full tiles.
   */
  readonly sweepPartials?: boolean;
}

/** createAll sends at most this many objects, or about this many bytes, in one request. */
const CREATE_CHUNK = 256;
const CREATE_CHUNK_BYTES = 4 * 1024 * 1024;
const isErr = (e: unknown, code: string): boolean => (e as NodeJS.ErrnoException)?.code === code;

export class FsObjectStore extends FsObjectReader implements ObjectStore {
  private readonly fsync: boolean;
  private readonly sweeps: boolean;

  constructor(root: string, options: FsStoreOptions = {}) {
    super(root);
    this.fsync = options.fsync ?? true;
    this.sweeps = options.sweepPartials === true;
  }

  async getVersioned(key: string): Promise<VersionedObject | null> {
    const data = await this.get(key);
    return data && { data, version: contentVersion(data) };
  }

  async createAll(objects: readonly StoredObject[], options: CreateOptions = {}): Promise<void> {
    const paths = objects.map((o) => this.file(o.key));
    const flags = { durable: options.durable !== false, repairTorn: options.repairTorn === true };
    for (let from = 0; from < objects.length; ) {
      // Each request carries its objects' bytes in one buffer of its own: they are often views
      // of much larger buffers (a batch's bundles), which a message would copy whole. Chunks
      // bound that copy, as they bound a chunk's open files before.
      let to = from;
      let size = 0;
      const ends: number[] = [];
      while (to < objects.length && (to === from || (size < CREATE_CHUNK_BYTES && to - from < CREATE_CHUNK)))
        ends.push((size += objects[to++]!.data.length));
      const bytes = new Uint8Array(size);
      for (let i = from; i < to; i++) bytes.set(objects[i]!.data, i === from ? 0 : ends[i - from - 1]);
      await this.write(
        {
          op: 'createAll',
          keys: objects.slice(from, to).map((o) => o.key),
          paths: paths.slice(from, to),
          ends,
          bytes,
          ...flags,
        },
        [bytes.buffer],
      );
      from = to;
    }
    if (flags.durable) await this.sweepPartials(objects.map((o) => o.key));
  }

  async persist(keys: readonly string[]): Promise<void> {
    if (this.fsync && keys.length > 0)
      await this.write({ op: 'persist', paths: keys.map((k) => this.file(k)) }, [], persistThread);
    await this.sweepPartials(keys);
  }

  /** With `sweepPartials`: the partials of the full tiles among `keys`, now durable, go. */
  private async sweepPartials(keys: readonly string[]): Promise<void> {
    if (!this.sweeps) return;
    const full = keys.filter((k) => parseTilePath(k)?.width === TILE_WIDTH);
    if (full.length > 0) await this.write({ op: 'sweepPartials', paths: full.map((k) => this.file(k)) });
  }

  async swap(key: string, data: Uint8Array, expected: string | null, options: SwapOptions = {}): Promise<string> {
    const path = this.file(key);
    badgeDirs.add(dirname(path));
    // A copy with a buffer of its own to transfer: `data` may be a Buffer, whose slice() is a
    // view of Node's shared pool, which Node 22+ refuses to transfer.
    const copy = new Uint8Array(data);
    return (await this.write({ op: 'swap', key, path, data: copy, expected, durable: options.durable !== false }, [
      copy.buffer,
    ])) as string;
  }

  async delete(key: string): Promise<void> {
    this.stats.deletes++;
    await this.write({ op: 'delete', path: this.file(key) });
  }

  /**
   * Removes the temporary files (`*.tmp-<pid>-*`) that writes cut short by a crash left
   * behind, for when a log is opened: they are never objects (no key names them), but they
   * would stay forever and be copied by anyone mirroring the directory. Files of a live
   * process are kept (a second process may be writing them). Returns the keys removed.
   */
  async removeTempFiles(): Promise<string[]> {
    const removed: string[] = [];
    for await (const name of this.list('')) {
      if (!isAbandonedTemp(name.slice(name.lastIndexOf('/') + 1))) continue;
      try {
        await fs.unlink(join(this.root, name));
        removed.push(name);
      } catch (e) {
        if (!isErr(e, 'ENOENT')) throw e;
      }
    }
    return removed;
  }

  /** Walks the directory without following symlinks (a symlink is listed as a key, never entered). */
  async *list(prefix: string): AsyncIterable<string> {
    const slash = prefix.lastIndexOf('/');
    const base = prefix.slice(0, slash + 1);
    yield* walk(this.root, base, prefix);
  }

  private async write(
    request: WriteRequest,
    transfer: ArrayBuffer[] = [],
    thread = writerThread,
  ): Promise<string | undefined> {
    const reply = await thread.request({ root: this.root, fsync: this.fsync, request }, transfer);
    this.stats.puts += reply.puts;
    if (reply.error) throw rebuild(reply.error);
    return reply.result;
  }
}

/** The bytes of an open file, or null if it is not a regular file (a FIFO, a device, a directory). */
/** Keys under `dir` (relative key `base`, '' or ending in '/') that start with `prefix`. */
async function* walk(root: string, base: string, prefix: string): AsyncIterable<string> {
  let entries;
  try {
    entries = await fs.readdir(join(root, base), { withFileTypes: true });
  } catch (e) {
    if (isErr(e, 'ENOENT') || isErr(e, 'ENOTDIR')) return;
    throw e;
  }
  for (const d of entries) {
    const key = base + d.name;
    if (d.isDirectory()) {
      if (prefix.startsWith(`${key}/`) || `${key}/`.startsWith(prefix)) yield* walk(root, `${key}/`, prefix);
    } else if (key.startsWith(prefix)) yield key;
  }
}

/** The store's error classes and errno codes, as they were thrown on the writer thread. */
function rebuild(e: WriterError): Error {
  if (e.name === 'ImmutableConflictError' && e.key !== undefined) return new ImmutableConflictError(e.key);
  if (e.name === 'VersionConflictError' && e.key !== undefined) return new VersionConflictError(e.key);
  const err = new Error(e.message) as NodeJS.ErrnoException;
  err.name = e.name;
  if (e.code !== undefined) err.code = e.code;
  return err;
}

/**
 * This process's mutex badge (src/store/fs-writer.ts): one file name, made in each directory
 * the writer thread takes a swap mutex in, and removed from them at exit.
 */
const BADGE = badgeName();
const badgeDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of badgeDirs) {
    try {
      unlinkSync(join(dir, BADGE));
    } catch {
      // never made, or already gone
    }
  }
});

/** Writer threads shared by all the process's stores: each does the writes sent to it in the order they were asked for. */
const startWriter = () => startModuleWorker(import.meta.url, 'fs-writer-thread', { workerData: { badgeName: BADGE } });
const writerThread = new RequestThread<ToWriter, FromWriter>(startWriter, "store's writer thread");
/** The write-behind's fsyncs run on a thread of their own, so creates and swaps never queue behind them. */
const persistThread = new RequestThread<ToWriter, FromWriter>(startWriter, "store's persist thread");
