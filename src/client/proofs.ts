// Local proof bundles: one JSON file per entry id under $XDG_DATA_HOME/stele/proofs
// (default ~/.local/share/stele/proofs). A bundle holds everything needed to re-verify an
// entry offline: the entry, its audit path, and the signed checkpoint it was proved against.
import { randomBytes } from 'node:crypto';
import { promises as fs, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Entry, canonicalEntryBytes, parseEntryId } from '../core/entry.js';
import { hashFromHex } from '../core/hash.js';
import { TLOG_PROOF_EXTENSION, steleTlogProof } from '../core/tlog-proof.js';
import { type EntryProofView, parseCheckpointView, parseEntryView } from './api.js';
import { ClientError, UsageError } from './errors.js';
import { fsReason } from '../store/files.js';

export const PROOF_FORMAT = 'stele-proof/v1';

/** An entry with its inclusion proof (the API's answer), plus where and when it was kept. */
export interface ProofBundle extends EntryProofView {
  format: typeof PROOF_FORMAT;
  savedAt: string;
  origin: string;
  keyId: string;
  /** The file whose digest was anchored or verified, as named on the command line. */
  file?: string;
  /** Entry hash of leaf − 1, which binds the entry's fields to its entry hash offline. */
  priorEntryHash?: string;
}

const HASH = /^[0-9a-f]{64}$/;

/** Checks the shape of a bundle read from disk (its content is re-verified by the caller). */
export function parseBundle(value: unknown, where: string): ProofBundle {
  const o = value as Record<string, unknown>;
  const bad = (what: string): never => {
    throw new ClientError('io', `${where}: not a Stele proof bundle (${what})`);
  };
  if (typeof o !== 'object' || o === null) bad('not an object');
  if (o.format !== PROOF_FORMAT) bad(`format is not ${PROOF_FORMAT}`);
  for (const k of ['leafIndex', 'treeSize'] as const)
    if (!Number.isSafeInteger(o[k]) || (o[k] as number) < 0) bad(`${k}`);
  for (const k of ['leafHash', 'rootHash', 'keyId'] as const)
    if (typeof o[k] !== 'string' || !HASH.test(o[k] as string)) bad(k);
  if (!Array.isArray(o.auditPath) || !o.auditPath.every((h) => typeof h === 'string' && HASH.test(h))) bad('auditPath');
  if (typeof o.origin !== 'string') bad('origin');
  if (o.priorEntryHash !== undefined && (typeof o.priorEntryHash !== 'string' || !HASH.test(o.priorEntryHash)))
    bad('priorEntryHash');
  try {
    parseEntryView(o.entry, `${where} entry`);
    parseCheckpointView(o.checkpoint, `${where} checkpoint`);
  } catch (e) {
    bad((e as Error).message);
  }
  return o as unknown as ProofBundle;
}

/**
 * The bundle as a C2SP tlog-proof file (src/core/tlog-proof.ts): the checkpoint note verbatim,
 * the audit path, and extra = prior entry hash ‖ canonical entry. Null when the bundle has
 * no prior entry hash (it is then not enough to go from the file's SHA-256 to the leaf).
 */
export function tlogProofOf(b: ProofBundle): string | null {
  if (b.priorEntryHash === undefined || b.checkpoint.note === undefined) return null;
  // The entry view is the entry object the log shows (docs/design.md §1.4): canonical fields, id and proof.
  const canonical = canonicalEntryBytes(b.entry as unknown as Entry);
  return steleTlogProof(
    b.leafIndex,
    canonical,
    hashFromHex(b.priorEntryHash),
    b.auditPath.map(hashFromHex),
    b.checkpoint.note,
  );
}

/** Writes `text` to `path` through a temporary file, so a reader never sees half of it. */
export async function writeAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  await fs.writeFile(tmp, text);
  await fs.rename(tmp, path);
}

export class ProofStore {
  constructor(readonly dir: string) {}

  pathOf(id: string): string {
    if (!parseEntryId(id))
      throw new UsageError(`malformed entry id ${JSON.stringify(id)} (expected led_<leaf index>_<12 hex>)`);
    return join(this.dir, `${id}.json`);
  }

  /** Where save() keeps the bundle's C2SP tlog-proof file. */
  tlogPathOf(id: string): string {
    return this.pathOf(id).replace(/\.json$/, TLOG_PROOF_EXTENSION);
  }

  async save(bundle: ProofBundle): Promise<string> {
    const path = this.pathOf(bundle.entry.id);
    try {
      await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
      await writeAtomic(path, `${JSON.stringify(bundle, null, 2)}\n`);
      // The same proof as a C2SP tlog-proof beside it, for verifiers other than Stele.
      const tlog = tlogProofOf(bundle);
      if (tlog !== null) await writeAtomic(this.tlogPathOf(bundle.entry.id), tlog);
    } catch (e) {
      throw new ClientError('io', `cannot store proof bundle in ${this.dir}: ${fsReason(e)}`);
    }
    return path;
  }

  async load(id: string): Promise<ProofBundle | null> {
    const path = this.pathOf(id);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new ClientError('io', `cannot read ${path}: ${fsReason(e)}`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new ClientError('io', `${path} is not valid JSON`);
    }
    const b = parseBundle(value, path);
    if (b.entry.id !== id) throw new ClientError('io', `${path} holds entry ${b.entry.id}, not ${id}`);
    return b;
  }

  /**
   * Stored bundles whose entry has this digest, earliest leaf first. Proof files are small and
   * read with blocking calls (as load does): a hop to libuv's pool costs more than the read.
   */
  async findByDigest(digest: string, origin?: string): Promise<ProofBundle[]> {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new ClientError('io', `cannot list ${this.dir}: ${(e as NodeJS.ErrnoException).code}`);
    }
    const out: ProofBundle[] = [];
    for (const name of names) {
      const m = /^(led_\d+_[0-9a-f]{12})\.json$/.exec(name);
      if (!m) continue;
      const b = await this.load(m[1]!).catch(() => null);
      if (b && b.entry.digest === digest && (origin === undefined || b.origin === origin)) out.push(b);
    }
    return out.sort((a, b) => a.leafIndex - b.leafIndex);
  }
}
