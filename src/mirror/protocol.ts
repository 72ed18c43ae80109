// The C2SP tlog-mirror wire format: the binary add-entries body (header, then the canonical
// sequence of entry packages aligned to 256 entries, each with its subtree consistency
// proof), the text/x.tlog.mirror-info answer of a 409 or 202, and the status of each refusal.
// Pure: no node:*, no Buffer. add-checkpoint is tlog-witness's (src/witness/protocol.ts).
import { HASH_SIZE, fromBase64, toBase64, u64be } from '../core/hash.js';

export const PACKAGE_WIDTH = 256;
/** "num_hashes, which MUST be at most 63". */
export const MAX_PROOF_HASHES = 63;
export const MIRROR_INFO_CONTENT_TYPE = 'text/x.tlog.mirror-info';
/** "clients SHOULD limit each add-entries request to at most 32 entry packages". */
export const CLIENT_PACKAGES_PER_REQUEST = 32;

export type MirrorStatus = 400 | 403 | 404 | 409 | 413 | 422;

/** A refusal; a 409 carries the mirror-info the client resumes from. */
export class MirrorError extends Error {
  override name = 'MirrorError';
  constructor(
    readonly status: MirrorStatus,
    message: string,
    readonly info?: MirrorInfo,
  ) {
    super(message);
  }
}

/** The three lines of text/x.tlog.mirror-info. */
export interface MirrorInfo {
  /** The tree size of a valid pending checkpoint. */
  readonly size: number;
  readonly next: number;
  readonly ticket: Uint8Array;
}

export function formatMirrorInfo(i: MirrorInfo): string {
  return `${i.size}\n${i.next}\n${toBase64(i.ticket)}\n`;
}

const DECIMAL = /^(0|[1-9][0-9]{0,15})$/;

export function parseMirrorInfo(text: string): MirrorInfo {
  const lines = text.split('\n');
  if (lines.length !== 4 || lines[3] !== '')
    throw new Error('mirror-info must be three lines, each ending in a newline');
  const [size, next, ticket] = lines as [string, string, string];
  if (!DECIMAL.test(size) || !DECIMAL.test(next)) throw new Error('mirror-info sizes must be decimal');
  const t = ticket === '' ? new Uint8Array(0) : fromBase64(ticket);
  if (!t) throw new Error('mirror-info ticket is not base64');
  return { size: Number(size), next: Number(next), ticket: t };
}

export interface AddEntriesHeader {
  readonly origin: string;
  readonly start: number;
  readonly end: number;
  readonly ticket: Uint8Array;
}

/** One package of the canonical sequence: entries [start, end), proven as the subtree [subtreeStart, end). */
export interface PackageSpan {
  readonly subtreeStart: number;
  readonly start: number;
  readonly end: number;
}

/** The canonical sequence of packages for [start, end), from package `from` on. */
export function canonicalPackages(start: number, end: number): PackageSpan[] {
  if (start >= end) return [];
  const roundedStart = start - (start % PACKAGE_WIDTH);
  const out: PackageSpan[] = [];
  for (let s = roundedStart; s < end; s += PACKAGE_WIDTH)
    out.push({ subtreeStart: s, start: Math.max(start, s), end: Math.min(end, s + PACKAGE_WIDTH) });
  return out;
}

const utf8 = new TextEncoder();

function u16(n: number): Uint8Array {
  return new Uint8Array([n >> 8, n & 0xff]);
}

export function encodeHeader(h: AddEntriesHeader): Uint8Array {
  const origin = utf8.encode(h.origin);
  if (origin.length > 0xffff || h.ticket.length > 0xffff) throw new RangeError('origin or ticket too long');
  return concat([u16(origin.length), origin, u64be(h.start), u64be(h.end), u16(h.ticket.length), h.ticket]);
}

export function encodePackage(entries: readonly Uint8Array[], proof: readonly Uint8Array[]): Uint8Array {
  if (proof.length > MAX_PROOF_HASHES) throw new RangeError('too many proof hashes');
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    if (e.length > 0xffff) throw new RangeError('entry longer than 65535 bytes');
    parts.push(u16(e.length), e);
  }
  parts.push(new Uint8Array([proof.length]), ...proof);
  return concat(parts);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The body ended in the middle of a value. */
export class TruncatedError extends Error {
  override name = 'TruncatedError';
}

/**
 * Reads an add-entries body from a stream of chunks, a value at a time, so the mirror can
 * answer before the whole body has arrived and never holds more than one package.
 */
export class AddEntriesReader {
  private buf = new Uint8Array(0);
  private at = 0;
  private done = false;
  private readonly it: AsyncIterator<Uint8Array>;

  constructor(chunks: AsyncIterable<Uint8Array>) {
    this.it = chunks[Symbol.asyncIterator]();
  }

  /** True when `n` more bytes are available; false if the body ends before. */
  private async fill(n: number): Promise<boolean> {
    while (this.buf.length - this.at < n) {
      if (this.done) return false;
      const r = await this.it.next();
      if (r.done) {
        this.done = true;
        return false;
      }
      const rest = this.buf.subarray(this.at);
      const merged = new Uint8Array(rest.length + r.value.length);
      merged.set(rest);
      merged.set(r.value, rest.length);
      this.buf = merged;
      this.at = 0;
    }
    return true;
  }

  private async take(n: number): Promise<Uint8Array> {
    if (!(await this.fill(n))) throw new TruncatedError(`the body ended inside a value of ${n} bytes`);
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  private async u16(): Promise<number> {
    const b = await this.take(2);
    return (b[0]! << 8) | b[1]!;
  }

  private async u64be(): Promise<number> {
    const v = new DataView(Uint8Array.from(await this.take(8)).buffer).getBigUint64(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new MirrorError(400, 'upload bounds beyond 2^53');
    return Number(v);
  }

  async header(): Promise<AddEntriesHeader> {
    const origin = new TextDecoder('utf-8', { fatal: true }).decode(await this.take(await this.u16()));
    const start = await this.u64be();
    const end = await this.u64be();
    const ticket = Uint8Array.from(await this.take(await this.u16()));
    return { origin, start, end, ticket };
  }

  /** True once every byte has been read and the body has ended. */
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }

  /** The next package of `count` entries, or throws TruncatedError if the body ends inside it. */
  async package(count: number): Promise<{ entries: Uint8Array[]; proof: Uint8Array[] }> {
    const entries: Uint8Array[] = [];
    for (let i = 0; i < count; i++) entries.push(Uint8Array.from(await this.take(await this.u16())));
    const n = (await this.take(1))[0]!;
    if (n > MAX_PROOF_HASHES)
      throw new MirrorError(422, `a package carries ${n} proof hashes, more than ${MAX_PROOF_HASHES}`);
    const proof: Uint8Array[] = [];
    for (let i = 0; i < n; i++) proof.push(Uint8Array.from(await this.take(HASH_SIZE)));
    return { entries, proof };
  }
}
