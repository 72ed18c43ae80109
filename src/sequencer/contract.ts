// The sequencer's contract: the types and errors the rest of Stele (the API, the enterprise
// control plane, the lookup index, witnesses, the CLI) uses to talk to a sequencer. Import
// these from here, never from the class file (sequencer.ts), so a caller depends on what a
// sequencer promises and not on how it keeps those promises.
//
// The promises, in short:
// - `submit()` resolves with an AnchorReceipt only once the entry is in a published
//   checkpoint: its tiles and bundle are written, the lock record names the batch (a crash
//   from then on re-publishes it, never forks), `checkpoint.json` is swapped and every
//   BatchListener has seen the batch.
// - An `OnCommitted` callback runs earlier, at the commit point (the lock record swapped to
//   the new size): the entry's seq and hash are final and the entry is published even across
//   a crash, but no checkpoint holding it is public yet.
// - A rejection says whether the anchor was recorded: see each error below.
import type { SignedCheckpoint } from '../core/checkpoint.js';
import type { CanonicalEntry } from '../core/entry.js';
import type { PublishedCheckpoint } from './published-checkpoint.js';

export {
  type PublishedCheckpoint,
  decodePublishedCheckpoint,
  encodePublishedCheckpoint,
} from './published-checkpoint.js';

/** What `submit()` resolves with: the entry's place in the log and the checkpoint that first publishes it. */
export interface AnchorReceipt {
  readonly seq: number;
  readonly entry: CanonicalEntry;
  readonly entryHash: Uint8Array;
  /** The first published checkpoint that includes the entry. */
  readonly checkpoint: PublishedCheckpoint;
  /** Audit path to `checkpoint`'s root, computed on demand from tiles held in memory. */
  inclusionProof(): Uint8Array[];
  /**
   * The entry was in the log (or in flight for an earlier identical request) before this
   * request: nothing new was appended (src/sequencer/in-flight-duplicates.ts).
   */
  readonly existing?: boolean;
}

/** The published entry with an anchor identity, as a receipt against the current checkpoint (src/sequencer/in-flight-duplicates.ts). */
export type FindPublished = (identity: string, digest: string) => Promise<AnchorReceipt | undefined>;

/** How a request is submitted. */
export interface SubmitOptions {
  /** Append a new entry even when an identical anchor exists (src/core/duplicates.ts). */
  readonly allowDuplicate?: boolean;
}

/** Hears of an entry's place at its batch's commit point (durable, not yet in a public checkpoint). */
export type OnCommitted = (seq: number, entryHash: Uint8Array) => void;

/** What listeners (the lookup index, metrics) learn of each published batch. */
export interface IntegratedBatch {
  readonly fromSize: number;
  /** Entries in the batch: leaves fromSize .. fromSize + count - 1. */
  readonly count: number;
  /**
   * Entry `seq` of the batch. Built when asked (no array of the whole batch): a listener
   * that walks a 65,536-entry batch makes objects that die young instead of a batch's
   * worth that outlives it in the old generation.
   */
  entryAt(seq: number): CanonicalEntry;
  readonly checkpoint: PublishedCheckpoint;
  /** Time from taking the batch to its publish, in ms (absent for recovered batches). */
  readonly integrationMs?: number;
}

/** An IntegratedBatch over entries already in memory (re-indexing from bundles, tests). */
export function batchOfEntries(
  fromSize: number,
  entries: readonly CanonicalEntry[],
  checkpoint: PublishedCheckpoint,
): IntegratedBatch {
  return {
    fromSize,
    count: entries.length,
    entryAt(seq) {
      const e = entries[seq - fromSize];
      if (!e) throw new RangeError(`entry ${seq} is not in this batch`);
      return e;
    },
    checkpoint,
  };
}

/**
 * Derived data kept beside the log (the lookup index). Each listener sees every batch once,
 * in order, after its tiles are written and before its anchors are acknowledged. A listener
 * that throws is logged and skipped: what it holds must be rebuildable from the records.
 */
export interface BatchListener {
  onBatch(batch: IntegratedBatch): Promise<void>;
}

/** Witness cosigning (src/witness/collector.ts): the note to publish, or null while the policy is unmet. */
export interface CheckpointWitnessing {
  /**
   * At start, before anything is cosigned: throws (a LogStateError) if a witness holds a larger
   * tree of this log than `checkpoint`, the one the log resumes from: the log was rolled back.
   */
  checkWitnessedSizes?(checkpoint: SignedCheckpoint): Promise<unknown>;
  /**
   * Once open, the sequencer hands over how to stop it: for a rollback a party reports outside
   * a round (a mirror fed in the background), the same stop a LogStateError from cosign causes.
   */
  stopWith?(stop: (err: LogStateError) => void): void;
  cosign(
    checkpoint: SignedCheckpoint,
    consistencyFrom: (oldSize: number) => Promise<Uint8Array[]>,
  ): Promise<string | null>;
}

/** Too many anchors are accepted but not yet acknowledged: this one was not recorded; retry later (HTTP 503). */
export class PoolFullError extends Error {
  override name = 'PoolFullError';
}

/**
 * The sequencer stopped: closed, or it lost the lock to another sequencer. An anchor rejected
 * with it before its commit point was not recorded; one rejected after (shutdown while the
 * witnesses had not cosigned) is in the log and published on restart: look it up before anchoring again.
 */
export class SequencerStoppedError extends Error {
  override name = 'SequencerStoppedError';
}

/** An anchor was not acknowledged in time; it may still be committed (look it up before anchoring again). */
export class AnchorTimeoutError extends Error {
  override name = 'AnchorTimeoutError';
}

/** Storage keeps failing (full, unreachable): the anchor was not recorded; retry later. */
export class StorageUnavailableError extends Error {
  override name = 'StorageUnavailableError';
}

/** The request can never be an entry (a field is not a string, the entry is too large): nothing was recorded; do not retry it. */
export class UnrecordableRequestError extends RangeError {
  override name = 'UnrecordableRequestError';
}

/**
 * The log's storage is not in a state a sequencer may build on (the lock and the public
 * checkpoint disagree, a witness holds a larger tree): an operator must act; never retried.
 */
export class LogStateError extends Error {
  override name = 'LogStateError';
}
