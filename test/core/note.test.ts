// src/core/note.ts and src/core/checkpoint.ts: C2SP signed notes, vkeys, checkpoints, cosignatures.
// Signatures are also checked with node:crypto's Ed25519, independently of @noble/ed25519.
import { createPrivateKey, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  formatCheckpointBody,
  openCheckpoint,
  parseCheckpointBody,
  parseExtendedCheckpointBody,
  signCheckpoint,
} from '../../src/core/checkpoint.js';
import {
  NoteError,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  SeedSigner,
  cosignBody,
  ed25519Verify,
  formatVkey,
  keyHash,
  keyIdOf,
  makeVerifier,
  openNote,
  parseNote,
  parseVkey,
  signBody,
} from '../../src/core/note.js';
import { sha256 } from '../helpers/naive.js';
import { fromHex, hex, loadVectors } from '../helpers/vectors.js';

const V = loadVectors().note;
const utf8 = new TextEncoder();
const ORIGIN = 'example.com/stele-test';
const seed = fromHex(V.privateSeedHex);
const signer = new SeedSigner(ORIGIN, seed);
const logV = makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey);
const ROOT_B64 = 'XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=';
const root = new Uint8Array(Buffer.from(ROOT_B64, 'base64'));

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');
const unb64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));

function nodeEd25519Verify(publicKey: Uint8Array, message: Uint8Array, sig: Uint8Array): boolean {
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
    format: 'jwk',
  });
  return nodeVerify(null, message, key, sig);
}

function nodePublicKeyFromSeed(s: Uint8Array): Uint8Array {
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(s)]);
  const jwk = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({ format: 'jwk' });
  return new Uint8Array(Buffer.from(jwk.x!, 'base64url'));
}

/** The signature lines of a note, and a way to rebuild a line from its raw bytes. */
const sigLine = (name: string, raw: Uint8Array): string => `\u2014 ${name} ${b64(raw)}\n`;
const sigBlock = (note: string): string => note.slice(note.lastIndexOf('\n\n') + 2);
const bodyOf = (note: string): string => note.slice(0, note.lastIndexOf('\n\n') + 1);

function lineRaw(line: string): { name: string; raw: Uint8Array } {
  const m = /^\u2014 (\S+) (\S+)\n$/u.exec(line);
  if (!m) throw new Error(`not a signature line: ${JSON.stringify(line)}`);
  return { name: m[1]!, raw: unb64(m[2]!) };
}

