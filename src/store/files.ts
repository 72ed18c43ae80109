// Small file-system rules shared by the local store (its reads and its writer), the key files
// and start-up clean-up: how an object is opened, how a temporary file is named and when one
// is abandoned, and how a secret file is created so that a crash leaves no file or a whole one.
import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { TEMP_MARK } from './store.js';

const isErr = (e: unknown, code: string): boolean => (e as NodeJS.ErrnoException)?.code === code;

/**
 * Opening an object to read it (the store's reads, and the writer's look at what is already
 * there): never through a symlink (ELOOP), and never waiting on a FIFO left in the directory
 * (O_NONBLOCK does nothing to a regular file). The caller then checks fstat's isFile().
 */
export const OBJECT_READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Errors meaning "no object here": missing, a file where a directory should be, a symlink. */
export function isAbsent(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP';
}

/** File-system errors in words, for one-line messages (Node's own read `ENOENT: no such file or directory, open '…'`). */
const FS_REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of its path is a file, not a directory',
  EEXIST: 'it already exists',
  EROFS: 'the filesystem is read-only',
  ELOOP: 'it is a symlink (or its path loops through them)',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'the disk quota is used up',
  ENAMETOOLONG: 'the name is too long',
  EMFILE: 'too many open files',
  EIO: 'the device reported an I/O error',
};

/** Why a file-system call failed, in words; the error's own message for a code not listed. */
export function fsReason(e: unknown): string {
  const { code, syscall } = (e ?? {}) as NodeJS.ErrnoException;
  if (code === 'EEXIST' && syscall === 'mkdir') return 'it is a file, not a directory';
  return (code !== undefined && FS_REASONS[code]) || ((e as Error)?.message ?? String(e));
}

/** A data directory that cannot be created or used; nothing was written. */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

/**
 * Creates a data directory (`what`, for the message) and its parents, unless it is there
 * already. A full disk keeps its ENOSPC (the callers say which filesystem is full); any other
 * refusal is a DataDirError.
 */
export async function makeDataDir(dir: string, o: { mode?: number; what?: string } = {}): Promise<void> {
  try {
    await fs.mkdir(dir, { recursive: true, ...(o.mode !== undefined ? { mode: o.mode } : {}) });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC') throw e;
    throw new DataDirError(`cannot use ${dir} as ${o.what ?? 'a data directory'}: ${fsReason(e)}`);
  }
}

/** `<path>.tmp-<pid>-<random>`: beside its final name (so a link or rename is atomic), naming its writer. */
export function tempName(path: string): string {
  return `${path}${TEMP_MARK}${process.pid}-${randomBytes(6).toString('hex')}`;
}

/**
 * True for a temporary file whose writer process is gone (a crash between write and link).
 * A live writer's file is left alone: a second process on the same directory may be about
 * to link it. Names without a readable pid (an older release's) count as abandoned.
 */
export function isAbandonedTemp(name: string): boolean {
  const at = name.lastIndexOf(TEMP_MARK);
  if (at < 0) return false;
  const pid = Number(name.slice(at + TEMP_MARK.length).split('-')[0]);
  return !(Number.isInteger(pid) && pid > 0 && processAlive(pid));
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return !isErr(e, 'ESRCH');
  }
}

/**
 * Creates `path` with `text` (mode 0600) unless it exists; true if this call made it. The
 * bytes go to a temporary name, are fsynced, and only then hard-linked into place: link
 * fails if the name exists (so of concurrent creators exactly one wins, and the others read
 * its file), and a crash at any moment leaves no file or a whole one, never an empty one as
 * open(O_EXCL)-then-write did. Abandoned temporaries of earlier crashes are removed first.
 */
export function createSecretFile(path: string, text: string): Promise<boolean> {
  return viaSyncedTemp(path, text, async (temp) => {
    try {
      await fs.link(temp, path);
      return true;
    } catch (e) {
      if (isErr(e, 'EEXIST')) return false;
      throw e;
    }
  });
}

/** Replaces `path` with `text` (mode 0600) atomically and durably: temporary file, fsync, rename, directory fsync. */
export async function replaceFile(path: string, text: string): Promise<void> {
  await viaSyncedTemp(path, text, async (temp) => {
    await fs.rename(temp, path);
    return true;
  });
}

/**
 * Writes `text` to a fresh temporary name beside `path` and fsyncs it, lets `place` put it at
 * `path` (true if it did), then fsyncs the directory so the new name survives a power loss.
 */
async function viaSyncedTemp(path: string, text: string, place: (temp: string) => Promise<boolean>): Promise<boolean> {
  await removeAbandonedTemps(path);
  const temp = tempName(path);
  try {
    const fh = await fs.open(
      temp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
    if (!(await place(temp))) return false;
    await syncDir(dirname(path));
    return true;
  } finally {
    await fs.unlink(temp).catch(() => undefined);
  }
}

/** Removes `<path>.tmp-*` files of dead processes (a secret in a leftover file is still a secret). */
async function removeAbandonedTemps(path: string): Promise<void> {
  const prefix = `${basename(path)}${TEMP_MARK}`;
  let names: string[];
  try {
    names = await fs.readdir(dirname(path));
  } catch (e) {
    if (isErr(e, 'ENOENT')) return;
    throw e;
  }
  for (const n of names)
    if (n.startsWith(prefix) && isAbandonedTemp(n)) await fs.unlink(join(dirname(path), n)).catch(() => undefined);
}

/** A new name in a directory survives a power loss only once the directory is synced. */
async function syncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
