// The JSON bodies written as bytes (src/api/json.ts, views.ts) are byte for byte what
// JSON.stringify gives for the same views.
import { describe, expect, it } from 'vitest';
import { JsonFragment, JsonObjectWriter } from '../../src/api/json.js';
import { anchorJson, consistencyJson, entryProofJson } from '../../src/api/views.js';
import type { AnchorView, CheckpointView, ConsistencyView, EntryProofView } from '../../src/api/wire.js';
import { type CanonicalEntry, canonicalEntryBytes, parseCanonicalEntry, presentEntry } from '../../src/core/entry.js';
import { concatBytes, leafHash, sha256, toHex } from '../../src/core/hash.js';

const hashOf = (i: number) => sha256(Uint8Array.of(i & 0xff, i >> 8));

const checkpoint: CheckpointView = {
  logId: 'json.test/log',
  treeSize: 1_000_000,
  rootHash: toHex(hashOf(1)),
  timestamp: '2026-01-02T03:04:05.678Z',
  keyId: toHex(hashOf(2)),
  signature: `ed25519:${Buffer.from(hashOf(3)).toString('base64')}`,
  witnesses: [{ name: 'w1.example', signature: 'ed25519:AAAA', timestamp: '2026-01-02T03:04:06.000Z' }],
  lifetimeEntries: 1_000_007,
  note: 'json.test/log\n1000000\nAAAA\n\n— json.test/log BBBB\n',
};

describe('JSON bodies as bytes', () => {
  it('entryProofJson is JSON.stringify of the entry-proof view of a record, unicode and array-index keys and all', () => {
    const entries: CanonicalEntry[] = [
      {
        v: 1,
        type: 'ledger_anchor',
        result: 'Anchored',
        digest: toHex(hashOf(9)),
        timestamp: '2026-01-02T03:04:05.000Z',
      },
      {
        v: 1,
        type: 'ledger_anchor',
        result: 'Anchored',
        digest: toHex(hashOf(10)),
        timestamp: '2026-01-02T03:04:05.000Z',
        artifact: 'résumé "v2"\n—✓ 😀',
        scope: 's',
        tenant: 't',
      },
      // Array-index keys, which JSON.parse moves to the front: written the slow way, same bytes.
      {
        v: 1,
        type: 'policy_evaluation',
        result: 'Allow',
        digest: toHex(hashOf(11)),
        timestamp: '2026-01-02T03:04:05.000Z',
        context: { b: 1, '10': 'x', '9': [1.5, null, true] },
      },
      {
        v: 1,
        type: 'policy_evaluation',
        result: 'Deny',
        digest: toHex(hashOf(12)),
        timestamp: '2026-01-02T03:04:05.000Z',
        '7': 'top',
        note: 'a "quoted" \\ "0": b',
      },
    ];
    for (const [i, entry] of entries.entries()) {
      for (const pathLength of [0, 1, 20, 600]) {
        const seq = 123_456 + i;
        const entryHash = hashOf(100 + i);
        const path = Array.from({ length: pathLength }, (_, k) => hashOf(200 + k));
        const expected: EntryProofView = {
          leafIndex: seq,
          treeSize: checkpoint.treeSize,
          leafHash: toHex(leafHash(entryHash)),
          auditPath: path.map(toHex),
          rootHash: checkpoint.rootHash,
          checkpoint,
          entry: presentEntry(entry, seq, entryHash),
        };
        const canonical = canonicalEntryBytes(entry);
        const expected2 = { ...expected, entry: presentEntry(parseCanonicalEntry(canonical), seq, entryHash) };
        expect(expected2).toEqual(expected);
        const body = entryProofJson(
          seq,
          canonical,
          entryHash,
          concatBytes(...path),
          checkpoint,
          new JsonFragment(checkpoint),
        );
        expect(body.toString('utf8')).toBe(JSON.stringify(expected2));
        expect(body.equals(Buffer.from(JSON.stringify(expected2)))).toBe(true);
      }
    }
  });

  it('anchorJson is JSON.stringify of the anchor response', () => {
    const entry: CanonicalEntry = {
      v: 1,
      type: 'ledger_anchor',
      result: 'Anchored',
      digest: toHex(hashOf(11)),
      timestamp: '2026-01-02T03:04:05.000Z',
      artifact: 'ünï "x"',
    };
    for (const n of [0, 1, 21]) {
      const proof = Array.from({ length: n }, (_, k) => hashOf(300 + k));
      const expected: AnchorView = {
        entry: presentEntry(entry, 77, hashOf(12)),
        leafIndex: 77,
        inclusionProof: proof.map(toHex),
        checkpoint,
      };
      expect(anchorJson(77, entry, hashOf(12), proof, new JsonFragment(checkpoint)).toString()).toBe(
        JSON.stringify(expected),
      );
    }
  });

  it('consistencyJson is JSON.stringify of the consistency view', () => {
    for (const n of [0, 1, 30]) {
      const proof = Array.from({ length: n }, (_, k) => hashOf(k));
      const expected: ConsistencyView = {
        first: 7,
        second: 2 ** 40 + 3,
        firstRoot: toHex(hashOf(50)),
        secondRoot: toHex(hashOf(51)),
        proof: proof.map(toHex),
      };
      expect(consistencyJson(7, 2 ** 40 + 3, hashOf(50), hashOf(51), proof).toString()).toBe(JSON.stringify(expected));
    }
  });

  it('each body is its own buffer, and a writer leaves undefined values out', () => {
    const a = new JsonObjectWriter().number('n', 1).value('gone', undefined).value('s', 'x').end();
    const b = new JsonObjectWriter()
      .number('n', 2)
      .hexList(
        'h',
        Array.from({ length: 1000 }, (_, k) => hashOf(k)),
      )
      .end();
    const c = new JsonObjectWriter().end();
    expect(a.toString()).toBe('{"n":1,"s":"x"}');
    expect(JSON.parse(b.toString()).h).toHaveLength(1000);
    expect(c.toString()).toBe('{}');
  });
});