describe('note vectors', () => {
  it('the seed gives the vector public key (noble and node:crypto agree)', () => {
    expect(hex(signer.publicKey)).toBe(V.publicKeyHex);
    expect(hex(nodePublicKeyFromSeed(seed))).toBe(V.publicKeyHex);
    expect(bodyOf(V.signedNote)).toBe(V.body);
    expect(V.body).toBe(`${ORIGIN}\n8\n${ROOT_B64}\n`);
  });

  it('formatCheckpointBody / parseCheckpointBody agree with the vector body', () => {
    expect(formatCheckpointBody({ origin: ORIGIN, size: 8, root })).toBe(V.body);
    const parsed = parseCheckpointBody(V.body);
    expect(parsed.origin).toBe(ORIGIN);
    expect(parsed.size).toBe(8);
    expect(b64(parsed.root)).toBe(ROOT_B64);
  });

  it("parseExtendedCheckpointBody reads extension lines (tlog-checkpoint); parseCheckpointBody, for Stele's own, still refuses them", () => {
    expect(parseExtendedCheckpointBody(V.body)).toEqual({ origin: ORIGIN, size: 8, root, extensions: [] });
    const extended = `${V.body}first extension\nsecond \u00e9xtension\n`;
    expect(parseExtendedCheckpointBody(extended)).toEqual({
      origin: ORIGIN,
      size: 8,
      root,
      extensions: ['first extension', 'second \u00e9xtension'],
    });
    expect(() => parseCheckpointBody(extended)).toThrow(/exactly origin, size and root/);
    expect(parseCheckpointBody(V.body)).toEqual({ origin: ORIGIN, size: 8, root });
    // "Extension lines, if any, MUST be non-empty"; and the body still ends in a newline and has three lines.
    for (const bad of [
      `${V.body}\nafter an empty line\n`,
      `${V.body}extension`,
      `${ORIGIN}\n8\n`,
      `${ORIGIN}\n08\n${ROOT_B64}\next\n`,
    ]) {
      expect(() => parseExtendedCheckpointBody(bad), JSON.stringify(bad)).toThrow(NoteError);
    }
  });

  it('signCheckpoint produces exactly the signed note', async () => {
    const signed = await signCheckpoint({ origin: ORIGIN, size: 8, root }, signer);
    expect(signed.note).toBe(V.signedNote);
    expect(b64(signed.signature)).toBe(V.signatureBase64);
    expect(signed.size).toBe(8);
    expect(nodeEd25519Verify(signer.publicKey, utf8.encode(V.body), signed.signature)).toBe(true);
    const { raw } = lineRaw(sigBlock(V.signedNote));
    expect(raw.length).toBe(68);
    expect(hex(raw.subarray(0, 4))).toBe(hex(logV.keyHash));
    expect(b64(raw.subarray(4))).toBe(V.signatureBase64);
  });

  it('formatVkey gives the vector vkey and keyIdOf the vector key id', () => {
    expect(formatVkey(logV)).toBe(V.vkey);
    expect(keyIdOf(signer.publicKey)).toBe(V.keyId);
    expect(keyIdOf(signer.publicKey)).toBe(hex(sha256(signer.publicKey)));
    // key hash = first 4 bytes of SHA-256(name ‖ 0x0A ‖ type ‖ public key)
    const expected = sha256(utf8.encode(`${ORIGIN}\n`), Uint8Array.of(0x01), signer.publicKey).subarray(0, 4);
    expect(hex(logV.keyHash)).toBe(hex(expected));
    expect(hex(logV.keyHash)).toBe('18ab708b');
    expect(hex(keyHash(ORIGIN, SIG_ED25519, signer.publicKey))).toBe('18ab708b');
  });

  it('SeedSigner never serialises its seed', () => {
    const json = JSON.stringify(signer);
    expect(json).not.toContain(V.privateSeedHex);
    expect(json).not.toContain(Buffer.from(seed).toString('base64'));
    expect(() => new SeedSigner(ORIGIN, new Uint8Array(31))).toThrow(NoteError);
    expect(() => new SeedSigner('has space', seed)).toThrow(NoteError);
    expect(() => new SeedSigner('a+b', seed)).toThrow(NoteError);
  });
});

describe('vkeys', () => {
  it('parseVkey round-trips the vector vkey', () => {
    const v = parseVkey(V.vkey);
    expect(v.name).toBe(ORIGIN);
    expect(v.type).toBe(SIG_ED25519);
    expect(hex(v.publicKey)).toBe(V.publicKeyHex);
    expect(hex(v.keyHash)).toBe('18ab708b');
    expect(formatVkey(v)).toBe(V.vkey);
    // a cosignature key round-trips too
    const w = makeVerifier('witness.example/w1', SIG_COSIGNATURE_V1, signer.publicKey);
    const wv = parseVkey(formatVkey(w));
    expect(wv.type).toBe(SIG_COSIGNATURE_V1);
    expect(hex(wv.keyHash)).toBe(hex(w.keyHash));
    expect(formatVkey(w)).toMatch(/^witness\.example\/w1\+[0-9a-f]{8}\+BP/);
  });

  it('parseVkey rejects malformed and inconsistent vkeys', () => {
    // split at the first two '+' only: the base64 key itself contains '+'
    const name = V.vkey.slice(0, V.vkey.indexOf('+'));
    const h = V.vkey.slice(name.length + 1, name.length + 9);
    const k = V.vkey.slice(name.length + 10);
    expect(`${name}+${h}+${k}`).toBe(V.vkey);
    expect(k).toContain('+');
    expect(formatVkey(parseVkey(`${name}+${h}+${k}`))).toBe(V.vkey);
    const key = (type: number, pub: Uint8Array): string => b64(Uint8Array.of(type, ...pub));
    const pub = signer.publicKey;
    const hashFor = (n: string, type: number, p: Uint8Array): string =>
      hex(sha256(utf8.encode(`${n}\n`), Uint8Array.of(type), p).subarray(0, 4));
    const bad = [
      `${name}+18ab708c+${k}`, // wrong key hash
      `${name}+${h.toUpperCase()}+${k}`,
      `${name}+${h}`,
      `${name}+${h}+${k}+extra`,
      `other.example+${h}+${k}`, // hash is for another name
      `+${hashFor('', 1, pub)}+${k}`,
      `${name}+${h}+${k.slice(0, -1)}`,
      `${name}+${h}+${k}==`,
      `${name}+${h}+${k}AAAA`,
      `${name}+${h}+!${k.slice(1)}`,
      `${name}+${hashFor(name, 2, pub)}+${key(2, pub)}`, // unsupported type
      `${name}+${hashFor(name, 1, pub.subarray(1))}+${key(1, pub.subarray(1))}`, // 31-byte key
      `${name}+${hashFor(name, 4, pub)}+${k}`, // type in key is 0x01, hash computed for 0x04
    ];
    for (const s of bad) expect(() => parseVkey(s), s).toThrow(NoteError);
  });
});

