// Which signed checkpoint a log has published, with what is wrong with the two objects that
// hold it. The sequencer swaps `checkpoint` (the note tlog clients read) and `checkpoint.json`
// (the note and its publish time) side by side, so a crash between the two can leave either
// one behind; both are signed by the log key, so the larger is the latest the log committed
// to. Shared by `stele log fsck` and `stele log recover`.
import { openCheckpoint } from '../core/checkpoint.js';
import { bytesEqual, toHex } from '../core/hash.js';
import { type NoteVerifier, parseNote, verifySignature } from '../core/note.js';
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY } from '../store/layout.js';
import { publishedCheckpointOf } from '../sequencer/lock-check.js';
import { decodePublishedCheckpoint } from '../sequencer/contract.js';
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
  readonly problems: {
    readonly object: string;
    readonly message: string;
    /** The object does not verify under the log key (not a fork): it can be rewritten from its twin. */
    readonly unverified?: true;
  }[];
  /** What is odd but harmless (one object behind the other: the next start publishes both again). */
  readonly notices: { readonly object: string; readonly message: string }[];
  /** Neither object exists. */
  readonly absent: boolean;
}

/**
 * Reads `checkpoint` and `checkpoint.json`; the one to check against is the sequencer's choice
 * (src/sequencer/lock-check.ts publishedCheckpointOf); this adds why each object that is not
 * chosen failed, and whether the two disagree.
 */
export async function readPublished(store: ObjectReader, key: NoteVerifier): Promise<PublishedReading> {
  const [noteBytes, jsonBytes] = await Promise.all([store.get(CHECKPOINT_KEY), store.get(CHECKPOINT_JSON_KEY)]);
  const problems: PublishedReading['problems'] = [];
  const notices: PublishedReading['notices'] = [];
  const open = <T>(object: string, fn: () => T): T | null => {
    try {
      return fn();
    } catch (e) {
      problems.push({
        object,
        message: `${object} does not verify under the log key: ${(e as Error).message}`,
        unverified: true,
      });
      return null;
    }
  };
  const note = noteBytes && open(CHECKPOINT_KEY, () => openCheckpoint(Buffer.from(noteBytes).toString('utf8'), key));
  const json = jsonBytes && open(CHECKPOINT_JSON_KEY, () => decodePublishedCheckpoint(jsonBytes, key));
  // Neither exists: what that means depends on the lock record (fsck says).
  const absent = !noteBytes && !jsonBytes;
  if (note && json && note.size === json.size && !bytesEqual(note.root, json.root)) {
    problems.push({
      object: CHECKPOINT_KEY,
      message: `${CHECKPOINT_KEY} and ${CHECKPOINT_JSON_KEY} sign two different roots for size ${note.size} (${toHex(note.root).slice(0, 16)}…, ${toHex(json.root).slice(0, 16)}…): the log forked`,
    });
  } else if (note && json && note.size !== json.size) {
    const [older, newer] =
      note.size < json.size ? [CHECKPOINT_KEY, CHECKPOINT_JSON_KEY] : [CHECKPOINT_JSON_KEY, CHECKPOINT_KEY];
    notices.push({
      object: older,
      message: `${older} (size ${Math.min(note.size, json.size)}) is behind ${newer} (size ${Math.max(note.size, json.size)}): a crash between the two swaps; the next start publishes both again`,
    });
  }
  const chosen = publishedCheckpointOf(jsonBytes ?? undefined, noteBytes ?? undefined, key);
  if (!chosen) return { checkpoint: null, problems, notices, absent };
  // A checkpoint only the note holds has no publish time (guard.ts leaves it empty).
  const fromJson = chosen.timestamp !== '';
  return {
    checkpoint: {
      size: chosen.size,
      root: chosen.root,
      note: chosen.note,
      from: fromJson ? CHECKPOINT_JSON_KEY : CHECKPOINT_KEY,
      ...(fromJson ? { timestamp: chosen.timestamp } : {}),
    },
    problems,
    notices,
    absent,
  };
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
