// JSON response bodies written as bytes. The hot views (an entry with its proof, a
// consistency proof) are mostly 64-character hex hashes around a checkpoint view that is
// the same for every request until the next publish; writing the hashes straight into one
// buffer, and the checkpoint as bytes serialised once, skips building an object graph of
// hex strings that JSON.stringify walks and the socket then encodes again. The bytes are
// exactly those of JSON.stringify(view) (test/api/json.test.ts checks this).

/** Two ASCII hex digits per byte value. */
const HEX_DIGITS = new TextEncoder().encode(
  Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0')).join(''),
);
const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;

/** Writes bytes [from, to) as a quoted hex string at `at` (the room is reserved); returns the end. */
function writeQuotedHex(buf: Buffer, at: number, bytes: Uint8Array, from: number, to: number): number {
  buf[at++] = QUOTE;
  for (let i = from; i < to; i++) {
    const d = 2 * bytes[i]!;
    buf[at++] = HEX_DIGITS[d]!;
    buf[at++] = HEX_DIGITS[d + 1]!;
  }
  buf[at++] = QUOTE;
  return at;
}

/** Already-serialised JSON, copied into a body as it is. */
export class JsonFragment {
  readonly bytes: Buffer;

  constructor(value: unknown) {
    this.bytes = Buffer.from(JSON.stringify(value));
  }
}

/** A writer's scratch space between uses, so a body costs one right-sized copy (pooled when small). */
let spare: Buffer | undefined;

/** Writes one JSON object, field by field; keys must be plain ASCII names (no escaping). */
export class JsonObjectWriter {
  private buf: Buffer;
  private at = 0;
  private fields = 0;

  constructor() {
    this.buf = spare ?? Buffer.allocUnsafeSlow(16 * 1024);
    spare = undefined;
    this.buf[this.at++] = 0x7b; // {
  }

  number(key: string, n: number): this {
    this.key(key);
    this.ascii(JSON.stringify(n));
    return this;
  }

  hex(key: string, hash: Uint8Array): this {
    this.key(key);
    this.quotedHex(hash);
    return this;
  }

  hexList(key: string, hashes: readonly Uint8Array[]): this {
    this.key(key);
    // Room for the whole list at once: a proof's 20-odd hashes are then written in one loop.
    let size = 2;
    for (let i = 0; i < hashes.length; i++) size += 2 * hashes[i]!.length + 3;
    this.reserve(size);
    const buf = this.buf;
    let at = this.at;
    buf[at++] = 0x5b; // [
    for (let i = 0; i < hashes.length; i++) {
      if (i > 0) buf[at++] = COMMA;
      at = writeQuotedHex(buf, at, hashes[i]!, 0, hashes[i]!.length);
    }
    buf[at++] = 0x5d; // ]
    this.at = at;
    return this;
  }

  /** As hexList, of hashes of `size` bytes given back to back in `packed`. */
  packedHexList(key: string, packed: Uint8Array, size: number): this {
    this.key(key);
    const count = packed.length / size;
    this.reserve(2 + count * (2 * size + 3));
    const buf = this.buf;
    let at = this.at;
    buf[at++] = 0x5b; // [
    for (let from = 0; from < packed.length; from += size) {
      if (from > 0) buf[at++] = COMMA;
      at = writeQuotedHex(buf, at, packed, from, from + size);
    }
    buf[at++] = 0x5d; // ]
    this.at = at;
    return this;
  }

  /** A field whose value was serialised beforehand. */
  fragment(key: string, json: JsonFragment): this {
    this.key(key);
    this.reserve(json.bytes.length);
    json.bytes.copy(this.buf, this.at);
    this.at += json.bytes.length;
    return this;
  }

  /** A field whose value is `head`, the bytes `body` (already JSON) and `tail`; head and tail ASCII. */
  spliced(key: string, head: string, body: Uint8Array, tail: string): this {
    this.key(key);
    this.ascii(head);
    this.reserve(body.length);
    this.buf.set(body, this.at);
    this.at += body.length;
    this.ascii(tail);
    return this;
  }

  /** Any other value, through JSON.stringify (undefined values are left out, as it does). */
  value(key: string, v: unknown): this {
    const json = JSON.stringify(v) as string | undefined;
    if (json === undefined) return this;
    this.key(key);
    this.reserve(Buffer.byteLength(json));
    this.at += this.buf.write(json, this.at);
    return this;
  }

  /** The finished object; the writer is spent. */
  end(): Buffer {
    this.byte(0x7d); // }
    const body = Buffer.allocUnsafe(this.at);
    this.buf.copy(body, 0, 0, this.at);
    spare = this.buf;
    return body;
  }

  private key(key: string): void {
    if (this.fields++ > 0) this.byte(COMMA);
    this.byte(QUOTE);
    this.ascii(key);
    this.byte(QUOTE);
    this.byte(COLON);
  }

  private quotedHex(bytes: Uint8Array): void {
    this.reserve(2 * bytes.length + 2);
    this.at = writeQuotedHex(this.buf, this.at, bytes, 0, bytes.length);
  }

  private ascii(s: string): void {
    this.reserve(s.length);
    for (let i = 0; i < s.length; i++) this.buf[this.at++] = s.charCodeAt(i);
  }

  private byte(b: number): void {
    this.reserve(1);
    this.buf[this.at++] = b;
  }

  private reserve(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.at + n));
    this.buf.copy(grown, 0, 0, this.at);
    this.buf = grown;
  }
}
