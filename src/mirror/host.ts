// Running a mirror: its cosigning key (created on first start, mode 0600, a cosignature/v1
// key like a witness's), the secret that authenticates its tickets, its per-log state and
// copies, and the HTTP server. Used by `stele mirror serve`, tests and benches.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { listenHttp } from '../http/server.js';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  SIG_COSIGNATURE_V1,
  type NoteVerifier,
  formatVkey,
  makeVerifier,
  parseVkey,
  SIG_ED25519,
} from '../core/note.js';
import { loadOrCreateKey } from '../keys/local-signer.js';
import { makeDataDir } from '../store/files.js';
import { FsObjectStore } from '../store/fs.js';
import { type MirroredLog, Mirror } from './mirror.js';
import { mirrorApp } from './server.js';

export interface MirrorHostOptions {
  readonly dataDir: string;
  readonly name: string;
  readonly logs: readonly MirroredLog[];
  readonly host: string;
  readonly port: number;
  readonly logger: Logger;
  /** fsync the copy and state (default true; benches may turn it off). */
  readonly fsync?: boolean;
}

export interface RunningMirror {
  readonly url: string;
  readonly name: string;
  /** Verifier key of the mirror's cosignatures (type 0x04). */
  readonly verifier: NoteVerifier;
  readonly vkey: string;
  readonly mirror: Mirror;
  /** Directory of one log's copy (tlog-tiles, as served under /<hash>/). */
  copyDir(originHash: string): string;
  close(): Promise<void>;
}

/** 32 random bytes kept beside the key (mode 0600), created on first start. */
async function loadOrCreateSecret(path: string): Promise<Uint8Array> {
  try {
    const data = await fs.readFile(path);
    if (data.length !== 32) throw new Error(`${path} must hold 32 bytes`);
    return new Uint8Array(data);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    const secret = randomBytes(32);
    await fs.writeFile(path, secret, { mode: 0o600, flag: 'wx' });
    return new Uint8Array(secret);
  }
}

export async function startMirror(o: MirrorHostOptions): Promise<RunningMirror> {
  await makeDataDir(o.dataDir, { mode: 0o700 });
  const { signer } = await loadOrCreateKey(join(o.dataDir, 'mirror.key'), o.name);
  const ticketKey = await loadOrCreateSecret(join(o.dataDir, 'ticket.key'));
  const fsync = o.fsync ?? true;
  const state = new FsObjectStore(join(o.dataDir, 'state'), { fsync });
  await state.removeTempFiles();
  const copyDir = (hash: string) => join(o.dataDir, 'logs', hash);
  const mirror = new Mirror({
    signer,
    logs: o.logs,
    state,
    ticketKey,
    copyOf: (hash) => new FsObjectStore(copyDir(hash), { fsync }),
  });
  const http = await listenHttp(mirrorApp(mirror, o.logger).callback(), o.host, o.port);
  const verifier = makeVerifier(o.name, SIG_COSIGNATURE_V1, signer.publicKey);
  return { url: http.url, name: o.name, verifier, vkey: formatVkey(verifier), mirror, copyDir, close: http.close };
}

/** A log vkey (Ed25519, type 0x01) for --log. */
export function parseLogVkey(vkey: string): NoteVerifier {
  const v = parseVkey(vkey);
  if (v.type !== SIG_ED25519) throw new Error('log vkeys are Ed25519 (type 0x01)');
  return v;
}
