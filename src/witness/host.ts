// Running a witness: its key (created on first start, mode 0600), its durable per-log
// state, and the HTTP server. Used by `stele witness serve` and by demo mode.
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  SIG_COSIGNATURE_V1,
  type NoteSigner,
  type NoteVerifier,
  formatVkey,
  makeVerifier,
  parseVkey,
} from '../core/note.js';
import { listenHttp } from '../http/server.js';
import { loadOrCreateKey } from '../keys/local-signer.js';
import { makeDataDir } from '../store/files.js';
import { FsObjectStore } from '../store/fs.js';
import { witnessApp } from './server.js';
import { Witness } from './witness.js';

export interface WitnessHostOptions {
  readonly dataDir: string;
  readonly name: string;
  readonly logs: readonly NoteVerifier[];
  readonly host: string;
  readonly port: number;
  readonly logger: Logger;
  /** The cosigning key, if not the data directory's witness.key (e.g. a key in an HSM: src/pkcs11/). */
  readonly signer?: NoteSigner;
}

export interface RunningWitness {
  readonly url: string;
  readonly name: string;
  /** Verifier key of the witness's cosignatures (type 0x04). */
  readonly verifier: NoteVerifier;
  readonly vkey: string;
  readonly witness: Witness;
  close(): Promise<void>;
}

export async function startWitness(o: WitnessHostOptions): Promise<RunningWitness> {
  await makeDataDir(o.dataDir, { mode: 0o700 });
  const signer = o.signer ?? (await loadOrCreateKey(join(o.dataDir, 'witness.key'), o.name)).signer;
  if (signer.name !== o.name) throw new Error(`the witness key is named ${signer.name}, not ${o.name}`);
  const state = new FsObjectStore(join(o.dataDir, 'state'));
  await state.removeTempFiles(); // of state swaps cut short by a crash
  const witness = new Witness({ signer, logs: o.logs, state });
  const http = await listenHttp(witnessApp(witness, o.logger).callback(), o.host, o.port);
  const verifier = makeVerifier(o.name, SIG_COSIGNATURE_V1, signer.publicKey);
  return { url: http.url, name: o.name, verifier, vkey: formatVkey(verifier), witness, close: http.close };
}

/** Parses `<vkey>=<url>` witness settings (vkeys of type 0x04). */
export function parseWitnessSpec(spec: string): { verifier: NoteVerifier; url: string } {
  const at = spec.lastIndexOf('=http');
  if (at < 0) throw new Error(`witness must be <vkey>=<url>, got ${JSON.stringify(spec)}`);
  return { verifier: parseVkeyOfType(spec.slice(0, at), SIG_COSIGNATURE_V1), url: spec.slice(at + 1) };
}

function parseVkeyOfType(vkey: string, type: number): NoteVerifier {
  const v = parseVkey(vkey);
  if (v.type !== type) throw new Error(`${v.name}: expected a key of type 0x0${type}`);
  return v;
}
