// Signed-note checks for the browser: which line of a note is by which pinned key, and whether
// it verifies (Ed25519 via @noble/ed25519 with the synchronous SHA-512 of @noble/hashes, so it
// also works outside secure contexts). Parsing notes, vkeys' parts and checkpoint bodies is
// the log's own code (src/core/note.ts, src/core/checkpoint.ts), bundled as is.
import * as ed from '@noble/ed25519';
import { bytesEqual } from '../core/hash.js';
import {
  type NoteSignature,
  type NoteVerifier,
  type ParsedNote,
  SIG_ED25519,
  cosignatureMessage,
  keyIdOf,
  parseCosignerVkey as parseCoreCosignerVkey,
  parseVkey as parseNoteVkey,
} from '../core/note.js';
import { readU64be, utf8 } from './bytes.js';

export { parseCheckpointBody } from '../core/checkpoint.js';
export {
  NoteError,
  type NoteSignature,
  type ParsedNote,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  parseNote,
} from '../core/note.js';

export interface Verifier extends NoteVerifier {
  /** The vkey text it was parsed from. */
  readonly vkey: string;
  /** Lowercase hex SHA-256 of the raw public key (DESIGN.md §1.4 keyId). */
  readonly keyId: string;
}

/** `<name>+<8 hex key hash>+<base64(type ‖ 32-byte key)>` (src/core/note.ts parses it); throws NoteError. */
export function parseVkey(text: string): Verifier {
  const v = parseNoteVkey(text);
  return { ...v, vkey: text.trim(), keyId: keyIdOf(v.publicKey) };
}

/** A witness's vkey (cosignature/v1 Ed25519 or subtree/v1 ML-DSA-44, src/core/note.ts decides); throws NoteError. */
export function parseCosignerVkey(text: string): Verifier {
  const v = parseCoreCosignerVkey(text);
  return { ...v, vkey: text.trim(), keyId: keyIdOf(v.publicKey) };
}

export type SignatureCheck =
  | { readonly status: 'valid'; readonly time?: number }
  | { readonly status: 'invalid'; readonly reason: string };

/** Checks one signature line against one verifier whose name and key hash it names. */
export function checkSignature(body: string, sig: NoteSignature, v: Verifier): SignatureCheck {
  if (sig.name !== v.name || !bytesEqual(sig.keyHash, v.keyHash))
    return { status: 'invalid', reason: 'not by this key' };
  try {
    if (v.type === SIG_ED25519) {
      if (sig.payload.length !== 64) return { status: 'invalid', reason: 'signature is not 64 bytes' };
      return ed.verify(sig.payload, utf8(body), v.publicKey)
        ? { status: 'valid' }
        : { status: 'invalid', reason: 'Ed25519 signature does not verify' };
    }
    if (sig.payload.length !== 72) return { status: 'invalid', reason: 'cosignature is not 8 + 64 bytes' };
    const t = readU64be(sig.payload, 0);
    if (!Number.isSafeInteger(t)) return { status: 'invalid', reason: 'cosignature time out of range' };
    return ed.verify(sig.payload.subarray(8), cosignatureMessage(body, t), v.publicKey)
      ? { status: 'valid', time: t }
      : { status: 'invalid', reason: 'Ed25519 cosignature does not verify' };
  } catch (e) {
    return { status: 'invalid', reason: `malformed signature (${(e as Error).message})` };
  }
}

/** The lines of a note that claim to be by `v` (same name and key hash). */
export const linesBy = (note: ParsedNote, v: Verifier): NoteSignature[] =>
  note.signatures.filter((s) => s.name === v.name && bytesEqual(s.keyHash, v.keyHash));
