// Whether a record carries a digest or an artifact id, read from its bytes. An entry?hash
// lookup checks every candidate the index names against its record; parsing the record
// (UTF-8 decoding and JSON.parse) cost that route about 3 µs a request, more than the rest
// of the check. A record is canonical JSON (RFC 8785: no whitespace, a string escapes only
// `"`, `\` and control characters), so without a backslash its strings end at the next
// quote and a top-level field can be found by tracking depth alone. Anything else (an
// escape, whitespace, not an object) is left to JSON.parse: this gives the parser's answer
// or none (test/api/record-fields.test.ts compares the two on a corpus).

const QUOTE = 0x22;
const COLON = 0x3a;
const COMMA = 0x2c;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** Whether bytes [from, to) of `b` are the ASCII string `s`. */
function bytesAre(b: Uint8Array, from: number, to: number, s: string): boolean {
  if (to - from !== s.length) return false;
  for (let i = 0; i < s.length; i++) if (b[from + i] !== s.charCodeAt(i)) return false;
  return true;
}

/**
 * Where the value of the top-level string field `key` (plain ASCII) is in record `b`: the
 * [start, end) of its characters, the last one if the key repeats (as JSON.parse keeps).
 * Null when the record has no such field; undefined when the bytes need a real parser.
 */
export function topLevelString(b: Uint8Array, key: string): [number, number] | null | undefined {
  if (b[0] !== OPEN_OBJECT || b.indexOf(BACKSLASH) >= 0) return undefined;
  let depth = 0;
  let keyNext = false;
  let found: [number, number] | null = null;
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      const end = b.indexOf(QUOTE, i + 1);
      if (end < 0) return undefined;
      if (depth === 1 && keyNext) {
        keyNext = false;
        if (b[end + 1] !== COLON) return undefined;
        if (bytesAre(b, i + 1, end, key)) {
          // A field that is not a string is the parser's to judge.
          const close = b[end + 2] === QUOTE ? b.indexOf(QUOTE, end + 3) : -1;
          if (close < 0) return undefined;
          found = [end + 3, close];
          i = close;
          continue;
        }
        i = end + 1;
        continue;
      }
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth++;
      keyNext = depth === 1;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
      if (depth === 0 && i !== b.length - 1) return undefined;
    } else if (c === COMMA) {
      keyNext = depth === 1;
    } else if (c <= 0x20) {
      return undefined; // whitespace (or a control byte): not canonical
    }
  }
  return depth === 0 ? found : undefined;
}

/**
 * Whether record `b`'s top-level string field `key` is exactly `value` (ASCII); undefined
 * when only a parser can tell (then parse the record).
 */
export function recordFieldIs(b: Uint8Array, key: string, value: string): boolean | undefined {
  const at = topLevelString(b, key);
  if (at === undefined) return undefined;
  return at !== null && bytesAre(b, at[0], at[1], value);
}
