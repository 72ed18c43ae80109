// The page's keys: a vkey with the text it came from and its key id. Parsing and checking
// notes is the core's (src/core/note.ts, src/core/verify/checkpoint.ts), bundled as is.
import {
  type NoteVerifier,
  keyIdOf,
  parseCosignerVkey as parseCoreCosignerVkey,
  parseVkey as parseNoteVkey,
} from '../core/note.js';

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
  /** Lowercase hex SHA-256 of the raw public key (docs/design.md §1.4 keyId). */
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
