// ObjectStore on a local directory. Immutable objects are written to a temporary file,
// fsynced, then hard-linked into place (link fails if the name exists, so a create is
// atomic and never exposes a half-written tile). With durable:false the fsyncs wait for
// persist(): after a power loss such an object may be empty or cut short, and the writer
// re-creates it from its own durable copy with repairTorn. Swaps hold a per-key mutex file (a
// hard link to the process's badge file) whose owner pid is checked, so a crashed holder never
// wedges the log.
import { createHash, randomBytes } from 'node:crypto';
import { constants, promises as fs, unlinkSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import pLimit from 'p-limit';
import { bytesEqual } from '../hash.js';
import {
  ImmutableConflictError,
  type ObjectStore,
  type CreateOptions,
  type StoreStats,
  type StoredObject,
  type SwapOptions,
  type VersionedObject,
  VersionConflictError,
  assertValidKey,
} from './store.js';

export interface FsStoreOptions {
  /** fsync files and directories (default true; tests of throughput may turn it off). */
  readonly fsync?: boolean;
  /** Parallel file writes in createAll (default 16). */
  readonly concurrency?: number;
}

/** One createAll call's settings and what its chunks leave to do at the end. */
interface ChunkWrite {
  readonly durable: boolean;
  readonly repairTorn: boolean;
  readonly dirs: Set<string>;
  readonly cleanups: Promise<void>[];
}

const MUTEX_WAIT_MS = 10_000;
/** createAll writes, syncs and links this many objects at a time (each holds a file open meanwhile). */
const CREATE_CHUNK = 128;
const isErr = (e: unknown, code: string): boolean => (e as NodeJS.ErrnoException)?.code === code;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FsObjectStore implements ObjectStore {
  readonly stats: StoreStats = { gets: 0, puts: 0, deletes: 0 };
  private readonly fsync: boolean;
  private readonly limit: ReturnType<typeof pLimit>;
  private readonly madeDirs = new Set<string>();
  /** Per directory, this store's mutex badge (see badgeIn). */
  private readonly badges = new Map<string, Promise<string>>();

  constructor(
    readonly root: string,
    options: FsStoreOptions = {},
  ) {
    this.fsync = options.fsync ?? true;
    this.limit = pLimit(options.concurrency ?? 16);
  }

  private file(key: string): string {
    assertValidKey(key);
    return join(this.root, key);
  }

  async get(key: string): Promise<Uint8Array | null> {
    const path = this.file(key);
    this.stats.gets++;
    try {
      return new Uint8Array(await fs.readFile(path));
    } catch (e) {
      if (isErr(e, 'ENOENT') || isErr(e, 'ENOTDIR') || isErr(e, 'EISDIR')) return null;
      throw e;
    }
  }

  async getVersioned(key: string): Promise<VersionedObject | null> {
    const data = await this.get(key);
    return data && { data, version: contentVersion(data) };
  }

  async createAll(objects: readonly StoredObject[], options: CreateOptions = {}): Promise<void> {
    const dirs = new Set<string>();
    const cleanups: Promise<void>[] = [];
    const write: ChunkWrite = { durable: this.fsync && options.durable !== false, repairTorn: options.repairTorn === true, dirs, cleanups };
    try {
      for (let at = 0; at < objects.length; at += CREATE_CHUNK) {
        await this.createChunk(objects.slice(at, at + CREATE_CHUNK), write);
      }
      if (write.durable) await this.syncDirs(dirs);
    } finally {
      await Promise.all(cleanups);
    }
  }

  /**
   * One file at a time: this is the write-behind, off the commit path. In parallel its
   * fsyncs filled libuv's four threads, and the next commit's lock swap queued behind them
   * (10 ms instead of 2).
   */
  async persist(keys: readonly string[]): Promise<void> {
    if (!this.fsync) return;
    const dirs = new Set<string>();
    await Promise.all(
      keys.map((key) =>
        this.limit(() => {
          const path = this.file(key);
          dirs.add(dirname(path));
          return syncPath(path);
        }),
      ),
    );
    await this.syncDirs(dirs);
  }

  private syncDirs(dirs: ReadonlySet<string>): Promise<unknown> {
    return Promise.all([...dirs].map((d) => this.limit(() => syncPath(d))));
  }

  /**
   * Writes every object to its temporary file, then syncs them all, then links them into
   * place. Syncing only once everything is written lets one journal commit carry the whole
   * chunk, where writes and syncs interleaved would make a commit for each few files.
   */
  private async createChunk(objects: readonly StoredObject[], { durable, repairTorn, dirs, cleanups }: ChunkWrite): Promise<void> {
    const results = await Promise.allSettled(
      objects.map((o) =>
        this.limit(async () => {
          const path = this.file(o.key);
          dirs.add(dirname(path));
          await this.mkdirs(dirname(path));
          return { key: o.key, path, data: o.data, temp: await this.writeTemp(path, o.data) };
        }),
      ),
    );
    const written = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    try {
      if (failed) throw failed.reason;
      if (durable) await Promise.all(written.map((w) => this.limit(() => w.temp.file.sync())));
    } catch (e) {
      // Nothing was linked: the temporary files go, the objects stay absent.
      await Promise.all(written.map((w) => w.temp.file.close().catch(() => undefined)));
      for (const w of written) cleanups.push(removeQuietly(w.temp.path));
      throw e;
    }
    await Promise.all(written.map((w) => this.limit(() => w.temp.file.close())));
    await Promise.all(written.map((w) => this.limit(() => this.linkInPlace(w.key, w.path, w.temp.path, w.data, repairTorn, cleanups))));
  }

  /**
   * Moves a written temporary file to `path` unless an object is there; identical bytes are
   * fine, and with `repairTorn` a torn copy is replaced.
   */
  private async linkInPlace(key: string, path: string, tmp: string, data: Uint8Array, repairTorn: boolean, cleanups: Promise<void>[]): Promise<void> {
    this.stats.puts++;
    try {
      await fs.link(tmp, path);
    } catch (e) {
      if (!isErr(e, 'EEXIST')) throw e;
      const existing = new Uint8Array(await fs.readFile(path));
      if (bytesEqual(existing, data)) return;
      if (!repairTorn || !couldBeTorn(existing, data)) throw new ImmutableConflictError(key);
      await fs.rename(tmp, path);
    } finally {
      // The object is in place (or refused) already: its temporary name goes while the
      // directories are synced (a crash before the unlink leaves a .tmp- file, which readers ignore).
      cleanups.push(removeQuietly(tmp));
    }
  }

  async swap(key: string, data: Uint8Array, expected: string | null, options: SwapOptions = {}): Promise<string> {
    const path = this.file(key);
    const durable = this.fsync && options.durable !== false;
    await this.mkdirs(dirname(path));
    return this.withMutex(path, async () => {
      const current = await this.getVersioned(key);
      if ((current?.version ?? null) !== expected) throw new VersionConflictError(key);
      const temp = await this.writeTemp(path, data);
      try {
        if (durable) await temp.file.sync();
      } finally {
        await temp.file.close();
      }
      this.stats.puts++;
      await fs.rename(temp.path, path);
      if (durable) await syncPath(dirname(path));
      return contentVersion(data);
    });
  }

  async delete(key: string): Promise<void> {
    this.stats.deletes++;
    await fs.unlink(this.file(key)).catch((e) => {
      if (!isErr(e, 'ENOENT')) throw e;
    });
  }

  private async mkdirs(dir: string): Promise<void> {
    if (this.madeDirs.has(dir)) return;
    const first = await fs.mkdir(dir, { recursive: true });
    if (first !== undefined && this.fsync) {
      // A new directory survives a power loss only once its entry in its parent is synced:
      // sync the parent of every directory just created, from `dir` up to `first`.
      for (let d = dir; ; d = dirname(d)) {
        await syncPath(dirname(d));
        if (d === first || dirname(d) === d) break;
      }
    }
    this.madeDirs.add(dir);
  }

  /**
   * A file naming this store instance's owner (pid and a random tag), made once per directory
   * and hard-linked as each mutex it takes. A mutex file written and deleted per swap freed an
   * inode every time; on ext4 without a journal each allocation then scans past the inodes
   * freed in the last minute, which made taking the mutex cost ms. Badges of dead processes
   * are removed when a new one is made; a live process removes its own at exit.
   */
  private badgeIn(dir: string): Promise<string> {
    let badge = this.badges.get(dir);
    if (!badge) {
      badge = makeBadge(dir);
      badge.catch(() => this.badges.delete(dir));
      this.badges.set(dir, badge);
    }
    return badge;
  }

  /** `data` in a fresh temporary file next to `path`, left open for the caller to sync and close. */
  private async writeTemp(path: string, data: Uint8Array): Promise<{ path: string; file: FileHandle }> {
    const tmp = `${path}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
    const file = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
    try {
      await file.writeFile(data);
    } catch (e) {
      await file.close();
      throw e;
    }
    return { path: tmp, file };
  }

  /**
   * Runs `fn` holding `<path>.lock`; breaks a lock whose owner process is gone. The lock
   * file appears with its owner already inside (written aside, then hard-linked into place,
   * which fails if the lock exists), so a holder killed at any moment leaves either no lock
   * or one naming its pid; never an ownerless lock that would stall every later writer.
   */
  private async withMutex<T>(path: string, fn: () => Promise<T>): Promise<T> {
    const lock = `${path}.lock`;
    const badge = await this.badgeIn(dirname(path));
    const deadline = Date.now() + MUTEX_WAIT_MS;
    for (;;) {
      if (await tryLock(lock, badge)) break;
      const held = await readOwner(lock);
      if (held === undefined) continue; // released meanwhile
      if (await isStale(lock, held)) {
        await breakLock(lock, held);
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      await sleep(2);
    }
    try {
      return await fn();
    } finally {
      // Nobody breaks the lock of a live owner, so it is still ours to remove.
      await fs.unlink(lock);
    }
  }
}

/** Links `badge` (naming its owner) as `lock`, atomically; false if the lock is already held. */
async function tryLock(lock: string, badge: string): Promise<boolean> {
  try {
    await fs.link(badge, lock);
    return true;
  } catch (e) {
    if (isErr(e, 'EEXIST')) return false;
    throw e;
  }
}

const BADGE_PREFIX = '.mutex-owner-';
const badgesMade = new Set<string>();
process.once('exit', () => {
  for (const b of badgesMade) {
    try {
      unlinkSync(b);
    } catch {
      // already gone
    }
  }
});

/** Creates this process's badge in `dir`, after removing the badges of processes that are gone. */
async function makeBadge(dir: string): Promise<string> {
  for (const name of await fs.readdir(dir)) {
    if (!name.startsWith(BADGE_PREFIX)) continue;
    const pid = Number(name.slice(BADGE_PREFIX.length).split('-')[0]);
    if (Number.isInteger(pid) && pid > 0 && !processAlive(pid)) await removeQuietly(join(dir, name));
  }
  const tag = randomBytes(8).toString('hex');
  const badge = join(dir, `${BADGE_PREFIX}${process.pid}-${tag}`);
  await fs.writeFile(badge, `${process.pid} ${tag}`, { flag: 'wx' });
  badgesMade.add(badge);
  return badge;
}

const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return !isErr(e, 'ESRCH');
  }
};

/** The owner line of a held lock (a directory with an `owner` file is an older release's); undefined if the lock is gone. */
async function readOwner(lock: string): Promise<string | null | undefined> {
  try {
    return await fs.readFile(lock, 'utf8');
  } catch (e) {
    if (isErr(e, 'ENOENT')) return undefined;
    if (!isErr(e, 'EISDIR')) throw e;
  }
  try {
    return await fs.readFile(join(lock, 'owner'), 'utf8');
  } catch (e) {
    if (!isErr(e, 'ENOENT')) throw e;
    return (await fs.stat(lock).catch(() => null)) ? null : undefined;
  }
}

/**
 * Removes the stale `lock` if it still names `owner`. It is moved aside first and its owner
 * re-read there: if another writer took the lock in between, it is put back, so a holder
 * never loses its lock to someone breaking an older, stale one.
 */
async function breakLock(lock: string, owner: string | null): Promise<void> {
  const grave = `${lock}.stale-${randomBytes(6).toString('hex')}`;
  try {
    await fs.rename(lock, grave);
  } catch (e) {
    if (isErr(e, 'ENOENT')) return;
    throw e;
  }
  if ((await readOwner(grave)) !== owner) {
    await fs.rename(grave, lock).catch(() => undefined);
    return;
  }
  await fs.rm(grave, { recursive: true, force: true });
}

/** A lock is stale when its owner pid is dead, or it has had no owner for 5 s (an older writer's lock). */
async function isStale(lock: string, owner: string | null): Promise<boolean> {
  const pid = owner === null ? NaN : Number(owner.split(' ')[0]);
  if (Number.isInteger(pid) && pid > 0) return !processAlive(pid);
  const st = await fs.stat(lock).catch(() => null);
  return st !== null && Date.now() - st.mtimeMs > 5_000;
}

/** What a power loss can leave of `want` written without fsync: a prefix, with zeros where data was due. */
function couldBeTorn(found: Uint8Array, want: Uint8Array): boolean {
  if (found.length > want.length) return false;
  for (let i = 0; i < found.length; i++) if (found[i] !== want[i] && found[i] !== 0) return false;
  return true;
}

/** Unlinks `path`, ignoring failure (a leftover temporary file is harmless). */
function removeQuietly(path: string): Promise<void> {
  return fs.unlink(path).catch(() => undefined);
}

/** fsyncs an existing file or directory. */
async function syncPath(path: string): Promise<void> {
  const fh = await fs.open(path, constants.O_RDONLY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Version token of a local object: the SHA-256 of its bytes. */
export function contentVersion(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
