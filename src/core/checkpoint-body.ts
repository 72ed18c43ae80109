// tlog-checkpoint bodies: origin, size and base64 root lines, then any extension lines. Below
// the signed note (note.ts verifies ML-DSA subtree cosignatures over these fields), so it
// needs nothing but the hash helpers.
import { HASH_SIZE, fromBase64, toBase64 } from './hash.js';
import { NoteError } from './note-error.js';

export interface CheckpointBody {
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array;
}

export function formatCheckpointBody(c: CheckpointBody): string {
  if (c.root.length !== HASH_SIZE) throw new RangeError('root must be 32 bytes');
  return `${c.origin}\n${c.size}\n${toBase64(c.root)}\n`;
}

/** A checkpoint body as tlog-checkpoint allows it from any log: the three lines, then extension lines. */
export interface ExtendedCheckpointBody extends CheckpointBody {
  /** Opaque extension lines (tlog-checkpoint "Note text" item 4), without their newlines. */
  readonly extensions: readonly string[];
}

/**
 * Parses any tlog-checkpoint body, extension lines included ("Any following lines are
 * extension lines, opaque and OPTIONAL ... if any, MUST be non-empty"). For checkpoints of
 * other logs (the witness); what Stele itself writes and reads goes through parseCheckpointBody.
 */
export function parseExtendedCheckpointBody(body: string): ExtendedCheckpointBody {
  const lines = body.split('\n');
  if (lines.length < 4 || lines[lines.length - 1] !== '')
    throw new NoteError('checkpoint body must have origin, size and root lines, each ending in a newline');
  const [origin, sizeText, rootText] = lines as [string, string, string];
  const extensions = lines.slice(3, -1);
  if (origin.length === 0 || /\s/u.test(origin)) throw new NoteError('checkpoint origin is empty or has spaces');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) {
    throw new NoteError('checkpoint size is not a canonical decimal integer');
  }
  const root = fromBase64(rootText);
  if (!root || root.length !== HASH_SIZE) throw new NoteError('checkpoint root is not base64 of 32 bytes');
  if (extensions.some((l) => l === '')) throw new NoteError('checkpoint extension lines must be non-empty');
  return { origin, size: Number(sizeText), root, extensions };
}

/** Parses a Stele checkpoint body: extension lines are refused (a Stele log writes none, docs/design.md §1.3). */
export function parseCheckpointBody(body: string): CheckpointBody {
  const { extensions, ...c } = parseExtendedCheckpointBody(body);
  if (extensions.length > 0) throw new NoteError('checkpoint body must be exactly origin, size and root lines');
  return c;
}
