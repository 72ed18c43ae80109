// tlog-cosignature's ML-DSA-44 type (0x06, subtree/v1): the signed message's layout, vkeys of
// 1312-byte keys, and cosignatures that verify, or fail when anything they cover changes.
import { ml_dsa44 } from '@noble/post-quantum/ml-dsa.js';
import { describe, expect, it } from 'vitest';
import { formatCheckpointBody } from '../../src/core/checkpoint.js';
import { toTrust } from '../../src/explorer/trust.js';
import { concatBytes, sha256 } from '../../src/core/hash.js';
import {
  NoteError,
  SIG_SUBTREE_MLDSA44,
  SeedSigner,
  cosignBodyMlDsa44,
  formatVkey,
  makeVerifier,
  openNote,
  parseCosignerVkey,
  parseVkey,
  signBody,
  subtreeCosignatureMessage,
} from '../../src/core/note.js';

const utf8 = new TextEncoder();
const witnessKeys = ml_dsa44.keygen(new Uint8Array(32).fill(7));
const witness = makeVerifier('pq.witness.test', SIG_SUBTREE_MLDSA44, witnessKeys.publicKey);
const log = new SeedSigner('pq.log.test/log', new Uint8Array(32).fill(1));
const logKey = makeVerifier(log.name, 0x01, log.publicKey);
const body = formatCheckpointBody({ origin: log.name, size: 42, root: sha256(utf8.encode('root')) });

async function cosignedNote(b = body, timestamp = 1_700_000_000): Promise<string> {
  const { line } = await signBody(b, log);
  return `${b}\n${line}${cosignBodyMlDsa44(b, witness.name, witnessKeys.secretKey, witnessKeys.publicKey, timestamp)}`;
}

describe('ML-DSA-44 cosignatures (tlog-cosignature, type 0x06)', () => {
  it('signs the subtree/v1 message laid out as the text says', () => {
    const hash = new Uint8Array(32).fill(0xab);
    const m = subtreeCosignatureMessage({ cosigner: 'w', timestamp: 1, origin: 'o.test', start: 0, end: 5, hash });
    const u64 = (n: number) => {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, BigInt(n));
      return b;
    };
    const label = utf8.encode('subtree/v1\n\0');
    expect(label.length).toBe(12);
    expect(m).toEqual(
      concatBytes(
        label,
        Uint8Array.of(1),
        utf8.encode('w'),
        u64(1),
        Uint8Array.of(6),
        utf8.encode('o.test'),
        u64(0),
        u64(5),
        hash,
      ),
    );
    expect(() =>
      subtreeCosignatureMessage({ cosigner: 'w', timestamp: 1, origin: 'o.test', start: 3, end: 5, hash }),
    ).toThrow(/timestamp 0/);
    expect(() =>
      subtreeCosignatureMessage({ cosigner: 'x'.repeat(256), timestamp: 0, origin: 'o', start: 0, end: 1, hash }),
    ).toThrow(NoteError);
  });

  it('round-trips a 1312-byte key as a vkey, which a client (CLI or explorer) accepts as a witness key', () => {
    const vkey = formatVkey(witness);
    const parsed = parseVkey(vkey);
    expect(parsed.type).toBe(SIG_SUBTREE_MLDSA44);
    expect(parsed.publicKey).toEqual(witnessKeys.publicKey);
    expect(parseCosignerVkey(vkey).keyHash).toEqual(witness.keyHash);
    const explorerTrust = toTrust({ vkey: formatVkey(logKey), witnesses: [vkey], threshold: 1 });
    expect(explorerTrust.witnesses.map((w) => w.type)).toEqual([SIG_SUBTREE_MLDSA44]);
    expect(() => parseCosignerVkey(formatVkey(logKey))).toThrow(/type 0x04 Ed25519 or 0x06 ML-DSA-44/);
    expect(() => makeVerifier('w', SIG_SUBTREE_MLDSA44, new Uint8Array(32))).toThrow(/1312 bytes/);
  });

  it('verifies a checkpoint cosignature with its timestamp', async () => {
    const opened = openNote(await cosignedNote(), logKey, [witness]);
    expect(opened.cosignatures).toHaveLength(1);
    expect(opened.cosignatures[0]!.verifier).toBe(witness);
    expect(opened.cosignatures[0]!.timestamp).toBe(1_700_000_000);
  });

  it('refuses a cosignature over another size, root or time, or with a flipped byte', async () => {
    const note = await cosignedNote();
    const witnessLine = note.trimEnd().split('\n').at(-1)!;
    const other = formatCheckpointBody({ origin: log.name, size: 43, root: sha256(utf8.encode('root')) });
    const { line } = await signBody(other, log);
    // The same cosignature moved onto a checkpoint of another size.
    expect(() => openNote(`${other}\n${line}${witnessLine}\n`, logKey, [witness])).toThrow(
      /invalid signature by pq\.witness\.test/,
    );
    // One byte of the signature flipped.
    const raw = Buffer.from(witnessLine.split(' ').at(-1)!, 'base64');
    raw[100]! ^= 1;
    const flipped = `${witnessLine.split(' ').slice(0, -1).join(' ')} ${raw.toString('base64')}`;
    expect(() => openNote(note.replace(witnessLine, flipped), logKey, [witness])).toThrow(/invalid signature/);
    // The timestamp changed: it is part of the signed message.
    const t = Buffer.from(witnessLine.split(' ').at(-1)!, 'base64');
    t[4 + 7]! ^= 1;
    const retimed = `${witnessLine.split(' ').slice(0, -1).join(' ')} ${t.toString('base64')}`;
    expect(() => openNote(note.replace(witnessLine, retimed), logKey, [witness])).toThrow(/invalid signature/);
  });

  it('leaves extension lines uncovered, as the text says', async () => {
    const extended = `${body}extension line\n`;
    const { line } = await signBody(extended, log);
    const cosig = cosignBodyMlDsa44(body, witness.name, witnessKeys.secretKey, witnessKeys.publicKey, 5);
    expect(openNote(`${extended}\n${line}${cosig}`, logKey, [witness]).cosignatures).toHaveLength(1);
  });
});
