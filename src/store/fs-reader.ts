// Reading objects from a local directory laid out like the bucket, without the writer: what
// a reader of a log directory (the CLI's --tiles <dir>, an offline copy) needs, and the read
// half of FsObjectStore (src/store/fs.ts), which adds the writer thread.
import { closeSync, fstatSync, lstatSync, openSync, promises as fs, readSync } from 'node:fs';
import { join } from 'node:path';
import { OBJECT_READ_FLAGS, isAbsent } from './files.js';
import { contentOf, contentOfSync } from './stored-form.js';
import { type ObjectReader, type StoreStats, assertValidKey } from './store.js';

/** The file operations a read makes: on libuv's pool, or blocking (see FsReaderOptions). */
interface ReadOps {
  isDirectory(path: string): boolean | Promise<boolean>;
  open(path: string): OpenFile | Promise<OpenFile>;
  content(key: string, data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}
interface OpenFile {
  stat(): { isFile(): boolean; size: number } | Promise<{ isFile(): boolean; size: number }>;
  read(into: Uint8Array, offset: number, length: number, position: number): number | Promise<number>;
  close(): void | Promise<void>;
}

const POOLED: ReadOps = {
  isDirectory: async (path) => (await fs.lstat(path)).isDirectory(),
  async open(path) {
    const fh = await fs.open(path, OBJECT_READ_FLAGS);
    return {
      stat: () => fh.stat(),
      read: async (into, offset, length, position) => (await fh.read(into, offset, length, position)).bytesRead,
      close: () => fh.close(),
    };
  },
  content: contentOf,
};

const BLOCKING: ReadOps = {
  isDirectory: (path) => lstatSync(path).isDirectory(),
  open(path) {
    const fd = openSync(path, OBJECT_READ_FLAGS);
    return {
      stat: () => fstatSync(fd),
      read: (into, offset, length, position) => readSync(fd, into, offset, length, position),
      close: () => closeSync(fd),
    };
  },
  content: contentOfSync,
};

export interface FsReaderOptions {
  /**
   * Read with blocking calls on the caller's thread (and decompress there): for a one-shot
   * client reading a few small objects, where each hop to libuv's pool costs more CPU than
   * the read itself. Never for a server, which must not block its event loop.
   */
  readonly blocking?: boolean;
}

export class FsObjectReader implements ObjectReader {
  readonly stats: StoreStats = { gets: 0, puts: 0, deletes: 0 };
  /** Directories (keys relative to the root) found to be real directories, not symlinks. */
  private readonly checkedDirs = new Set<string>();
  private readonly ops: ReadOps;

  constructor(
    readonly root: string,
    options: FsReaderOptions = {},
  ) {
    this.ops = options.blocking ? BLOCKING : POOLED;
  }

  protected file(key: string): string {
    assertValidKey(key);
    return join(this.root, key);
  }

  /**
   * Only regular files inside the root are objects: a symlink (last component or any
   * directory on the way) or anything else answers as absent, so a link planted in the
   * public directory can never make the server read and serve a file from elsewhere (the
   * private key). The last component is opened with O_NOFOLLOW and checked with fstat on the
   * descriptor read from; directories are checked once each (see realDirs). A record bundle
   * stored compressed is returned decompressed (src/store/stored-form.ts).
   */
  async get(key: string): Promise<Uint8Array | null> {
    const path = this.file(key);
    this.stats.gets++;
    if (!(await this.realDirs(key))) return null;
    let file: OpenFile;
    try {
      file = await this.ops.open(path);
    } catch (e) {
      if (isAbsent(e)) return null;
      throw e;
    }
    let data: Uint8Array | null;
    try {
      data = await readRegular(file);
    } finally {
      await file.close();
    }
    return data && this.ops.content(key, data);
  }

  /**
   * True if every directory of `key` below the root is a real directory, not a symlink. A
   * directory found real is remembered: directories are made by the writer and never
   * replaced, so a hot read costs no extra system call. What this cannot see is a real
   * directory later swapped for a symlink by someone with write access to the root (Node
   * has no openat to walk without following); that takes deliberate tampering, not an
   * operator's mistake, and the same person could write the object's bytes directly.
   */
  private async realDirs(key: string): Promise<boolean> {
    for (let at = key.indexOf('/'); at > 0; at = key.indexOf('/', at + 1)) {
      const dir = key.slice(0, at);
      if (this.checkedDirs.has(dir)) continue;
      try {
        if (!(await this.ops.isDirectory(join(this.root, dir)))) return false;
      } catch (e) {
        if (isAbsent(e)) return false;
        throw e;
      }
      this.checkedDirs.add(dir);
    }
    return true;
  }
}

async function readRegular(file: OpenFile): Promise<Uint8Array | null> {
  const st = await file.stat();
  if (!st.isFile()) return null;
  const data = new Uint8Array(st.size);
  let n = 0;
  while (n < data.length) {
    const bytesRead = await file.read(data, n, data.length - n, n);
    if (bytesRead === 0) break;
    n += bytesRead;
  }
  return n === data.length ? data : data.subarray(0, n);
}