describe('opening the checkpoint', () => {
  it('openCheckpoint accepts the vector note', () => {
    const c = openCheckpoint(V.signedNote, logV);
    expect(c.origin).toBe(ORIGIN);
    expect(c.size).toBe(8);
    expect(b64(c.root)).toBe(ROOT_B64);
    expect(b64(c.signature)).toBe(V.signatureBase64);
    expect(c.cosignatures).toEqual([]);
    expect(openCheckpoint(V.signedNote, parseVkey(V.vkey)).size).toBe(8);
    const opened = openNote(V.signedNote, logV);
    expect(opened.body).toBe(V.body);
    expect(opened.unknown).toEqual([]);
  });

  it('rejects a tampered body', () => {
    const cases = [
      V.signedNote.replace('\n8\n', '\n9\n'),
      V.signedNote.replace(ORIGIN, 'example.com/stele-tesT'),
      V.signedNote.replace('XcnaeacG', 'XcnaeacH'),
      `x${V.signedNote}`,
      V.signedNote.replace(`${ROOT_B64}\n`, `${ROOT_B64}\nextension line\n`),
    ];
    for (const n of cases) {
      expect(n).not.toBe(V.signedNote);
      expect(() => openCheckpoint(n, logV), n).toThrow(NoteError);
    }
  });

  it('rejects every flipped byte of the signature line', () => {
    const { name, raw } = lineRaw(sigBlock(V.signedNote));
    let rejected = 0;
    for (let i = 0; i < raw.length; i++) {
      const t = Uint8Array.from(raw);
      t[i] = t[i]! ^ (1 << (i % 8));
      const note = V.body + '\n' + sigLine(name, t);
      try {
        openCheckpoint(note, logV);
      } catch (e) {
        if (e instanceof NoteError) rejected++;
      }
    }
    expect(rejected).toBe(68);
  });

  it('rejects a wrong key hash, a wrong name and an unknown key', () => {
    const wrongType = makeVerifier(ORIGIN, SIG_COSIGNATURE_V1, signer.publicKey);
    expect(() => openCheckpoint(V.signedNote, wrongType)).toThrow(NoteError);
    const otherName = makeVerifier('example.com/other', SIG_ED25519, signer.publicKey);
    expect(() => openCheckpoint(V.signedNote, otherName)).toThrow(NoteError);
    const otherKey = new SeedSigner(ORIGIN, sha256(utf8.encode('another seed')));
    const otherV = makeVerifier(ORIGIN, SIG_ED25519, otherKey.publicKey);
    expect(() => openCheckpoint(V.signedNote, otherV)).toThrow(NoteError);
    expect(() => openNote(V.signedNote, otherV)).toThrow(NoteError);
    // a line whose key hash is right but whose name was changed
    const { raw } = lineRaw(sigBlock(V.signedNote));
    expect(() => openCheckpoint(V.body + '\n' + sigLine('example.com/other', raw), logV)).toThrow(NoteError);
    // the right name and signature under a key hash for a different key
    const forged = Uint8Array.from(raw);
    forged.set(otherV.keyHash, 0);
    expect(() => openCheckpoint(V.body + '\n' + sigLine(ORIGIN, forged), logV)).toThrow(NoteError);
    expect(() => openCheckpoint(V.body + '\n' + sigLine(ORIGIN, forged), otherV)).toThrow(NoteError);
  });

  it('rejects a checkpoint whose origin is not the key name, or with extension lines, even if correctly signed', async () => {
    await expect(signCheckpoint({ origin: 'example.com/other', size: 8, root }, signer)).rejects.toThrow(NoteError);
    const body = formatCheckpointBody({ origin: 'example.com/other', size: 8, root });
    const { line } = await signBody(body, signer);
    const note = `${body}\n${line}`;
    expect(openNote(note, logV).body).toBe(body); // the signature itself is fine
    expect(() => openCheckpoint(note, logV)).toThrow(NoteError);
    // a correctly signed body with an extension line is refused too (Stele writes none)
    const extended = `${V.body}extension line\n`;
    const ext = await signBody(extended, signer);
    expect(openNote(`${extended}\n${ext.line}`, logV).body).toBe(extended);
    expect(() => openCheckpoint(`${extended}\n${ext.line}`, logV)).toThrow(NoteError);
  });

  it('rejects a missing final newline and junk', () => {
    const cases = [
      V.signedNote.slice(0, -1),
      `${V.signedNote}junk\n`,
      `${V.signedNote}junk`,
      `${V.signedNote}\n`,
      `${V.signedNote}\u2014 \n`,
      V.signedNote.replace('\n\n', '\n\n\n'),
      V.signedNote.replace('\n\n', '\n'),
      V.signedNote.replace('\u2014 ', '- '),
      V.signedNote.replace('\u2014 ', '\u2014'),
      V.signedNote.replace('\u2014 ', '\u2014  '),
      V.signedNote.replace(/=\n$/u, '\n'), // unpadded base64
      V.signedNote.replace(/\n$/u, ' \n'),
      V.signedNote.replace(/\n$/u, '\r\n'),
      V.signedNote.replace('\n8\n', '\n8\t\n'),
      `${V.body}\n`, // no signatures
      V.body,
      '',
    ];
    for (const n of cases) expect(() => openCheckpoint(n, logV), JSON.stringify(n)).toThrow(NoteError);
    expect(() => parseNote(V.signedNote.slice(0, -1))).toThrow(NoteError);
  });

  it('rejects non-canonical base64 in a signature line', () => {
    const block = sigBlock(V.signedNote);
    const m = /([A-Za-z0-9+/])=\n$/u.exec(block)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    // 68 bytes: the last character before '=' carries 2 unused bits; set them
    const last = alphabet[alphabet.indexOf(m[1]!) | 0x03]!;
    expect(last).not.toBe(m[1]);
    const note = V.signedNote.replace(/[A-Za-z0-9+/]=\n$/u, `${last}=\n`);
    expect(Buffer.from(lineRaw(sigBlock(note)).raw).equals(Buffer.from(lineRaw(block).raw))).toBe(true);
    expect(() => openCheckpoint(note, logV)).toThrow(NoteError);
  });

  it('rejects control characters even in a correctly signed note', async () => {
    for (const body of ['a\tb\n', 'a\rb\n', 'a\u0000b\n', 'a\u007fb\n']) {
      const { line } = await signBody(body, signer);
      expect(() => openNote(`${body}\n${line}`, logV), JSON.stringify(body)).toThrow(NoteError);
    }
    const { line } = await signBody('plain\n', signer);
    expect(openNote(`plain\n\n${line}`, logV).body).toBe('plain\n');
  });

  it('keeps signatures by unknown keys aside without failing', async () => {
    const stranger = new SeedSigner('stranger.example', sha256(utf8.encode('stranger')));
    const { line } = await signBody(V.body, stranger);
    const opened = openNote(V.signedNote + line, logV);
    expect(opened.unknown.map((s) => s.name)).toEqual(['stranger.example']);
    expect(openCheckpoint(V.signedNote + line, logV).size).toBe(8);
  });
});

