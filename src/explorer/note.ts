// C2SP signed-note, tlog-checkpoint and tlog-cosignature/v1 verification for the browser
// (src/note.ts and src/checkpoint.ts use Buffer). Ed25519 via @noble/ed25519 with the
// synchronous SHA-512 of @noble/hashes, so it also works outside secure contexts.
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { bytesEqual, concat, fromBase64, readU64be, toHex, utf8 } from './bytes.js';

ed.hashes.sha512 = sha512;

export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;
const MAX_NOTE_BYTES = 1 << 20;
const EM_DASH = '\u2014 ';

export class NoteError extends Error {
  override name = 'NoteError';
}

export interface Verifier {
  readonly name: string;
  readonly type: number;
  readonly publicKey: Uint8Array;
  readonly keyHash: Uint8Array;
  /** The vkey text it was parsed from. */
  readonly vkey: string;
  /** Lowercase hex SHA-256 of the raw public key (DESIGN.md §1.4 keyId). */
  readonly keyId: string;
}

export function keyHash(name: string, type: number, publicKey: Uint8Array): Uint8Array {
  return sha256(concat(utf8(`${name}\n`), new Uint8Array([type]), publicKey)).subarray(0, 4);
}

const validName = (n: string): boolean => n.length > 0 && !/[\s+]/u.test(n);

/** `<name>+<8 hex key hash>+<base64(type ‖ 32-byte key)>`; throws NoteError. */
export function parseVkey(text: string): Verifier {
  const vkey = text.trim();
  const a = vkey.indexOf('+');
  const b = a < 0 ? -1 : vkey.indexOf('+', a + 1);
  if (b < 0) throw new NoteError('a vkey has the form <name>+<hash>+<base64 key>');
  const name = vkey.slice(0, a);
  const hashHex = vkey.slice(a + 1, b);
  const raw = fromBase64(vkey.slice(b + 1));
  if (!validName(name)) throw new NoteError('invalid key name in vkey');
  if (!/^[0-9a-f]{8}$/.test(hashHex)) throw new NoteError('vkey key hash must be 8 lowercase hex characters');
  if (!raw || raw.length !== 33) throw new NoteError('vkey key must be base64 of a type byte and a 32-byte Ed25519 key');
  const type = raw[0]!;
  if (type !== SIG_ED25519 && type !== SIG_COSIGNATURE_V1) throw new NoteError(`unsupported vkey type 0x${type.toString(16)}`);
  const publicKey = raw.subarray(1);
  const kh = keyHash(name, type, publicKey);
  if (toHex(kh) !== hashHex) throw new NoteError('vkey key hash does not match its name and key');
  return { name, type, publicKey, keyHash: kh, vkey, keyId: toHex(sha256(publicKey)) };
}

export interface NoteSignature {
  readonly name: string;
  readonly keyHash: Uint8Array;
  readonly payload: Uint8Array;
}

export interface ParsedNote {
  readonly body: string;
  readonly signatures: NoteSignature[];
}

export function parseNote(text: string): ParsedNote {
  if (utf8(text).length > MAX_NOTE_BYTES) throw new NoteError('note is too large');
  if (!text.endsWith('\n')) throw new NoteError('note does not end with a newline');
  const split = text.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('note has no blank line before its signatures');
  if (/[\u0000-\u0009\u000b-\u001f\u007f]/u.test(text)) throw new NoteError('note contains control characters');
  const body = text.slice(0, split + 1);
  const signatures = text
    .slice(split + 2, -1)
    .split('\n')
    .map((line): NoteSignature => {
      if (!line.startsWith(EM_DASH)) throw new NoteError('malformed signature line (no em dash)');
      const rest = line.slice(EM_DASH.length);
      const sp = rest.indexOf(' ');
      const name = rest.slice(0, sp);
      const raw = sp > 0 ? fromBase64(rest.slice(sp + 1)) : null;
      if (!validName(name) || !raw || raw.length < 5) throw new NoteError('malformed signature line');
      return { name, keyHash: raw.subarray(0, 4), payload: raw.subarray(4) };
    });
  if (signatures.length === 0) throw new NoteError('note has no signatures');
  return { body, signatures };
}

export interface CheckpointBody {
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array;
}

export function parseCheckpointBody(body: string): CheckpointBody {
  const lines = body.split('\n');
  if (lines.length !== 4 || lines[3] !== '') throw new NoteError('checkpoint body must be exactly origin, size and root lines');
  const [origin, sizeText, rootText] = lines as [string, string, string];
  if (origin.length === 0 || /\s/u.test(origin)) throw new NoteError('checkpoint origin is empty or has spaces');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) {
    throw new NoteError('checkpoint size is not a canonical decimal integer');
  }
  const root = fromBase64(rootText);
  if (!root || root.length !== 32) throw new NoteError('checkpoint root is not base64 of 32 bytes');
  return { origin, size: Number(sizeText), root };
}

export function cosignatureMessage(body: string, seconds: number): Uint8Array {
  return utf8(`cosignature/v1\ntime ${seconds}\n${body}`);
}

export type SignatureCheck =
  | { readonly status: 'valid'; readonly time?: number }
  | { readonly status: 'invalid'; readonly reason: string };

/** Checks one signature line against one verifier whose name and key hash it names. */
export function checkSignature(body: string, sig: NoteSignature, v: Verifier): SignatureCheck {
  if (sig.name !== v.name || !bytesEqual(sig.keyHash, v.keyHash)) return { status: 'invalid', reason: 'not by this key' };
  try {
    if (v.type === SIG_ED25519) {
      if (sig.payload.length !== 64) return { status: 'invalid', reason: 'signature is not 64 bytes' };
      return ed.verify(sig.payload, utf8(body), v.publicKey) ? { status: 'valid' } : { status: 'invalid', reason: 'Ed25519 signature does not verify' };
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
