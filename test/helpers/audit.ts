// A from-scratch audit of a published log directory, independent of src/: it reads the
// files itself, hashes with node:crypto (through the naive RFC 6962 helper), verifies the
// checkpoint's Ed25519 signature with node:crypto, recomputes the whole entry chain from
// the record bundles, the tree root from the entry hashes, and every hash tile present at
// the checkpoint's size (record bundles stored compressed are gunzipped). Used by the sequencer, crash and tlogcheck suites.
import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { NaiveTree, naiveLeafHash, sha256 } from './naive.js';

const TILE = 256;
const DOMAIN = Buffer.from('stele/entry/v1\n', 'ascii');

/** 5 → "005", 1234067 → "x001/x234/067" (docs/design.md §1.2), written out again here on purpose. */
export function indexPath(n: number): string {
  const groups: string[] = [];
  do {
    groups.unshift(String(n % 1000).padStart(3, '0'));
    n = Math.floor(n / 1000);
  } while (n > 0);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

/** Relative path of tile (kind, n) at `width` (256 = full). */
export function tileFile(kind: string | number, n: number, width: number): string {
  return `tile/${kind}/${indexPath(n)}${width === TILE ? '' : `.p/${width}`}`;
}

export function decodeFramed(data: Uint8Array, what: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  let off = 0;
  while (off < data.length) {
    if (off + 2 > data.length) throw new Error(`${what}: truncated length`);
    const len = data[off]! * 256 + data[off + 1]!;
    if (off + 2 + len > data.length) throw new Error(`${what}: truncated item`);
    out.push(data.subarray(off + 2, off + 2 + len));
    off += 2 + len;
  }
  return out;
}

async function readMaybe(file: string): Promise<Uint8Array | null> {
  try {
    const data = new Uint8Array(await fs.readFile(file));
    // Record bundles are stored gzip-compressed (logs before that: plain); either reads.
    const gzip = /[/\\]tile[/\\]records[/\\]/.test(file) && data[0] === 0x1f && data[1] === 0x8b;
    return gzip ? new Uint8Array(gunzipSync(data)) : data;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** Reads a tile or bundle at `width`, falling back to the full one if the partial is gone. */
async function readTile(dir: string, kind: string | number, n: number, width: number): Promise<Uint8Array> {
  const exact = await readMaybe(path.join(dir, tileFile(kind, n, width)));
  if (exact) return exact;
  if (width < TILE) {
    const full = await readMaybe(path.join(dir, tileFile(kind, n, TILE)));
    if (full) return full;
  }
  throw new Error(`missing ${tileFile(kind, n, width)}`);
}

export interface ParsedCheckpoint {
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array;
  readonly body: string;
}

/** Parses a checkpoint note and verifies its log signature with node:crypto; throws if anything is off. */
export function verifyCheckpointNote(note: string, origin: string, publicKey: Uint8Array): ParsedCheckpoint {
  const sep = note.indexOf('\n\n');
  if (sep < 0) throw new Error('note has no blank line');
  const body = note.slice(0, sep + 1);
  const lines = body.split('\n');
  if (lines.length !== 4 || lines[3] !== '') throw new Error('checkpoint body is not three lines');
  if (lines[0] !== origin) throw new Error(`origin ${lines[0]} is not ${origin}`);
  const size = Number(lines[1]);
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1]!)) throw new Error('bad size line');
  const root = new Uint8Array(Buffer.from(lines[2]!, 'base64'));
  if (root.length !== 32) throw new Error('bad root line');

  const keyHash = sha256(Buffer.from(`${origin}\n`), Uint8Array.of(0x01), publicKey).subarray(0, 4);
  const pub = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
    format: 'jwk',
  });
  const sigLines = note
    .slice(sep + 2)
    .split('\n')
    .filter((l) => l !== '');
  let ok = false;
  for (const line of sigLines) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!m) throw new Error(`malformed signature line ${JSON.stringify(line)}`);
    const raw = Buffer.from(m[2]!, 'base64');
    if (m[1] !== origin || raw.length !== 68 || !raw.subarray(0, 4).equals(Buffer.from(keyHash))) continue;
    if (!cryptoVerify(null, Buffer.from(body, 'utf8'), pub, raw.subarray(4)))
      throw new Error('log signature does not verify');
    ok = true;
  }
  if (!ok) throw new Error('note carries no signature by the log key');
  return { origin, size, root, body };
}

