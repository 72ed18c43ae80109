// A checkpoint as the log publishes it: the signed note (with any cosignatures) and the
// time it was published, stored together in `checkpoint.json` so readers never mix two.
import { type SignedCheckpoint, openCheckpoint } from '../core/checkpoint.js';
import type { NoteVerifier } from '../core/note.js';

/** A checkpoint as published: signed note (with any cosignatures) plus its time. */
export interface PublishedCheckpoint extends SignedCheckpoint {
  /** ISO 8601 UTC with milliseconds; strictly increasing from one checkpoint to the next. */
  readonly timestamp: string;
}

/** The bytes of `checkpoint.json`: the published note and its time, one object so readers never mix versions. */
export function encodePublishedCheckpoint(c: PublishedCheckpoint): Uint8Array {
  return Buffer.from(JSON.stringify({ note: c.note, timestamp: c.timestamp }));
}

/** Parses `checkpoint.json` and verifies its note under the log key (throws if it does not). */
export function decodePublishedCheckpoint(json: Uint8Array, logKey: NoteVerifier): PublishedCheckpoint {
  const { note, timestamp } = JSON.parse(Buffer.from(json).toString('utf8')) as { note: unknown; timestamp: unknown };
  if (typeof note !== 'string' || typeof timestamp !== 'string')
    throw new Error('checkpoint.json lacks its note or timestamp');
  return { ...openCheckpoint(note, logKey), timestamp };
}
