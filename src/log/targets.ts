// Where `stele log fsck` and `stele log recover` find a log: a local data directory (the
// layout of src/serve/local-log.ts) or, later, a bucket and table. Reading the key never creates one.
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { SIG_ED25519, makeVerifier } from '../core/note.js';
import { KeyFileError, parsePrivateKey } from '../keys/local-signer.js';
import { FsObjectStore } from '../store/fs.js';
import { StoreLock } from '../store/lock.js';
import type { FileKind, FsckTarget } from './fsck.js';
import { localPaths } from '../serve/local-log.js';

/** The data directory holds no log (or not one this command can read): a usage error. */
export class NotALogError extends Error {
  override name = 'NotALogError';
}

export interface LocalTarget extends FsckTarget {
  readonly lock: StoreLock;
  readonly dataDir: string;
}

/** The log in `dataDir`: its public directory, its lock record and the verifier of its key. */
export async function localTarget(dataDir: string): Promise<LocalTarget> {
  const paths = localPaths(dataDir);
  let text: string;
  try {
    text = await fs.readFile(paths.keyFile, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NotALogError(`${dataDir} holds no log: ${paths.keyFile} does not exist`);
    throw e;
  }
  let key;
  try {
    const signer = parsePrivateKey(text);
    key = makeVerifier(signer.name, SIG_ED25519, signer.publicKey);
  } catch (e) {
    if (e instanceof KeyFileError) throw new NotALogError(`${paths.keyFile}: ${e.message}`);
    throw e;
  }
  const store = new FsObjectStore(paths.publicDir);
  const privateStore = new FsObjectStore(paths.privateDir);
  const lock = new StoreLock(privateStore);
  return {
    where: dataDir,
    dataDir,
    store,
    lock,
    lockName: 'private/lock.json',
    staging: privateStore,
    state: privateStore,
    key,
    fileKind: (k) => fileKind(join(paths.publicDir, k)),
  };
}

async function fileKind(path: string): Promise<{ kind: FileKind; detail?: string }> {
  try {
    const st = await fs.lstat(path);
    if (st.isFile()) return { kind: 'file' };
    if (st.isSymbolicLink()) return { kind: 'symlink', detail: await fs.readlink(path).catch(() => '?') };
    return {
      kind: 'other',
      detail: st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : st.isDirectory() ? 'a directory' : 'a device',
    };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw e;
  }
}
