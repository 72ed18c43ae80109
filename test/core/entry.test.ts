// src/core/entry.ts: canonical entries (RFC 8785), the entry_hash chain, entry and artifact ids.
import { describe, expect, it } from 'vitest';
import {
  ARTIFACT_ID,
  type CanonicalEntry,
  ENTRY_DOMAIN,
  MAX_CANONICAL_ENTRY_BYTES,
  ZERO_HASH,
  artifactId,
  canonicalEntryBytes,
  entryHash,
  entryId,
  parseCanonicalEntry,
  parseEntryId,
  presentEntry,
} from '../../src/core/entry.js';
import { leafHash } from '../../src/core/hash.js';
import { naiveLeafHash, sha256 } from '../helpers/naive.js';
import { fromHex, hex, loadVectors } from '../helpers/vectors.js';

const { entries } = loadVectors();
const utf8 = new TextEncoder();

describe('entry vectors', () => {
  it('domain is "stele/entry/v1\\n" (15 bytes) and equals domainHex', () => {
    expect(entries.domainHex).toBe('7374656c652f656e7472792f76310a');
    expect(hex(ENTRY_DOMAIN)).toBe(entries.domainHex);
    expect(ENTRY_DOMAIN.length).toBe(15);
    expect(hex(ZERO_HASH)).toBe('00'.repeat(32));
  });

  it('has a three-entry chain starting at seq 0', () => {
    expect(entries.chain.map((e) => e.seq)).toEqual([0, 1, 2]);
    expect(entries.chain[0]!.priorEntryHash).toBe('00'.repeat(32));
  });

  it('canonicalEntryBytes reproduces every canonicalEntry byte for byte', () => {
    for (const v of entries.chain) {
      const bytes = utf8.encode(v.canonicalEntry);
      const parsed = parseCanonicalEntry(bytes);
      expect(hex(canonicalEntryBytes(parsed))).toBe(hex(bytes));
      // key order and id/proof of the API view must not matter
      const shuffled = Object.fromEntries(Object.entries(parsed).reverse()) as CanonicalEntry;
      expect(hex(canonicalEntryBytes(shuffled))).toBe(hex(bytes));
      const withIdAndProof = presentEntry(parsed, v.seq, fromHex(v.entryHash));
      expect(withIdAndProof.id).toBe(v.id);
      expect(withIdAndProof.proof).toEqual({ entryHash: v.entryHash });
      expect(hex(canonicalEntryBytes(withIdAndProof))).toBe(hex(bytes));
    }
  });

  it('entry_hash chain, leaf hashes and ids match', () => {
    let prior: Uint8Array = ZERO_HASH;
    for (const v of entries.chain) {
      expect(hex(prior)).toBe(v.priorEntryHash);
      const canonical = utf8.encode(v.canonicalEntry);
      const h = entryHash(v.seq, canonical, prior);
      expect(hex(h)).toBe(v.entryHash);
      // independently: SHA-256(domain ‖ seq u64 BE ‖ canonical ‖ prior)
      const seq = new Uint8Array(8);
      new DataView(seq.buffer).setBigUint64(0, BigInt(v.seq));
      expect(hex(sha256(fromHex(entries.domainHex), seq, canonical, prior))).toBe(v.entryHash);
      expect(hex(leafHash(h))).toBe(v.leafHash);
      expect(hex(naiveLeafHash(h))).toBe(v.leafHash);
      expect(entryId(v.seq, h)).toBe(v.id);
      prior = h;
    }
  });

  it('artifact ids match for entries with an artifact', () => {
    let checked = 0;
    for (const v of entries.chain) {
      const e = parseCanonicalEntry(utf8.encode(v.canonicalEntry));
      if (v.artifactId === null) {
        expect(e.artifact).toBeUndefined();
        expect(e.artifactId).toBeUndefined();
        continue;
      }
      expect(typeof e.artifact).toBe('string');
      expect(artifactId(e.artifact!, e.scope)).toBe(v.artifactId);
      expect(e.artifactId).toBe(v.artifactId);
      expect(v.artifactId).toMatch(ARTIFACT_ID);
      checked++;
    }
    expect(checked).toBe(2);
    // scope absent and scope "" give the same id (entry 2 has scope "")
    expect(artifactId('résumé "final".pdf')).toBe('art_974bb2335be373dc49156f4e');
    expect(artifactId('résumé "final".pdf', '')).toBe('art_974bb2335be373dc49156f4e');
    expect(artifactId('release-1.2.3.tgz', 'release')).toBe('art_215f39b42458ffe2e3278e21');
    expect(artifactId('release-1.2.3.tgz')).not.toBe('art_215f39b42458ffe2e3278e21');
    expect(artifactId('x', 'a')).toBe(`art_${hex(sha256(utf8.encode('a\nx'))).slice(0, 24)}`);
  });

  it('changing any input changes the entry hash', () => {
    const v = entries.chain[1]!;
    const canonical = utf8.encode(v.canonicalEntry);
    const prior = fromHex(v.priorEntryHash);
    const base = hex(entryHash(1, canonical, prior));
    expect(base).toBe(v.entryHash);
    expect(hex(entryHash(2, canonical, prior))).not.toBe(base);
    expect(hex(entryHash(1, canonical, ZERO_HASH))).not.toBe(base);
    const altered = Uint8Array.from(canonical);
    altered[altered.length - 2] = 0x32; // "v":2
    expect(hex(entryHash(1, altered, prior))).not.toBe(base);
  });
});