export interface AuditResult {
  readonly checkpoint: ParsedCheckpoint;
  readonly note: string;
  /** Entry hashes recomputed from the record bundles, index = seq. */
  readonly entryHashes: Uint8Array[];
  readonly records: Uint8Array[];
  /** The naive tree over the recomputed leaves. */
  readonly tree: NaiveTree;
  /** Hash tiles compared against the recomputed tree. */
  readonly tilesChecked: number;
}

/**
 * Audits `<dir>` (the public log directory) at its current checkpoint, or at `note` if given.
 * Throws on the first discrepancy.
 */
export async function auditLogDir(
  dir: string,
  origin: string,
  publicKey: Uint8Array,
  note?: string,
): Promise<AuditResult> {
  const text = note ?? (await fs.readFile(path.join(dir, 'checkpoint'), 'utf8'));
  const checkpoint = verifyCheckpointNote(text, origin, publicKey);
  const { size } = checkpoint;

  const entryHashes: Uint8Array[] = [];
  const records: Uint8Array[] = [];
  const leaves: Uint8Array[] = [];
  let prior: Uint8Array = new Uint8Array(32);
  for (let n = 0; n * TILE < size; n++) {
    const width = Math.min(TILE, size - n * TILE);
    const recs = decodeFramed(await readTile(dir, 'records', n, width), `records ${n}`).slice(0, width);
    const ents = decodeFramed(await readTile(dir, 'entries', n, width), `entries ${n}`).slice(0, width);
    if (recs.length !== width || ents.length !== width)
      throw new Error(`bundle ${n} has ${recs.length}/${ents.length} items, expected ${width}`);
    for (let i = 0; i < width; i++) {
      const seq = n * TILE + i;
      const seqBytes = Buffer.alloc(8);
      seqBytes.writeBigUInt64BE(BigInt(seq));
      const eh = sha256(DOMAIN, seqBytes, recs[i]!, prior);
      if (!Buffer.from(eh).equals(Buffer.from(ents[i]!)))
        throw new Error(`entry ${seq}: record does not hash to the bundled entry hash`);
      entryHashes.push(eh);
      records.push(recs[i]!);
      leaves.push(naiveLeafHash(eh));
      prior = eh;
    }
  }
  const tree = new NaiveTree(leaves);
  if (!Buffer.from(tree.root(size)).equals(Buffer.from(checkpoint.root)))
    throw new Error(`recomputed root of ${size} entries does not match the checkpoint`);

  // Every hash tile at this size: level L holds hashes of 256^L-leaf subtrees.
  let tilesChecked = 0;
  for (let level = 0; TILE ** level <= size; level++) {
    const span = TILE ** level;
    const count = Math.floor(size / span);
    for (let n = 0; n * TILE < count; n++) {
      const width = Math.min(TILE, count - n * TILE);
      const data = await readTile(dir, level, n, width);
      if (data.length < width * 32) throw new Error(`tile ${level}/${n} is too short`);
      for (let j = 0; j < width; j++) {
        const k = n * TILE + j;
        const want = tree.mth(k * span, (k + 1) * span);
        if (!Buffer.from(data.subarray(j * 32, (j + 1) * 32)).equals(Buffer.from(want))) {
          throw new Error(`tile ${level}/${n} hash ${j} does not match the recomputed tree`);
        }
      }
      tilesChecked++;
    }
  }
  return { checkpoint, note: text, entryHashes, records, tree, tilesChecked };
}

/** Every file under `<dir>/tile`, relative to `dir`, skipping temporary files of interrupted writes. */
export async function listTileFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  async function walk(rel: string): Promise<void> {
    let names: import('node:fs').Dirent[];
    try {
      names = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    for (const d of names) {
      const r = `${rel}/${d.name}`;
      if (d.isDirectory()) await walk(r);
      else if (!d.name.includes('.tmp-')) out.push(r);
    }
  }
  await walk('tile');
  return out.sort();
}

/**
 * Writes `<data>/private/log.key` (mode 0600) from a fixed seed before the log is opened,
 * so the suites run with a reproducible key. The default seed's key strings contain no '+'
 * in their base64 part.
 */
export async function writeTestKey(dataDir: string, origin: string, fill = 7): Promise<void> {
  const { formatPrivateKey } = await import('../../src/keys/local-signer.js');
  await fs.mkdir(path.join(dataDir, 'private'), { recursive: true, mode: 0o700 });
  await fs.writeFile(
    path.join(dataDir, 'private', 'log.key'),
    `${formatPrivateKey(origin, new Uint8Array(32).fill(fill))}\n`,
    { mode: 0o600 },
  );
}
