// The short key is part of the index's on-disk layout: rows written before must still be
// found, whatever computes it. It is the first 6 bytes of SHA-256(salt ‖ UTF-8 of the value).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SHORT_KEY_BYTES, shortKey } from '../../src/index/keys.js';

describe('shortKey', () => {
  it('is the first bytes of SHA-256(salt ‖ value), for ASCII and non-ASCII values, written where asked', () => {
    const salt = Uint8Array.from({ length: 16 }, (_, i) => i * 17);
    const values = [
      'ab'.repeat(32),
      'art_0123456789abcdef01234567',
      'étiquette ✓ \u{1F600}',
      '',
      'é'.repeat(900), // more than the reused input buffer holds
      'a'.repeat(1000), // under it, though 3 bytes per unit would not be
      'cd'.repeat(32),
    ];
    // Twice over: inputs of one size after another reuse (or remake) the buffer's view.
    for (const value of [...values, ...values]) {
      const expected = createHash('sha256').update(salt).update(value, 'utf8').digest().subarray(0, SHORT_KEY_BYTES);
      const into = Buffer.alloc(SHORT_KEY_BYTES + 3, 0xee);
      shortKey(salt, value, into, 2);
      expect(into.subarray(2, 2 + SHORT_KEY_BYTES)).toEqual(expected);
      expect([into[0], into[1], into[2 + SHORT_KEY_BYTES]]).toEqual([0xee, 0xee, 0xee]);
    }
  });
});