describe('canonical entries', () => {
  it('serialises RFC 8785 style: sorted keys, no whitespace, absent fields omitted', () => {
    const e: CanonicalEntry = {
      v: 1,
      type: 'ledger_anchor',
      timestamp: '2026-01-01T00:00:00.000Z',
      result: 'Anchored',
      digest: 'ab'.repeat(32),
      tenant: 'acme',
    };
    expect(new TextDecoder().decode(canonicalEntryBytes(e))).toBe(
      `{"digest":"${'ab'.repeat(32)}","result":"Anchored","tenant":"acme","timestamp":"2026-01-01T00:00:00.000Z","type":"ledger_anchor","v":1}`,
    );
    const unicode = canonicalEntryBytes({ ...e, artifact: 'é\u2028"\\\u0001' });
    expect(new TextDecoder().decode(unicode)).toContain('"artifact":"é\u2028\\"\\\\\\u0001"');
  });

  it('parseCanonicalEntry refuses records that are not entries', () => {
    const good = { v: 1, type: 't', result: 'r', digest: 'd', timestamp: 'ts' };
    expect(parseCanonicalEntry(utf8.encode(JSON.stringify(good)))).toEqual(good);
    const bad: unknown[] = [
      null,
      [],
      'text',
      42,
      { ...good, v: 2 },
      { ...good, v: '1' },
      (({ v: _v, ...rest }) => rest)(good),
      { ...good, type: 5 },
      { ...good, result: null },
      (({ digest: _d, ...rest }) => rest)(good),
      (({ timestamp: _t, ...rest }) => rest)(good),
    ];
    for (const b of bad) expect(() => parseCanonicalEntry(utf8.encode(JSON.stringify(b)))).toThrow(TypeError);
    expect(() => parseCanonicalEntry(utf8.encode('{"v":1'))).toThrow();
    expect(() => parseCanonicalEntry(Uint8Array.of(0x7b, 0xff, 0x7d))).toThrow(); // not UTF-8
    // The decoder is shared between calls: a refusal leaves it ready for the next record.
    expect(parseCanonicalEntry(utf8.encode(JSON.stringify(good)))).toEqual(good);
  });

  it('entryHash refuses a prior hash that is not 32 bytes', () => {
    expect(() => entryHash(0, new Uint8Array(1), new Uint8Array(31))).toThrow(RangeError);
    expect(() => entryHash(0, new Uint8Array(1), new Uint8Array(33))).toThrow(RangeError);
  });

  it('bounds canonical entries by the bundle framing', () => {
    expect(MAX_CANONICAL_ENTRY_BYTES).toBe(65535);
  });
});

describe('entry ids', () => {
  it('entryId is led_<seq>_<first 12 hex>', () => {
    const h = fromHex('6879bfa734d4f33058ddac2f52222af55a9bcda06c7268838d13ed9a076ae7b9');
    expect(entryId(0, h)).toBe('led_0_6879bfa734d4');
    expect(entryId(123456789, h)).toBe('led_123456789_6879bfa734d4');
  });

  it('parseEntryId accepts well-formed ids', () => {
    for (const v of entries.chain)
      expect(parseEntryId(v.id)).toEqual({ seq: v.seq, hashPrefix: v.entryHash.slice(0, 12) });
    expect(parseEntryId('led_123456789_0123456789ab')).toEqual({ seq: 123456789, hashPrefix: '0123456789ab' });
    expect(parseEntryId(`led_${Number.MAX_SAFE_INTEGER}_0123456789ab`)).toEqual({
      seq: Number.MAX_SAFE_INTEGER,
      hashPrefix: '0123456789ab',
    });
  });

  it('parseEntryId rejects malformed ids', () => {
    const bad = [
      '',
      'led_0_',
      'led__6879bfa734d4',
      'led_00_6879bfa734d4',
      'led_01_6879bfa734d4',
      'led_-1_6879bfa734d4',
      'led_1.5_6879bfa734d4',
      'led_0_6879BFA734D4',
      'led_0_6879bfa734d',
      'led_0_6879bfa734d4a',
      'led_0_6879bfa734dg',
      'LED_0_6879bfa734d4',
      'led-0-6879bfa734d4',
      'led_0_6879bfa734d4\n',
      ' led_0_6879bfa734d4',
      'led_0_6879bfa734d4 ',
      'art_0_6879bfa734d4',
      'led_9007199254740992_6879bfa734d4', // 2^53: not a safe integer
      'led_99999999999999999_6879bfa734d4',
      'led_1e3_6879bfa734d4',
    ];
    for (const id of bad) expect(parseEntryId(id), JSON.stringify(id)).toBeNull();
  });
});
