// The audit's check of one bundle (src/read/audit.ts): its records against its entry hashes
// (chained from `prior`, the entry hash before the bundle), each record's shape, the leaves
// against the level-0 tile. Pure, so the audit can run it on worker threads
// (src/read/bundle-check-worker.ts), bundles side by side; what links bundles (the chain's
// start, timestamps across a boundary, the tiles above) the audit checks in order.
import canonicalizeCjs from 'canonicalize';
import { artifactId, entryHash } from '../core/entry.js';
import { bytesEqual, leafHash } from '../core/hash.js';
import { TILE_WIDTH, TileFormatError, tilePath } from '../core/tiles.js';
import { decodeBundle } from '../core/bundle.js';

const canonicalize = canonicalizeCjs as unknown as (value: unknown) => string | undefined;

export interface AuditFailure {
  /** The first object found wrong (tile/…, or `checkpoint`). */
  readonly object: string;
  /** The leaf index concerned, when one is. */
  readonly seq?: number;
  readonly message: string;
}

/** Bundle n of a tree (`w` items): its three objects and the entry hash before it. */
export interface BundleInput {
  readonly n: number;
  readonly w: number;
  readonly entries: Uint8Array;
  readonly records: Uint8Array;
  readonly tile0: Uint8Array;
  readonly prior: Uint8Array;
}

export interface BundleVerdict {
  /** The recomputed leaves (w × 32 bytes), when the bundle checks. */
  readonly row?: Uint8Array;
  /** The first wrong object, if any. */
  readonly failure?: AuditFailure;
  /** Item 0's timestamp when item 0 checked (the audit compares it with the bundle before). */
  readonly firstTimestamp?: string;
  readonly lastTimestamp?: string;
  /** The last entry's hash: the next bundle's chain starts from it. */
  readonly lastEntryHash?: Uint8Array;
}

const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HEX64 = /^[0-9a-f]{64}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Problems with one record beyond its hash: shape, canonical form, artifact id. */
function recordProblem(bytes: Uint8Array): { problem?: string; timestamp?: string } {
  let text: string;
  let value: Record<string, unknown>;
  try {
    text = utf8.decode(bytes);
    value = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { problem: 'is not UTF-8 JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { problem: 'is not a JSON object' };
  if (value.v !== 1) return { problem: 'has no "v": 1' };
  for (const k of ['type', 'result', 'digest', 'timestamp'] as const)
    if (typeof value[k] !== 'string') return { problem: `has no string "${k}"` };
  if (!HEX64.test(value.digest as string)) return { problem: 'has a digest that is not 64 lowercase hex' };
  if (!TS.test(value.timestamp as string))
    return { problem: 'has a timestamp that is not ISO 8601 UTC with milliseconds' };
  if ('id' in value || 'proof' in value)
    return { problem: 'contains "id" or "proof", which are not part of the canonical entry' };
  if (value.artifact !== undefined) {
    const scope = typeof value.scope === 'string' ? value.scope : '';
    if (typeof value.artifact !== 'string' || value.artifactId !== artifactId(value.artifact, scope))
      return { problem: 'has an artifactId that does not match its artifact and scope' };
  }
  if (canonicalize(value) !== text) return { problem: 'is not in RFC 8785 canonical form' };
  return { timestamp: value.timestamp as string };
}

/** The index of the first 32-byte hash where `a` and `b` differ. */
export function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length) / 32;
  for (let j = 0; j < n; j++)
    if (!bytesEqual(a.subarray(32 * j, 32 * j + 32), b.subarray(32 * j, 32 * j + 32))) return j;
  return n;
}

class Stop extends Error {
  constructor(readonly failure: AuditFailure) {
    super(failure.message);
  }
}

/** Checks bundle `input.n`; the first failure, or the recomputed leaves. */
export function checkBundle(input: BundleInput): BundleVerdict {
  let firstTimestamp: string | undefined;
  try {
    return { ...leaves(input, (ts) => (firstTimestamp ??= ts)), firstTimestamp };
  } catch (e) {
    if (e instanceof Stop) return { failure: e.failure, ...(firstTimestamp ? { firstTimestamp } : {}) };
    throw e;
  }
}

function decode(data: Uint8Array, path: string, n: number, w: number): Uint8Array[] {
  try {
    const items = decodeBundle(data, path);
    if (items.length < w)
      throw new Stop({
        object: path,
        seq: n * TILE_WIDTH + items.length,
        message: `${path} has ${items.length} items, not ${w}`,
      });
    return items.slice(0, w);
  } catch (e) {
    if (e instanceof TileFormatError) throw new Stop({ object: path, seq: n * TILE_WIDTH, message: e.message });
    throw e;
  }
}

function leaves(
  { n, w, entries: entriesData, records: recordsData, tile0, prior: start }: BundleInput,
  onTimestamp: (ts: string) => void,
): { row: Uint8Array; lastTimestamp: string; lastEntryHash: Uint8Array } {
  const ePath = tilePath({ kind: 'entries', index: n, width: w });
  const rPath = tilePath({ kind: 'records', index: n, width: w });
  const tPath = tilePath({ kind: 0, index: n, width: w });
  const entries = decode(entriesData, ePath, n, w);
  const records = decode(recordsData, rPath, n, w);
  if (tile0.length !== w * 32)
    throw new Stop({
      object: tPath,
      seq: n * TILE_WIDTH,
      message: `${tPath} has ${tile0.length} bytes, not ${w * 32}`,
    });
  const row = new Uint8Array(w * 32);
  let prior = start;
  let lastTimestamp = '';
  for (let i = 0; i < w; i++) {
    const seq = n * TILE_WIDTH + i;
    const record = records[i]!;
    const eh = entryHash(seq, record, prior);
    const leaf = leafHash(eh);
    if (!bytesEqual(eh, entries[i]!)) {
      const tileLeaf = tile0.subarray(32 * i, 32 * i + 32);
      if (bytesEqual(leaf, tileLeaf))
        throw new Stop({
          object: ePath,
          seq,
          message: `${ePath} item ${i} (entry ${seq}) is wrong: the record chain and the hash tile agree on a different entry hash`,
        });
      if (bytesEqual(leafHash(entries[i]!), tileLeaf))
        throw new Stop({
          object: rPath,
          seq,
          message: `record ${seq} (${rPath} item ${i}) does not hash to its entry hash: the record was altered or the chain is broken`,
        });
      throw new Stop({
        object: rPath,
        seq,
        message: `entry ${seq}: the record (${rPath}), the entry hash (${ePath}) and the leaf (${tPath}) all disagree`,
      });
    }
    const { problem, timestamp } = recordProblem(record);
    if (problem) throw new Stop({ object: rPath, seq, message: `record ${seq} (${rPath} item ${i}) ${problem}` });
    if (timestamp! < lastTimestamp)
      throw new Stop({
        object: rPath,
        seq,
        message: `record ${seq} (${rPath} item ${i}) has a timestamp earlier than entry ${seq - 1}'s`,
      });
    if (i === 0) onTimestamp(timestamp!);
    lastTimestamp = timestamp!;
    row.set(leaf, 32 * i);
    prior = eh;
  }
  if (!bytesEqual(row, tile0)) {
    const j = firstDifference(tile0, row);
    throw new Stop({
      object: tPath,
      seq: n * TILE_WIDTH + j,
      message: `${tPath} hash ${j} (leaf ${n * TILE_WIDTH + j}) differs from the leaf recomputed from entry ${n * TILE_WIDTH + j}`,
    });
  }
  return { row, lastTimestamp, lastEntryHash: prior };
}
