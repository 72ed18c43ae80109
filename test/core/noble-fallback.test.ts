// src/core/hash.ts and src/core/note.ts where Node's crypto is absent (a browser: the explorer,
// @stele/verify there): they import @noble/hashes and @noble/ed25519 themselves, which Node
// never loads, and must give the digests, keys and signatures the Go vectors give. The host is
// made to look like one without node:crypto before the modules are first imported here (each
// test file has modules of its own), so they can only have taken the fallback.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fromHex, hex, loadVectors } from '../helpers/vectors.js';

const V = loadVectors();
const ORIGIN = 'example.com/stele-test';
let hash: typeof import('../../src/core/hash.js');
let note: typeof import('../../src/core/note.js');
let checkpoint: typeof import('../../src/core/checkpoint.js');
let lookup: ReturnType<typeof vi.spyOn>;

beforeAll(async () => {
  const real = process.getBuiltinModule.bind(process);
  lookup = vi
    .spyOn(process, 'getBuiltinModule')
    .mockImplementation(((id: string) =>
      id === 'node:crypto' ? undefined : real(id)) as typeof process.getBuiltinModule);
  hash = await import('../../src/core/hash.js');
  note = await import('../../src/core/note.js');
  checkpoint = await import('../../src/core/checkpoint.js');
});
afterAll(() => vi.restoreAllMocks());

/** RFC 6962's Merkle tree hash of `leaves`, from the core's leaf and node hashes. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 1) return hash.leafHash(leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return hash.nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

describe('the core without node:crypto', () => {
  it('asked the host for node:crypto and was told there is none', () => {
    expect(lookup).toHaveBeenCalledWith('node:crypto');
    expect(process.getBuiltinModule('node:crypto')).toBeUndefined();
  });

  it('hashes as RFC 6962 and the Go vectors say', () => {
    expect(hex(hash.EMPTY_ROOT)).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hash.sha256HexOfText('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const abc = new TextEncoder().encode('abc');
    expect(hex(hash.sha256Parts(abc.subarray(0, 1), abc.subarray(1)))).toBe(hex(hash.sha256(abc)));
    const prefix = new Uint8Array(9);
    hash.sha256PrefixInto(abc, 6, prefix, 2);
    expect(hex(prefix)).toBe('0000ba7816bf8f0100');
    const inputs = V.rfc6962.leafInputs.map(fromHex);
    for (const { size, root } of V.rfc6962.roots) expect(hex(mth(inputs.slice(0, size)))).toBe(root);
  });

  it('derives the vector key from its seed, signs the vector checkpoint exactly, and verifies it', async () => {
    const signer = new note.SeedSigner(ORIGIN, fromHex(V.note.privateSeedHex));
    expect(hex(signer.publicKey)).toBe(V.note.publicKeyHex);
    expect(note.keyIdOf(signer.publicKey)).toBe(V.note.keyId);
    const body = checkpoint.parseCheckpointBody(V.note.body);
    expect((await checkpoint.signCheckpoint(body, signer)).note).toBe(V.note.signedNote);
    const verifier = note.makeVerifier(ORIGIN, note.SIG_ED25519, signer.publicKey);
    expect(note.openNote(V.note.signedNote, verifier).body).toBe(V.note.body);
    const sig = new Uint8Array(Buffer.from(V.note.signatureBase64, 'base64'));
    sig[0]! ^= 1;
    const forged = `${V.note.body}\n\u2014 ${ORIGIN} ${Buffer.from([...verifier.keyHash, ...sig]).toString('base64')}\n`;
    expect(() => note.openNote(forged, verifier)).toThrow(note.NoteError);
  });
});
