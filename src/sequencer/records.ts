// Anchor requests packed as bytes while they wait in the pool. A waiting request costs its
// record (about 120 bytes for a typical anchor) in one buffer per run of requests, instead
// of an object and its strings on the heap (about 400 bytes, more while a caller's template
// strings are unflattened). The same bytes go to the sequencing worker as one copy.
//
// Record: flags (u8), then type, result, digest, and artifact / scope / tenant when present,
// each a u16 length and UTF-8 bytes — except a lowercase hex digest, packed as its 32 bytes.
// A request with a string that is not well-formed Unicode is kept as JSON instead (UTF-8
// would replace its lone surrogates; JSON escapes them, as the canonical entry does).
import type { AnchorRequest } from '../core/anchor.js';
import { MAX_CANONICAL_ENTRY_BYTES } from '../core/entry.js';
import { UnrecordableRequestError } from './contract.js';

const HAS_ARTIFACT = 1;
const HAS_SCOPE = 2;
const HAS_TENANT = 4;
const PACKED_DIGEST = 8;
const AS_JSON = 16;

const PACKABLE_DIGEST = /^[0-9a-f]{64}$/;
const LABELS = ['artifact', 'scope', 'tenant'] as const;
const FLAGS = [HAS_ARTIFACT, HAS_SCOPE, HAS_TENANT] as const;

function field(r: AnchorRequest, name: keyof AnchorRequest, optional: boolean): string | undefined {
  const v: unknown = r[name];
  if (v === undefined && optional) return undefined;
  if (typeof v !== 'string')
    throw new UnrecordableRequestError(`the request cannot be made an entry: ${name} is ${typeof v}, not a string`);
  // The canonical entry holds every field, so one this long can never fit a bundle.
  if (v.length > MAX_CANONICAL_ENTRY_BYTES) throw new UnrecordableRequestError('canonical entry exceeds 65,535 bytes');
  return v;
}

/**
 * Records appended back to back in a growing buffer; `ends[i]` is where record i ends.
 * Written only until the run is sent to the worker, read-only afterwards.
 */
export class RecordBuffer {
  private buf: Buffer;
  private used = 0;
  private endsBuf: Uint32Array;
  private n = 0;

  constructor(capacityRecords = 256) {
    this.buf = Buffer.allocUnsafeSlow(capacityRecords * 128);
    this.endsBuf = new Uint32Array(capacityRecords);
  }

  get count(): number {
    return this.n;
  }

  /** Appends a request's record; throws UnrecordableRequestError if it can never be an entry. */
  append(r: AnchorRequest): void {
    const type = field(r, 'type', false)!;
    const result = field(r, 'result', false)!;
    const digest = field(r, 'digest', false)!;
    const labels = LABELS.map((name) => field(r, name, true));
    const strings = [type, result, digest, ...labels];
    if (!strings.every((s) => s === undefined || s.isWellFormed())) {
      const json = JSON.stringify([type, result, digest, ...labels.map((s) => s ?? null)]);
      this.reserve(1 + 4 + json.length * 3);
      this.buf[this.used] = AS_JSON;
      this.used = this.putString(json, this.used + 1, 4);
      this.close();
      return;
    }
    let flags = 0;
    let need = 1;
    const packed = PACKABLE_DIGEST.test(digest);
    if (packed) flags |= PACKED_DIGEST;
    for (const s of packed ? [type, result] : [type, result, digest]) need += 2 + s.length * 3;
    if (packed) need += 32;
    labels.forEach((s, i) => {
      if (s === undefined) return;
      flags |= FLAGS[i]!;
      need += 2 + s.length * 3;
    });
    this.reserve(need);
    const start = this.used;
    this.buf[start] = flags;
    let at = this.putString(type, start + 1, 2);
    at = this.putString(result, at, 2);
    if (packed) at += this.buf.write(digest, at, 'hex');
    else at = this.putString(digest, at, 2);
    for (const s of labels) if (s !== undefined) at = this.putString(s, at, 2);
    if (at === -1) {
      this.used = start;
      throw new UnrecordableRequestError('canonical entry exceeds 65,535 bytes');
    }
    this.used = at;
    this.close();
  }

