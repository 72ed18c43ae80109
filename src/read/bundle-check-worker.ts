// A worker thread of the audit: checks the bundles it is sent (src/read/bundle-check.ts).
import { parentPort } from 'node:worker_threads';
import { type Tagged, announceLoaded } from '../store/threads.js';
import { type BundleInput, type BundleVerdict, checkBundle } from './bundle-check.js';

parentPort!.on('message', ({ id, body }: Tagged<BundleInput>) => {
  const verdict = checkBundle(body);
  parentPort!.postMessage(
    { id, body: verdict } satisfies Tagged<BundleVerdict>,
    verdict.row ? [verdict.row.buffer as ArrayBuffer] : [],
  );
});

// Its modules are evaluated: it may be terminated from now on (src/store/threads.ts).
announceLoaded();
