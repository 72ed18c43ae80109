// The sequencer's worker thread: sequences runs of requests (src/sequencer/sequencing.ts)
// in the order they arrive, keeping the chain between runs, so the sequencer's own thread
// only builds tiles, signs, writes and answers.
import { parentPort } from 'node:worker_threads';
import type { AnchorRequest } from '../anchor.js';
import { type ChainState, sequenceRun } from './sequencing.js';

export type ToWorker =
  | { readonly kind: 'reset'; readonly state: ChainState }
  | { readonly kind: 'run'; readonly epoch: number; readonly nowMs: number; readonly requests: readonly AnchorRequest[] };

let chain: ChainState = { next: 0, prior: new Uint8Array(32), lastMs: 0 };

parentPort!.on('message', (m: ToWorker) => {
  if (m.kind === 'reset') {
    chain = m.state;
    return;
  }
  const run = sequenceRun(m.requests, chain, m.nowMs);
  chain = run.state;
  parentPort!.postMessage({ epoch: m.epoch, run }, [run.canonicals.buffer, run.ends.buffer, run.entryHashes.buffer, run.leafHashes.buffer] as ArrayBuffer[]);
});