  /** Records [from, to) as a fresh buffer with their own ends (what the worker is sent). */
  copy(from: number, to: number): { bytes: Uint8Array; ends: Uint32Array } {
    const base = from === 0 ? 0 : this.endsBuf[from - 1]!;
    const ends = new Uint32Array(to - from);
    for (let i = from; i < to; i++) ends[i - from] = this.endsBuf[i]! - base;
    return { bytes: new Uint8Array(this.buf.subarray(base, to === 0 ? 0 : this.endsBuf[to - 1]!)), ends };
  }

  /** Record i decoded again (`repeats`: reuse strings that repeat from record to record). */
  request(i: number, repeats?: Repeats): AnchorRequest {
    return decodeRecord(this.buf, i === 0 ? 0 : this.endsBuf[i - 1]!, this.endsBuf[i]!, repeats);
  }

  /**
   * Gives back memory a sealed buffer will never use — when that is most of it (a run cut
   * short by a quiet moment); a full run's buffer is kept as it is rather than copied again.
   */
  trim(): void {
    if (this.buf.length > this.used * 2) this.buf = Buffer.from(this.buf.subarray(0, this.used));
    if (this.endsBuf.length > this.n) this.endsBuf = this.endsBuf.slice(0, this.n);
  }

  private close(): void {
    if (this.n === this.endsBuf.length) {
      const ends = new Uint32Array(this.n * 2);
      ends.set(this.endsBuf);
      this.endsBuf = ends;
    }
    this.endsBuf[this.n++] = this.used;
  }

  private reserve(extra: number): void {
    if (this.used + extra <= this.buf.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.used + extra));
    this.buf.copy(grown, 0, 0, this.used);
    this.buf = grown;
  }

  /** Writes a length-prefixed UTF-8 string; -1 (poisoning `at`) if it is longer than the prefix allows. */
  private putString(s: string, at: number, prefix: 2 | 4): number {
    if (at === -1) return -1;
    const n = this.buf.write(s, at + prefix, 'utf8');
    if (prefix === 2) {
      if (n > 0xffff) return -1;
      this.buf.writeUInt16BE(n, at);
    } else this.buf.writeUInt32BE(n, at);
    return at + prefix + n;
  }
}

/**
 * The last string decoded for each field that tends to repeat (type, result, scope, tenant),
 * handed out again while the next record holds the same bytes: a batch's entry objects then
 * share one string per value instead of each holding copies (they are built by the tens of
 * thousands per batch).
 */
export class Repeats {
  private readonly last = [0, 1, 2, 3].map(() => ({
    bytes: undefined as Buffer | undefined,
    at: 0,
    length: -1,
    value: '',
  }));

  decode(field: number, b: Buffer, at: number, length: number): string {
    const l = this.last[field]!;
    if (l.length === length && l.bytes && b.compare(l.bytes, l.at, l.at + length, at, at + length) === 0)
      return l.value;
    l.bytes = b;
    l.at = at;
    l.length = length;
    l.value = b.toString('utf8', at, at + length);
    return l.value;
  }
}

/** Decodes the record in `bytes[start, end)`. */
export function decodeRecord(bytes: Uint8Array, start: number, end: number, repeats?: Repeats): AnchorRequest {
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const flags = b[start]!;
  let at = start + 1;
  if (flags & AS_JSON) {
    const n = b.readUInt32BE(at);
    const [type, result, digest, ...labels] = JSON.parse(b.toString('utf8', at + 4, at + 4 + n)) as [
      string,
      string,
      string,
      ...(string | null)[],
    ];
    const r: { -readonly [K in keyof AnchorRequest]: AnchorRequest[K] } = { type, result, digest };
    LABELS.forEach((name, i) => {
      if (labels[i] != null) r[name] = labels[i]!;
    });
    return r;
  }
  /** The next string; `field` names a repeating one (see Repeats). */
  const str = (field?: number): string => {
    const n = b.readUInt16BE(at);
    at += 2 + n;
    return repeats && field !== undefined ? repeats.decode(field, b, at - n, n) : b.toString('utf8', at - n, at);
  };
  const type = str(0);
  const result = str(1);
  let digest: string;
  if (flags & PACKED_DIGEST) {
    digest = b.toString('hex', at, at + 32);
    at += 32;
  } else digest = str();
  const r: { -readonly [K in keyof AnchorRequest]: AnchorRequest[K] } = { type, result, digest };
  if (flags & HAS_ARTIFACT) r.artifact = str();
  if (flags & HAS_SCOPE) r.scope = str(2);
  if (flags & HAS_TENANT) r.tenant = str(3);
  if (at !== end) throw new RangeError('malformed request record');
  return r;
}
