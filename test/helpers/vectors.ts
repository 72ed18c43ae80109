// Typed loader for the tlog test vectors in test/vectors/tlog-vectors.json (data computed
// with Go's reference golang.org/x/mod/sumdb/tlog and note packages, copied into the repo so
// a clone needs nothing beside it).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (this file is test/helpers/vectors.ts). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const vectorsPath = path.join(repoRoot, 'test', 'vectors', 'tlog-vectors.json');

export interface RootVector {
  size: number;
  root: string;
}

export interface InclusionVector {
  index: number;
  size: number;
  path: string[];
}

export interface RfcInclusionVector extends InclusionVector {
  leafHash: string;
}

export interface ConsistencyVector {
  first: number;
  second: number;
  proof: string[];
}

export interface ChainEntryVector {
  seq: number;
  canonicalEntry: string;
  priorEntryHash: string;
  entryHash: string;
  leafHash: string;
  id: string;
  artifactId: string | null;
}

export interface TlogVectors {
  about: string;
  rfc6962: {
    /** Hex leaf inputs d(0)…d(7). */
    leafInputs: string[];
    roots: RootVector[];
    inclusion: RfcInclusionVector[];
    consistency: ConsistencyVector[];
  };
  large: {
    size: number;
    leafInput: string;
    roots: RootVector[];
    inclusion: InclusionVector[];
    consistency: ConsistencyVector[];
  };
  tiles: {
    note: string;
    indexEncoding: Record<string, string>;
    hashTiles: string[];
    entryBundles: string[];
  };
  entries: {
    domainHex: string;
    chain: ChainEntryVector[];
  };
  note: {
    body: string;
    keyId: string;
    privateSeedHex: string;
    publicKeyHex: string;
    signatureBase64: string;
    signedNote: string;
    vkey: string;
  };
}

const HEX = /^(?:[0-9a-f]{2})*$/;
const HASH = /^[0-9a-f]{64}$/;

function fail(where: string, what: string): never {
  throw new Error(`${vectorsPath}: ${where}: ${what}`);
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown, where: string): string {
  if (typeof v !== 'string') fail(where, 'expected a string');
  return v;
}

function int(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) fail(where, 'expected a non-negative integer');
  return v;
}

function hash(v: unknown, where: string): string {
  const s = str(v, where);
  if (!HASH.test(s)) fail(where, 'expected 64 lowercase hex characters');
  return s;
}

function arr(v: unknown, where: string): unknown[] {
  if (!Array.isArray(v)) fail(where, 'expected an array');
  return v;
}

function obj(v: unknown, where: string): Record<string, unknown> {
  if (!isObj(v)) fail(where, 'expected an object');
  return v;
}

const hashes = (v: unknown, where: string): string[] => arr(v, where).map((h, i) => hash(h, `${where}[${i}]`));

function roots(v: unknown, where: string): RootVector[] {
  return arr(v, where).map((r, i) => {
    const o = obj(r, `${where}[${i}]`);
    return { size: int(o.size, `${where}[${i}].size`), root: hash(o.root, `${where}[${i}].root`) };
  });
}

function inclusions(v: unknown, where: string): InclusionVector[] {
  return arr(v, where).map((r, i) => {
    const o = obj(r, `${where}[${i}]`);
    return {
      index: int(o.index, `${where}[${i}].index`),
      size: int(o.size, `${where}[${i}].size`),
      path: hashes(o.path, `${where}[${i}].path`),
    };
  });
}

function consistencies(v: unknown, where: string): ConsistencyVector[] {
  return arr(v, where).map((r, i) => {
    const o = obj(r, `${where}[${i}]`);
    return {
      first: int(o.first, `${where}[${i}].first`),
      second: int(o.second, `${where}[${i}].second`),
      proof: hashes(o.proof, `${where}[${i}].proof`),
    };
  });
}

