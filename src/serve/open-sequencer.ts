// The one place outside src/sequencer that builds a Sequencer: the local log and the AWS log
// hand it their storage, lock and signer, and it wires what every log's sequencer gets (the
// lookup index fed batch by batch, the witnesses, the batching settings).
import type { Logger } from 'pino';
import type { NoteSigner } from '../core/note.js';
import { indexFeeder } from '../index/catchup.js';
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
  /**
   * The lookup index, fed each batch (any gap first filled from the bundles `reader` reads);
   * `ready()`, if given, is awaited first: a rebuild running beside the log fills the gap.
   */
  readonly index?: { readonly index: LookupIndex; readonly reader: LogReader; readonly ready?: () => Promise<void> };
  readonly listeners?: readonly BatchListener[];
  readonly witnessing?: CheckpointWitnessing;
  readonly logger?: Logger;
}

/** Opens the log in storage (creating it if empty) under a sequencer; see Sequencer.open. */
export function openSequencer(p: SequencerParts): Promise<Sequencer> {
  const { index, listeners = [], ...rest } = p;
  return Sequencer.open({
    ...rest,
    listeners: [...(index ? [feederOf(index)] : []), ...listeners],
  });
}

function feederOf(index: NonNullable<SequencerParts['index']>): BatchListener {
  const feeder = indexFeeder(index.index, index.reader);
  const { ready } = index;
  if (!ready) return feeder;
  return {
    async onBatch(batch) {
      await ready();
      await feeder.onBatch(batch);
    },
  };
}