describe('cosignatures (tlog-cosignature, type 0x04)', () => {
  const W = 'witness.example/w1';
  const witness = new SeedSigner(W, sha256(utf8.encode('witness seed')));
  const wV = makeVerifier(W, SIG_COSIGNATURE_V1, witness.publicKey);
  const T = 1_700_000_000;

  it('a cosignature line has key hash ‖ 8-byte time ‖ signature over the cosignature/v1 message', async () => {
    const line = await cosignBody(V.body, witness, T);
    const { name, raw } = lineRaw(line);
    expect(name).toBe(W);
    expect(raw.length).toBe(4 + 8 + 64);
    expect(hex(raw.subarray(0, 4))).toBe(
      hex(sha256(utf8.encode(`${W}\n`), Uint8Array.of(0x04), witness.publicKey).subarray(0, 4)),
    );
    expect(hex(raw.subarray(4, 12))).toBe('000000006553f100');
    const message = utf8.encode(`cosignature/v1\ntime ${T}\n${V.body}`);
    expect(nodeEd25519Verify(witness.publicKey, message, raw.subarray(12))).toBe(true);
  });

  it('openNote verifies the cosignature with a type-0x04 verifier', async () => {
    const note = V.signedNote + (await cosignBody(V.body, witness, T));
    const opened = openNote(note, logV, [wV]);
    expect(opened.cosignatures.length).toBe(1);
    expect(opened.cosignatures[0]!.verifier).toBe(wV);
    expect(opened.cosignatures[0]!.timestamp).toBe(T);
    expect(opened.log.timestamp).toBeUndefined();
    expect(opened.unknown).toEqual([]);
    const c = openCheckpoint(note, logV, [parseVkey(formatVkey(wV))]);
    expect(c.cosignatures.map((s) => s.timestamp)).toEqual([T]);
    // without the witness key it is merely unknown; with a type-0x01 key for that name too
    expect(openNote(note, logV).unknown.map((s) => s.name)).toEqual([W]);
    const asLogType = makeVerifier(W, SIG_ED25519, witness.publicKey);
    const o2 = openNote(note, logV, [asLogType]);
    expect(o2.cosignatures).toEqual([]);
    expect(o2.unknown.length).toBe(1);
  });

  it('rejects a tampered timestamp, signature or body', async () => {
    const line = await cosignBody(V.body, witness, T);
    const { raw } = lineRaw(line);
    const variants: Uint8Array[] = [];
    for (let i = 4; i < 12; i++) {
      const t = Uint8Array.from(raw);
      t[i] = t[i]! ^ 0x01;
      variants.push(t);
    }
    const plusOne = Uint8Array.from(raw);
    new DataView(plusOne.buffer).setBigUint64(4, BigInt(T + 1));
    variants.push(plusOne);
    for (const i of [12, 40, 75]) {
      const t = Uint8Array.from(raw);
      t[i] = t[i]! ^ 0x80;
      variants.push(t);
    }
    for (const t of variants) {
      const note = V.signedNote + sigLine(W, t);
      expect(() => openNote(note, logV, [wV])).toThrow(NoteError);
      expect(() => openCheckpoint(note, logV, [wV])).toThrow(NoteError);
    }
    // a cosignature of another checkpoint body
    const other = await cosignBody(V.body.replace('\n8\n', '\n9\n'), witness, T);
    expect(() => openNote(V.signedNote + other, logV, [wV])).toThrow(NoteError);
    // a plain (type 0x01 message) signature presented as a cosignature
    const plain = await witness.sign(utf8.encode(V.body));
    const fake = Uint8Array.of(...wV.keyHash, ...raw.subarray(4, 12), ...plain);
    expect(() => openNote(V.signedNote + sigLine(W, fake), logV, [wV])).toThrow(NoteError);
  });
});