/** Parses and checks the shape of the vectors file (fails loudly on anything unexpected). */
export function parseVectors(raw: unknown): TlogVectors {
  const top = obj(raw, '$');
  const rfc = obj(top.rfc6962, 'rfc6962');
  const large = obj(top.large, 'large');
  const tiles = obj(top.tiles, 'tiles');
  const entries = obj(top.entries, 'entries');
  const note = obj(top.note, 'note');
  const indexEncoding = obj(tiles.indexEncoding, 'tiles.indexEncoding');
  return {
    about: str(top.about, 'about'),
    rfc6962: {
      leafInputs: arr(rfc.leafInputs, 'rfc6962.leafInputs').map((h, i) => {
        const s = str(h, `rfc6962.leafInputs[${i}]`);
        if (!HEX.test(s)) fail(`rfc6962.leafInputs[${i}]`, 'expected lowercase hex');
        return s;
      }),
      roots: roots(rfc.roots, 'rfc6962.roots'),
      inclusion: arr(rfc.inclusion, 'rfc6962.inclusion').map((r, i) => {
        const [base] = inclusions([r], `rfc6962.inclusion[${i}]`);
        return {
          ...base!,
          leafHash: hash(obj(r, `rfc6962.inclusion[${i}]`).leafHash, `rfc6962.inclusion[${i}].leafHash`),
        };
      }),
      consistency: consistencies(rfc.consistency, 'rfc6962.consistency'),
    },
    large: {
      size: int(large.size, 'large.size'),
      leafInput: str(large.leafInput, 'large.leafInput'),
      roots: roots(large.roots, 'large.roots'),
      inclusion: inclusions(large.inclusion, 'large.inclusion'),
      consistency: consistencies(large.consistency, 'large.consistency'),
    },
    tiles: {
      note: str(tiles.note, 'tiles.note'),
      indexEncoding: Object.fromEntries(
        Object.entries(indexEncoding).map(([k, v]) => [k, str(v, `tiles.indexEncoding.${k}`)]),
      ),
      hashTiles: arr(tiles.hashTiles, 'tiles.hashTiles').map((p, i) => str(p, `tiles.hashTiles[${i}]`)),
      entryBundles: arr(tiles.entryBundles, 'tiles.entryBundles').map((p, i) => str(p, `tiles.entryBundles[${i}]`)),
    },
    entries: {
      domainHex: str(entries.domainHex, 'entries.domainHex'),
      chain: arr(entries.chain, 'entries.chain').map((e, i) => {
        const w = `entries.chain[${i}]`;
        const o = obj(e, w);
        return {
          seq: int(o.seq, `${w}.seq`),
          canonicalEntry: str(o.canonicalEntry, `${w}.canonicalEntry`),
          priorEntryHash: hash(o.priorEntryHash, `${w}.priorEntryHash`),
          entryHash: hash(o.entryHash, `${w}.entryHash`),
          leafHash: hash(o.leafHash, `${w}.leafHash`),
          id: str(o.id, `${w}.id`),
          artifactId: o.artifactId === null ? null : str(o.artifactId, `${w}.artifactId`),
        };
      }),
    },
    note: {
      body: str(note.body, 'note.body'),
      keyId: hash(note.keyId, 'note.keyId'),
      privateSeedHex: hash(note.privateSeedHex, 'note.privateSeedHex'),
      publicKeyHex: hash(note.publicKeyHex, 'note.publicKeyHex'),
      signatureBase64: str(note.signatureBase64, 'note.signatureBase64'),
      signedNote: str(note.signedNote, 'note.signedNote'),
      vkey: str(note.vkey, 'note.vkey'),
    },
  };
}

let cached: TlogVectors | undefined;

/** The vectors, read and checked once per process. */
export function loadVectors(): TlogVectors {
  cached ??= parseVectors(JSON.parse(readFileSync(vectorsPath, 'utf8')));
  return cached;
}

/** Lowercase hex → bytes (throws on odd length or non-hex). */
export function fromHex(s: string): Uint8Array {
  if (!HEX.test(s)) throw new Error(`not lowercase hex: ${JSON.stringify(s)}`);
  return new Uint8Array(Buffer.from(s, 'hex'));
}

/** Bytes → lowercase hex, independent of src/. */
export function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}
