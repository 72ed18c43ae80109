// The LMDB index's row sets (layout 3). Each is one LMDB database of fixed-width values under
// a single key (DUPSORT + DUPFIXED): LMDB packs such values side by side with no per-row
// header or pointer, so a row costs its own bytes, where a key of its own cost 10 more.
// A value starts with the short key of what it indexes (src/index/keys.ts), so a lookup is
// one seek and a scan of the values that share those bytes, in the order below.
import type { Database, RootDatabase } from 'lmdb';
import { SHORT_KEY_BYTES } from './keys.js';

/** Leaves are 5 bytes in a row: a log of up to 2^40 entries. */
const SEQ_BYTES = 5;
export const MAX_SEQ = 2 ** (8 * SEQ_BYTES) - 1;
/** The one key every row of a set sits under. */
const ONE = Buffer.of(0);

/** Values as raw bytes, and as raw bytes for range bounds too (lmdb reads `writeKey` for those). */
const RAW = {
  encode: (v: Buffer) => v,
  decode: (b: Uint8Array, size: number) => Buffer.from(b.subarray(0, size)),
  writeKey: (key: Uint8Array, target: Uint8Array, at: number) => {
    target.set(key, at);
    return at + key.length;
  },
};

/** The options of a query of one key's values from `start` (valuesForKey: the rows under ONE). */
interface Seek {
  readonly key: Buffer;
  readonly valuesForKey: true;
  start: Buffer | undefined;
}

const startsWith = (row: Buffer, prefix: Buffer): boolean =>
  row.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;

export class RowSet {
  private readonly db: Database<Buffer, Buffer>;
  /**
   * One query of the rows, iterated again per lookup with its `start` moved: lmdb reads the
   * options when an iteration begins, and a query made afresh per lookup (getValues) cost an
   * entry?hash answer ~10 µs of CPU more in the server, mostly in collecting its garbage.
   * One lookup at a time uses it; a lookup that begins while another is still iterating
   * (an asynchronous confirm) makes its own.
   */
  private readonly seek: Seek = { key: ONE, valuesForKey: true, start: undefined };
  private readonly seeking: Iterable<Buffer>;
  private seekInUse = false;

  constructor(
    root: RootDatabase<number | Buffer, string>,
    name: string,
    /** Bytes per row. */
    readonly width: number,
  ) {
    this.db = root.openDB<Buffer, Buffer>(name, {
      dupSort: true,
      dupFixed: true,
      keyEncoding: 'binary',
      encoding: 'binary',
      compression: false,
      encoder: RAW,
    } as Parameters<typeof root.openDB>[1]);
    // getRange with valuesForKey is what getValues asks (it copies its options; this keeps them).
    this.seeking = this.db.getRange(this.seek as Parameters<typeof this.db.getRange>[0]) as unknown as Iterable<Buffer>;
  }

  /** Adds a row (inside the caller's transaction); a row already there stays one row. */
  put(row: Buffer): void {
    this.db.putSync(ONE, row);
  }

  /** Removes a row (a test's stale index; nothing in the log removes one). */
  remove(row: Buffer): boolean {
    return this.db.removeSync(ONE, row);
  }

  /** The rows that start with `prefix`, in byte order, read lazily. */
  *startingWith(prefix: Buffer, from: Buffer = prefix): Generator<Buffer> {
    const shared = !this.seekInUse;
    let rows: Iterable<Buffer>;
    if (shared) {
      this.seekInUse = true;
      this.seek.start = from;
      rows = this.seeking;
    } else rows = this.db.getValues(ONE, { start: from });
    try {
      for (const row of rows) {
        if (!startsWith(row, prefix)) return;
        yield row;
      }
    } finally {
      if (shared) this.seekInUse = false;
    }
  }

  /**
   * The first row at or after `prefix` if it starts with `prefix`: one seek, and no
   * generator, for a lookup whose first candidate is usually its answer.
   */
  firstStartingWith(prefix: Buffer): Buffer | undefined {
    if (this.seekInUse) {
      for (const row of this.startingWith(prefix)) return row;
      return undefined;
    }
    this.seek.start = prefix;
    const rows = this.seeking[Symbol.iterator]();
    try {
      const next = rows.next();
      return next.done || !startsWith(next.value, prefix) ? undefined : next.value;
    } finally {
      rows.return?.();
    }
  }

  /** How many rows the set holds. */
  count(): number {
    return this.db.getValuesCount(ONE);
  }
}

// The three row sets. Digest rows: short(digest) ‖ leaf ‖ anchor tag, earliest leaf first.
// Artifact rows: short(artifact id) ‖ (MAX_SEQ − leaf), so the latest leaf comes first.
// Label rows: short(label) ‖ the artifact id's 12 bytes, one per artifact, in artifact id order.
export const DIGEST_ROW = SHORT_KEY_BYTES + SEQ_BYTES + 1;
export const ARTIFACT_ROW = SHORT_KEY_BYTES + SEQ_BYTES;
export const ARTIFACT_ID_BYTES = 12;
export const LABEL_ROW = SHORT_KEY_BYTES + ARTIFACT_ID_BYTES;

export function digestRow(short: Buffer, seq: number, tag: number): Buffer {
  const out = Buffer.allocUnsafe(DIGEST_ROW);
  short.copy(out, 0, 0, SHORT_KEY_BYTES);
  out.writeUIntBE(seq, SHORT_KEY_BYTES, SEQ_BYTES);
  out[DIGEST_ROW - 1] = tag;
  return out;
}

export const digestRowSeq = (r: Buffer) => r.readUIntBE(SHORT_KEY_BYTES, SEQ_BYTES);
export const digestRowTag = (r: Buffer) => r[DIGEST_ROW - 1]!;

export function artifactRow(short: Buffer, seq: number): Buffer {
  const out = Buffer.allocUnsafe(ARTIFACT_ROW);
  short.copy(out, 0, 0, SHORT_KEY_BYTES);
  out.writeUIntBE(MAX_SEQ - seq, SHORT_KEY_BYTES, SEQ_BYTES);
  return out;
}

export const artifactRowSeq = (r: Buffer) => MAX_SEQ - r.readUIntBE(SHORT_KEY_BYTES, SEQ_BYTES);

/** `artifactIdHex`: the 24 hex digits after `art_`. */
export function labelRow(short: Buffer, artifactIdHex: string): Buffer {
  const out = Buffer.allocUnsafe(LABEL_ROW);
  short.copy(out, 0, 0, SHORT_KEY_BYTES);
  out.write(artifactIdHex, SHORT_KEY_BYTES, 'hex');
  return out;
}

export const labelRowArtifactId = (r: Buffer) => `art_${r.toString('hex', SHORT_KEY_BYTES)}`;
