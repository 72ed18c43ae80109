// The one place outside src/sequencer that builds a Sequencer: the local log and the AWS log
// hand it their storage, lock and signer, and it wires what every log's sequencer gets (the
// lookup index fed batch by batch and caught up beside the log, the witnesses, the batching
// settings).
import type { Logger } from 'pino';
import type { NoteSigner } from '../core/note.js';
import { indexFeeder, reconcileBeside } from '../index/catchup.js';
import type { LookupIndex } from '../index/types.js';
import type { LogReader } from '../read/reader.js';
import type { BatchListener, CheckpointWitnessing } from '../sequencer/contract.js';
import { Sequencer } from '../sequencer/sequencer.js';
import type { SequencerLock } from '../store/lock.js';
import type { ObjectStore } from '../store/store.js';

/** How a sequencer batches (SequencerOptions has each one's default and meaning). */
export interface BatchSettings {
  readonly batchInterval?: number;
  readonly maxBatch?: number;
  readonly minBatchSpacing?: number;
  readonly maxPending?: number;
}

export interface SequencerParts extends BatchSettings {
  readonly origin: string;
  readonly signer: NoteSigner;
  readonly store: ObjectStore;
  readonly staging: ObjectStore;
  readonly lock: SequencerLock;
  /** The lookup index, fed each batch from the bundles `reader` reads. */
  readonly index?: { readonly index: LookupIndex; readonly reader: LogReader };
  readonly listeners?: readonly BatchListener[];
  readonly witnessing?: CheckpointWitnessing;
  readonly logger?: Logger;
}

export interface OpenedSequencer {
  readonly sequencer: Sequencer;
  /**
   * Settles once the index has caught up with the log as it opened (a lost index, an upgrade,
   * a table restored behind the bucket), or once that attempt failed (logged; the next batch's
   * feeder fills the gap). The log serves meanwhile: reads the index does not cover answer 503
   * index_not_ready (src/api/index-coverage.ts) and anchors wait behind the same 503.
   */
  readonly indexReady: Promise<void>;
  /** Stops that catch-up at the end of the bundle it is indexing (a shutdown: call before closing the sequencer). */
  stopIndexCatchUp(): void;
}

/** Opens the log in storage (creating it if empty) under a sequencer; see Sequencer.open. */
export async function openSequencer(p: SequencerParts): Promise<OpenedSequencer> {
  const { index, listeners = [], ...rest } = p;
  // Batches wait for the catch-up, so two never write the index at once. Until the log is
  // open there is none (a staged batch re-applied at open fills its own gap).
  let indexReady: Promise<void> = Promise.resolve();
  const sequencer = await Sequencer.open({
    ...rest,
    listeners: [...(index ? [gatedFeeder(index, () => indexReady)] : []), ...listeners],
  });
  const stop = new AbortController();
  if (index) indexReady = reconcileBeside(index.index, index.reader, sequencer.checkpoint, p.logger, stop.signal);
  return { sequencer, indexReady, stopIndexCatchUp: () => stop.abort() };
}

function gatedFeeder(index: NonNullable<SequencerParts['index']>, ready: () => Promise<void>): BatchListener {
  const feeder = indexFeeder(index.index, index.reader);
  return {
    async onBatch(batch) {
      await ready();
      await feeder.onBatch(batch);
    },
  };
}
