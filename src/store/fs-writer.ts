// The writes of the local-directory store (src/store/fs.ts), as plain synchronous file system
// calls. They run on one writer thread (src/store/fs-writer-thread.ts), so that a store call
// is one message each way instead of five to ten libuv round trips, each of which waited for
// the event loop between two bursts of requests (under 64 control-plane connections a batch
// took 13-16 ms to integrate that way, 7-10 ms this way).
//
// Immutable objects are written to a temporary file, fsynced, then hard-linked into place
// (link fails if the name exists, so a create is atomic and never exposes a half-written
// tile). With durable:false the fsyncs wait for persist(): after a power loss such an object
// may be empty or cut short, and the writer re-creates it from its own durable copy with
// repairTorn. Swaps hold a per-key mutex file (a hard link to the process's badge file) whose
// owner pid is checked, so a crashed holder never wedges the log.
//
// Nothing is written through a symlink. Directories below the root are made one at a time
// and each is checked with lstat (once per writer): a symlinked directory is refused. For
// the final component: open(O_CREAT|O_EXCL) of the temporary file and link() never follow a
// symlink (link fails with EEXIST on one); rename() replaces the link itself, never its
// target. So a symlink found where an object belongs is read as absent (O_NOFOLLOW), exactly
// as readers see it, and replaced by the object: refusing instead would stop the sequencer
// at that tile forever, for a name that can hold nothing legitimate.
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { bytesEqual } from '../core/hash.js';
import { OBJECT_READ_FLAGS, isAbsent, processAlive, tempName } from './files.js';
import { ImmutableConflictError, VersionConflictError } from './store.js';
import { contentOfSync, storedFormSync } from './stored-form.js';

/** An object to write: its path under the store's root and its bytes. */
export interface PathObject {
  readonly key: string;
  readonly path: string;
  readonly data: Uint8Array;
}

const MUTEX_WAIT_MS = 10_000;
/** The name of a partial tile in its `.p` directory: its width, 1..255. */
const PARTIAL_WIDTH = /^[1-9][0-9]{0,2}$/;
const BADGE_PREFIX = '.mutex-owner-';
const isErr = (e: unknown, code: string): boolean => (e as NodeJS.ErrnoException)?.code === code;
const napping = new Int32Array(new SharedArrayBuffer(4));
const nap = (ms: number) => Atomics.wait(napping, 0, 0, ms);

/** One store root's writes. Not safe to share across threads; the writer thread keeps one per root. */
export class FsWriter {
  /** Objects linked or renamed into place so far (StoreStats.puts). */
  puts = 0;
  private readonly madeDirs = new Set<string>();
  /** Per directory, the badge file this writer links as its mutexes (see badgeIn). */
  private readonly badges = new Map<string, string>();

  private readonly root: string;

  /**
   * `root`: the store's directory (it may itself be a symlink: the operator chose it).
   * `badgeName`: the file name of this process's badges (see badgeIn), fixed by the caller so it can remove them at exit.
   */
  constructor(
    root: string,
    private readonly fsync: boolean,
    private readonly badgeName: string,
  ) {
    this.root = join(root, '.');
  }