describe('ed25519Verify', () => {
  const message = utf8.encode('a message\n');
  const other = new SeedSigner(ORIGIN, new Uint8Array(32).fill(7));

  it('verifies against the bytes it is given each time, however often a key came before', async () => {
    const [mine, theirs] = [await signer.sign(message), await other.sign(message)];
    // One array, its bytes changed between calls: a key kept by the array would verify the old key.
    const key = Uint8Array.from(signer.publicKey);
    for (let i = 0; i < 3; i++) expect(ed25519Verify(mine, message, key)).toBe(true);
    key.set(other.publicKey);
    expect(ed25519Verify(mine, message, key)).toBe(false);
    expect(ed25519Verify(theirs, message, key)).toBe(true);
    key.set(signer.publicKey);
    expect(ed25519Verify(mine, message, key)).toBe(true);
    expect(ed25519Verify(theirs, message, key)).toBe(false);
  });

  it('refuses a key that is no curve point every time, and keeps verifying past 1,024 keys', async () => {
    // y = 2 has no x on the curve: not a point.
    const notAPoint = new Uint8Array(32);
    notAPoint[0] = 2;
    for (let i = 0; i < 2; i++) expect(ed25519Verify(new Uint8Array(64), message, notAPoint)).toBe(false);
    const sig = await signer.sign(message);
    for (let i = 0; i < 1100; i++) {
      const key = new SeedSigner(
        ORIGIN,
        Uint8Array.from({ length: 32 }, (_, j) => (i * 31 + j) & 255),
      ).publicKey;
      if (ed25519Verify(sig, message, key)) expect.fail(`key ${i} verified another key's signature`);
    }
    expect(ed25519Verify(sig, message, signer.publicKey)).toBe(true);
  });
});
