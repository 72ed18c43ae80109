// One process per data directory. The lock is a listening Unix socket in Linux's abstract
// namespace, named after the directory's real path: the kernel frees it when its process
// dies (kill -9 included), so a crash never leaves a stale lock to clean up, and a second
// bind fails at once and atomically. A process that finds the name taken connects to it
// and is told the holder's pid. Elsewhere (no abstract namespace) the socket is a file in
// the temporary directory, and a file nobody answers on is taken as stale.
import { createHash } from 'node:crypto';
import { realpath, unlink } from 'node:fs/promises';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDataDir } from './files.js';

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly pid: number | null,
  ) {
    super(
      `data directory ${dataDir} is in use by ${pid === null ? 'another process' : `pid ${pid}`}; stop it first (one process per data directory)`,
    );
  }
}

export interface DataDirLock {
  readonly dataDir: string;
  release(): Promise<void>;
}

const abstractNamespace = process.platform === 'linux';

/** The socket's address for a directory's real path. */
function address(real: string): string {
  const id = createHash('sha256').update(real).digest('hex').slice(0, 32);
  return abstractNamespace ? `\0stele-data-dir-${id}` : join(tmpdir(), `stele-${id}.sock`);
}

/** Takes the exclusive lock on `dataDir` (created if missing) or throws DataDirInUseError. */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  await makeDataDir(dataDir);
  const real = await realpath(dataDir);
  const path = address(real);
  let server: Server;
  try {
    server = await listen(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    const pid = await askHolder(path);
    if (pid === 'gone' && !abstractNamespace) {
      await unlink(path).catch(() => undefined);
      return lockDataDir(dataDir);
    }
    throw new DataDirInUseError(dataDir, pid === 'gone' ? null : pid);
  }
  // The lock must not keep the process alive on its own.
  server.unref();
  return {
    dataDir,
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket: Socket) => socket.end(String(process.pid)));
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** The pid the holder answers with; 'gone' if nobody answers (a stale socket file), null if it said nothing useful. */
function askHolder(path: string): Promise<number | null | 'gone'> {
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(path);
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.on('end', () => resolve(/^\d+$/.test(text) ? Number(text) : null));
    socket.on('error', (e: NodeJS.ErrnoException) =>
      resolve(e.code === 'ECONNREFUSED' || e.code === 'ENOENT' ? 'gone' : null),
    );
    socket.on('close', () => resolve(null));
  });
}
