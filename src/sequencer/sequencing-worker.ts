// The sequencer's worker thread: sequences runs of requests (src/sequencer/sequencing.ts)
// in the order they arrive, keeping the chain between runs, so the sequencer's own thread
// only builds tiles, signs, writes and answers.
import { parentPort } from 'node:worker_threads';
import { announceLoaded } from '../store/threads.js';
import { type ChainState, type RecordRun, runBuffers, sequenceRun } from './sequencing.js';

export type ToWorker =
  | { readonly kind: 'reset'; readonly state: ChainState }
  | { readonly kind: 'run'; readonly epoch: number; readonly nowMs: number; readonly records: RecordRun };

let chain: ChainState = { next: 0, prior: new Uint8Array(32), lastMs: 0 };

parentPort!.on('message', (m: ToWorker) => {
  if (m.kind === 'reset') {
    chain = m.state;
    return;
  }
  const run = sequenceRun(m.records, chain, m.nowMs);
  chain = run.state;
  parentPort!.postMessage({ epoch: m.epoch, run }, runBuffers(run));
});

// Its modules are evaluated: it may be terminated from now on (src/store/threads.ts).
announceLoaded();
