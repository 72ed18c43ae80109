// Which signed checkpoint a log has published. The sequencer swaps `checkpoint` (the note
// tlog clients read) and `checkpoint.json` (the note and its publish time) side by side, so a
// crash between the two can leave either one behind; both are signed by the log key, so the
// larger is the latest the log committed to. Shared by `stele log fsck` and `stele log recover`.
import { openCheckpoint } from '../checkpoint.js';
import { bytesEqual, toHex } from '../hash.js';
import { type NoteVerifier, parseNote, verifySignature } from '../note.js';
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY } from '../store/layout.js';
import type { ObjectReader } from '../store/store.js';

export interface PublishedState {
  readonly size: number;
  readonly root: Uint8Array;
  /** The note as published (log signature and any cosignatures). */
  readonly note: string;
  /** The publish time from `checkpoint.json`, when that object holds this checkpoint. */
  readonly timestamp?: string;
  /** The object it was taken from. */
  readonly from: typeof CHECKPOINT_KEY | typeof CHECKPOINT_JSON_KEY;
}

export interface PublishedReading {
  /** The newest checkpoint that verifies, or null when there is none. */
  readonly checkpoint: PublishedState | null;
  /** What is wrong with the two objects: a problem makes the published state untrustworthy. */
  readonly problems: { readonly object: string; readonly message: string }[];
  /** What is odd but harmless (one object behind the other: the next start publishes both again). */
  readonly notices: { readonly object: string; readonly message: string }[];
}

type Opened = { size: number; root: Uint8Array; note: string; timestamp?: string };

function openJson(bytes: Uint8Array, key: NoteVerifier): Opened {
  let v: { note?: unknown; timestamp?: unknown };
  try {
    v = JSON.parse(Buffer.from(bytes).toString('utf8')) as { note?: unknown; timestamp?: unknown };
  } catch {
    throw new Error('is not JSON');
  }
  if (typeof v?.note !== 'string' || typeof v.timestamp !== 'string') throw new Error('lacks its note or timestamp');
  const c = openCheckpoint(v.note, key);
  return { size: c.size, root: c.root, note: v.note, timestamp: v.timestamp };
}

/** Reads and verifies `checkpoint` and `checkpoint.json` under the log key. */
export async function readPublished(store: ObjectReader, key: NoteVerifier): Promise<PublishedReading> {
  const [noteBytes, jsonBytes] = await Promise.all([store.get(CHECKPOINT_KEY), store.get(CHECKPOINT_JSON_KEY)]);
  const problems: PublishedReading['problems'] = [];
  const notices: PublishedReading['notices'] = [];
  let note: Opened | null = null;
  let json: Opened | null = null;
  if (noteBytes) {
    try {
      const text = Buffer.from(noteBytes).toString('utf8');
      const c = openCheckpoint(text, key);
      note = { size: c.size, root: c.root, note: text };
    } catch (e) {
      problems.push({ object: CHECKPOINT_KEY, message: `${CHECKPOINT_KEY} does not verify under the log key: ${(e as Error).message}` });
    }
  }
  if (jsonBytes) {
    try {
      json = openJson(jsonBytes, key);
    } catch (e) {
      problems.push({ object: CHECKPOINT_JSON_KEY, message: `${CHECKPOINT_JSON_KEY} does not verify under the log key: ${(e as Error).message}` });
    }
  }
  if (!noteBytes && !jsonBytes) problems.push({ object: CHECKPOINT_KEY, message: 'the log has published no checkpoint' });
  if (note && json) {
    if (note.size === json.size && !bytesEqual(note.root, json.root)) {
      problems.push({
        object: CHECKPOINT_KEY,
        message: `${CHECKPOINT_KEY} and ${CHECKPOINT_JSON_KEY} sign two different roots for size ${note.size} (${toHex(note.root).slice(0, 16)}…, ${toHex(json.root).slice(0, 16)}…): the log forked`,
      });
      return { checkpoint: null, problems, notices };
    }
    if (note.size !== json.size) {
      const [older, newer] = note.size < json.size ? [CHECKPOINT_KEY, CHECKPOINT_JSON_KEY] : [CHECKPOINT_JSON_KEY, CHECKPOINT_KEY];
      notices.push({ object: older, message: `${older} (size ${Math.min(note.size, json.size)}) is behind ${newer} (size ${Math.max(note.size, json.size)}): a crash between the two swaps; the next start publishes both again` });
    }
  }
  const newest = note && json ? (json.size >= note.size ? json : note) : (json ?? note);
  if (!newest) return { checkpoint: null, problems, notices };
  const timestamp = json && json.size === newest.size ? json.timestamp : undefined;
  const from = newest === json ? CHECKPOINT_JSON_KEY : CHECKPOINT_KEY;
  return { checkpoint: { size: newest.size, root: newest.root, note: newest.note, from, ...(timestamp !== undefined ? { timestamp } : {}) }, problems, notices };
}

/**
 * The note with only the log's own signature line, as the sequencer keeps it in its lock
 * record (cosignatures belong to the published copy; a restart asks the witnesses again).
 */
export function logSignedNote(note: string, key: NoteVerifier): string {
  const parsed = parseNote(note);
  const mine = parsed.signatures.find((s) => verifySignature(parsed.body, s, key) !== null);
  if (!mine) throw new Error(`note has no signature by the log key ${key.name}`);
  return `${parsed.body}\n${mine.line}`;
}
