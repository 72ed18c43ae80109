// recordFieldIs reads a record's top-level digest or artifact id from its bytes: wherever it
// answers, it must be JSON.parse's answer, on canonical records and on every trap a byte
// search would fall into (the name nested, inside a string, repeated, escaped, spaced).
import { describe, expect, it } from 'vitest';
import { canonicalEntryBytes } from '../../src/core/entry.js';
import { recordFieldIs, topLevelString } from '../../src/api/record-fields.js';

const D = 'ab'.repeat(32);
const E = 'cd'.repeat(32);
const utf8 = (s: string) => new TextEncoder().encode(s);

/** JSON.parse's answer: whether the object's own top-level `key` is the string `value`. */
const parsed = (text: string, key: string, value: string) =>
  (JSON.parse(text) as Record<string, unknown>)[key] === value;

// Each record holds D or E somewhere: only a top-level "digest" (the last, if repeated) counts.
const TRAPS = [
  `{"digest":"${D}"}`,
  `{"digest":"${E}"}`,
  `{"artifact":"digest","digest":"${E}","note":"${D}"}`,
  `{"a":{"digest":"${D}"},"digest":"${E}"}`,
  `{"a":{"digest":"${D}"}}`,
  `{"a":["digest","${D}"],"b":[{"digest":"${D}"}]}`,
  `{"x":"\\"digest\\":\\"${D}\\"","digest":"${E}"}`,
  `{"x\\"digest":"${D}"}`,
  `{"d\\u0069gest":"${D}"}`,
  `{"digest":"\\u0061${D.slice(1)}"}`,
  `{"digest":"${E}","digest":"${D}"}`,
  `{"digest":"${D}","digest":"${E}"}`,
  `{ "digest" : "${D}" }`,
  `{"digest":["${D}"]}`,
  `{"digest":{"digest":"${D}"}}`,
  `{"digest":1,"n":"${D}"}`,
  `{"digests":"${D}","digest":"${E}"}`,
  `{"digest":"${D}x"}`,
  `{"a":[[{"b":"}"}]],"digest":"${D}","c":"{"}`,
  `{"a":"é${D}","digest":"${D}","z":"\u{1F600}"}`,
  `{}`,
];

describe('recordFieldIs', () => {
  it('answers as JSON.parse does wherever it answers, on every trap', () => {
    let answered = 0;
    for (const text of TRAPS) {
      for (const value of [D, E]) {
        const got = recordFieldIs(utf8(text), 'digest', value);
        if (got === undefined) continue;
        answered++;
        expect(got, `${text} / ${value.slice(0, 2)}`).toBe(parsed(text, 'digest', value));
      }
    }
    // The plain records are answered from the bytes (a parser only for escapes and spacing).
    expect(answered).toBeGreaterThan(24);
  });

  it('answers canonical entries from their bytes, the digest and the artifact id', () => {
    const entry = {
      v: 1 as const,
      type: 'ledger_anchor',
      result: 'Anchored',
      digest: D,
      timestamp: '2026-11-27T00:00:00.000Z',
      artifact: 'digest',
      artifactId: 'art_0123456789abcdef01234567',
      meta: { digest: E, list: [E, { artifactId: 'art_x' }] },
    };
    const bytes = canonicalEntryBytes(entry);
    expect(recordFieldIs(bytes, 'digest', D)).toBe(true);
    expect(recordFieldIs(bytes, 'digest', E)).toBe(false);
    expect(recordFieldIs(bytes, 'artifactId', entry.artifactId)).toBe(true);
    expect(recordFieldIs(bytes, 'artifactId', 'art_x')).toBe(false);
    expect(recordFieldIs(canonicalEntryBytes({ ...entry, artifactId: undefined }), 'artifactId', 'art_x')).toBe(false);
  });

  it('leaves to the parser what only a parser reads: escapes, whitespace, a non-string value, broken JSON', () => {
    for (const text of [
      `{"d\\u0069gest":"${D}"}`,
      `{ "digest":"${D}"}`,
      `{"digest":1}`,
      `{"digest":"${D}"`,
      `{"digest":"${D}"}{}`,
      `["digest"]`,
      `{"digest`,
    ])
      expect(topLevelString(utf8(text), 'digest'), text).toBeUndefined();
  });
});