  createAll(objects: readonly PathObject[], durable: boolean, repairTorn: boolean): void {
    const dirs = new Set<string>();
    const temps: string[] = [];
    try {
      // Every object is written (and synced, if durable) before any is linked: a failure
      // leaves none of them in place.
      const written = objects.map((o) => {
        dirs.add(dirname(o.path));
        this.mkdirs(dirname(o.path));
        const temp = tempName(o.path);
        const fd = openSync(temp, 'wx', 0o644);
        temps.push(temp);
        const stored = storedFormSync(o.key, o.data);
        try {
          writeAll(fd, stored);
          if (durable && this.fsync) fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
        return { ...o, stored, temp };
      });
      for (const w of written) this.linkInPlace(w, repairTorn);
      if (durable && this.fsync) for (const d of dirs) syncPath(d);
    } finally {
      // Linked or refused, the temporary names go (a crash first leaves a .tmp- file, which readers ignore).
      for (const t of temps) removeQuietly(t);
    }
  }

  /**
   * Moves a written temporary file into place unless an object is there; one of the same
   * content is fine (stored compressed or not, see src/store/stored-form.ts), and with
   * `repairTorn` a torn copy is replaced.
   */
  private linkInPlace(
    { key, path, data, stored, temp }: PathObject & { stored: Uint8Array; temp: string },
    repairTorn: boolean,
  ): void {
    this.puts++;
    try {
      linkSync(temp, path);
    } catch (e) {
      if (!isErr(e, 'EEXIST')) throw e;
      const existing = readObject(path);
      if (existing !== null && (bytesEqual(existing, stored) || sameContent(key, existing, data))) return;
      // A symlink (read as absent) is replaced: rename swaps the name, never touches its target.
      const torn = repairTorn && existing !== null && (couldBeTorn(existing, stored) || couldBeTorn(existing, data));
      if (existing !== null && !torn) throw new ImmutableConflictError(key);
      renameSync(temp, path);
    }
  }

  persist(paths: readonly string[]): void {
    if (!this.fsync) return;
    const dirs = new Set<string>();
    for (const p of paths) {
      syncPath(p);
      dirs.add(dirname(p));
    }
    for (const d of dirs) syncPath(d);
  }

  swap(key: string, path: string, data: Uint8Array, expected: string | null, durable: boolean): string {
    this.mkdirs(dirname(path));
    const sync = durable && this.fsync;
    return this.withMutex(path, () => {
      if (currentVersion(path) !== expected) throw new VersionConflictError(key);
      const temp = tempName(path);
      const fd = openSync(temp, 'wx', 0o644);
      try {
        writeAll(fd, data);
        if (sync) fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      this.puts++;
      renameSync(temp, path);
      if (sync) syncPath(dirname(path));
      return contentVersion(data);
    });
  }

  delete(path: string): void {
    if (!this.realDir(dirname(path), false)) return;
    try {
      unlinkSync(path);
    } catch (e) {
      if (!isErr(e, 'ENOENT')) throw e;
    }
  }

  /**
   * Removes the partial versions (`<path>.p/<W>`) of the full tiles at `paths`, and their
   * directory once empty. Only plain width names are removed (never a temporary file, which a
   * live writer may own), and never through a symlink: `.p` must be a real directory.
   */
  sweepPartials(paths: readonly string[]): void {
    for (const path of paths) {
      const dir = `${path}.p`;
      if (!this.realDir(dirname(dir), false)) continue;
      let names: string[];
      try {
        if (!lstatSync(dir).isDirectory()) continue;
        names = readdirSync(dir);
      } catch (e) {
        if (isErr(e, 'ENOENT')) continue;
        throw e;
      }
      let left = names.length;
      for (const name of names) {
        if (!PARTIAL_WIDTH.test(name)) continue;
        removeQuietly(join(dir, name));
        left--;
      }
      if (left === 0) {
        try {
          rmdirSync(dir);
        } catch (e) {
          // A partial written meanwhile (a crashed batch re-applied): it goes with the next sweep.
          if (!isErr(e, 'ENOTEMPTY') && !isErr(e, 'ENOENT')) throw e;
        }
      }
    }
  }

  private mkdirs(dir: string): void {
    this.realDir(dir, true);
  }

  /**
   * Checks that `dir` is a real directory, as is every directory between it and the root
   * (lstat: a symlink is refused, never followed); with `create`, makes the missing ones
   * first. False if it is missing and not to be created. Remembered once true: the writer
   * made or checked it, and directories are never replaced.
   */
  private realDir(dir: string, create: boolean): boolean {
    if (this.madeDirs.has(dir)) return true;
    if (dir === this.root || !dir.startsWith(`${this.root}/`)) {
      if (create) this.makeRoot(dir);
      else if (!exists(dir)) return false;
    } else {
      if (!this.realDir(dirname(dir), create)) return false;
      if (create && makeDir(dir) && this.fsync) syncPath(dirname(dir));
      let st;
      try {
        st = lstatSync(dir);
      } catch (e) {
        if (!create && isErr(e, 'ENOENT')) return false;
        throw e;
      }
      if (!st.isDirectory())
        throw Object.assign(new Error(`refusing to write under ${dir}: a symlink or not a directory`), {
          code: 'ENOTDIR',
        });
    }
    this.madeDirs.add(dir);
    return true;
  }

  /** Makes the root and its parents (followed as they are: the operator chose the path). */
  private makeRoot(dir: string): void {
    const first = mkdirSync(dir, { recursive: true });
    if (first !== undefined && this.fsync) {
      // A new directory survives a power loss only once its entry in its parent is synced:
      // sync the parent of every directory just created, from `dir` up to `first`.
      for (let d = dir; ; d = dirname(d)) {
        syncPath(dirname(d));
        if (d === first || dirname(d) === d) break;
      }
    }
  }

  /**
   * Runs `fn` holding `<path>.lock`; breaks a lock whose owner process is gone. The lock is a
   * hard link to this writer's badge (naming its pid), so it appears with its owner already
   * inside and a holder killed at any moment leaves either no lock or one naming its pid.
   * Linking a badge made once, rather than writing and deleting a lock file per swap, frees no
   * inode: on ext4 without a journal each allocation scans past the inodes freed in the last
   * minute, which had made taking the mutex cost milliseconds.
   */
  private withMutex<T>(path: string, fn: () => T): T {
    const lock = `${path}.lock`;
    const badge = this.badgeIn(dirname(path));
    const deadline = Date.now() + MUTEX_WAIT_MS;
    for (;;) {
      if (tryLink(badge, lock)) break;
      const held = readOwner(lock);
      if (held === undefined) continue; // released meanwhile
      if (isStale(lock, held)) {
        breakLock(lock, held);
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      nap(2);
    }
    try {
      return fn();
    } finally {
      // Nobody breaks the lock of a live owner, so it is still ours to remove.
      unlinkSync(lock);
    }
  }

  /** This writer's badge in `dir`, made on first use after removing the badges of processes that are gone. */
  private badgeIn(dir: string): string {
    let badge = this.badges.get(dir);
    if (badge) return badge;
    for (const name of readdirSync(dir)) {
      if (!name.startsWith(BADGE_PREFIX)) continue;
      const pid = Number(name.slice(BADGE_PREFIX.length).split('-')[0]);
      if (Number.isInteger(pid) && pid > 0 && !processAlive(pid)) removeQuietly(join(dir, name));
    }
    badge = join(dir, this.badgeName);
    // Another writer of this thread (another store on the same directory) may have made it: it is the same file.
    writeFileSync(badge, this.badgeName.slice(BADGE_PREFIX.length).replace('-', ' '));
    this.badges.set(dir, badge);
    return badge;
  }
}

/** A badge file name for this process: its pid and a random tag (its contents are the two, space-separated). */
export function badgeName(): string {
  return `${BADGE_PREFIX}${process.pid}-${randomBytes(8).toString('hex')}`;
}

/** Version token of a local object: the SHA-256 of its bytes. */
export function contentVersion(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The version of the object at `path`; null if absent or not a regular file (as readers see it). */
function currentVersion(path: string): string | null {
  const data = readObject(path);
  return data && contentVersion(data);
}

/** An existing object's bytes, never through a symlink; null if absent or not a regular file. */
function readObject(path: string): Uint8Array | null {
  let fd;
  try {
    fd = openSync(path, OBJECT_READ_FLAGS);
  } catch (e) {
    if (isAbsent(e)) return null;
    throw e;
  }
  try {
    return fstatSync(fd).isFile() ? new Uint8Array(readFileSync(fd)) : null;
  } finally {
    closeSync(fd);
  }
}

/** mkdir of one level; false if something already has that name. */
function makeDir(dir: string): boolean {
  try {
    mkdirSync(dir);
    return true;
  } catch (e) {
    if (isErr(e, 'EEXIST')) return false;
    throw e;
  }
}

function writeAll(fd: number, data: Uint8Array): void {
  for (let at = 0; at < data.length; ) at += writeSync(fd, data, at, data.length - at);
}

/** fsyncs an existing file or directory. */
function syncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Links `badge` as `lock`, atomically; false if the lock is already held. */
function tryLink(badge: string, lock: string): boolean {
  try {
    linkSync(badge, lock);
    return true;
  } catch (e) {
    if (isErr(e, 'EEXIST')) return false;
    throw e;
  }
}

/** The owner line of a held lock (a directory with an `owner` file is an older release's); undefined if the lock is gone. */
function readOwner(lock: string): string | null | undefined {
  try {
    return readFileSync(lock, 'utf8');
  } catch (e) {
    if (isErr(e, 'ENOENT')) return undefined;
    if (!isErr(e, 'EISDIR')) throw e;
  }
  try {
    return readFileSync(join(lock, 'owner'), 'utf8');
  } catch (e) {
    if (!isErr(e, 'ENOENT')) throw e;
    return exists(lock) ? null : undefined;
  }
}

/**
 * Removes the stale `lock` if it still names `owner`. It is moved aside first and its owner
 * re-read there: if another writer took the lock in between, it is put back, so a holder
 * never loses its lock to someone breaking an older, stale one.
 */
function breakLock(lock: string, owner: string | null): void {
  const grave = `${lock}.stale-${randomBytes(6).toString('hex')}`;
  try {
    renameSync(lock, grave);
  } catch (e) {
    if (isErr(e, 'ENOENT')) return;
    throw e;
  }
  if (readOwner(grave) !== owner) {
    try {
      renameSync(grave, lock);
    } catch {
      // taken again meanwhile: the grave goes with the next break
    }
    return;
  }
  rmSync(grave, { recursive: true, force: true });
}

/** A lock is stale when its owner pid is dead, or it has had no owner for 5 s (an older writer's lock). */
function isStale(lock: string, owner: string | null): boolean {
  const pid = owner === null ? NaN : Number(owner.split(' ')[0]);
  if (Number.isInteger(pid) && pid > 0) return !processAlive(pid);
  try {
    return Date.now() - statSync(lock).mtimeMs > 5_000;
  } catch {
    return false;
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Whether stored bytes `found` hold the content of `data` (another compression of it, or it uncompressed). */
function sameContent(key: string, found: Uint8Array, data: Uint8Array): boolean {
  try {
    return bytesEqual(contentOfSync(key, found), contentOfSync(key, data));
  } catch {
    return false; // not a gzip stream that decompresses: not this content
  }
}

/** What a power loss can leave of `want` written without fsync: a prefix, with zeros where data was due. */
function couldBeTorn(found: Uint8Array, want: Uint8Array): boolean {
  if (found.length > want.length) return false;
  for (let i = 0; i < found.length; i++) if (found[i] !== want[i] && found[i] !== 0) return false;
  return true;
}

/** Unlinks `path`, ignoring failure (a leftover temporary file is harmless). */
function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}
