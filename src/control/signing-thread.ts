// A worker thread that makes the audit stream's Ed25519 signatures, so the event loop (which
// also runs the sequencer and every request) only hands over a group of messages and takes
// back their signatures: one message each way per group. At ~45 µs a signature, signing on
// the event loop had taken a tenth of it under load; node:crypto's callback form (the libuv
// pool) moved it too, but woke a pool thread per signature and cost more CPU than it saved.
import type { KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { RequestThread } from '../store/threads.js';

// Evaluated plain JavaScript: nothing to resolve from the TypeScript sources or from dist/.
// Dynamic imports work whether the evaluation is CommonJS or, under --input-type=module, ESM.
// It answers src/store/threads.ts's Tagged messages: a group of messages in, their signatures out.
const SOURCE = `
Promise.all([import('node:worker_threads'), import('node:crypto')]).then(([{ parentPort, workerData }, { sign }]) => {
  parentPort.on('message', ({ id, body }) => {
    parentPort.postMessage({ id, body: body.map((m) => sign(null, Buffer.from(m, 'utf8'), workerData.key).toString('base64')) });
  });
});
`;

export class SigningThread {
  private readonly thread: RequestThread<readonly string[], string[]>;

  constructor(key: KeyObject) {
    // No execArgv: the thread needs none of the process's loader flags (tsx under the benches and tests).
    this.thread = new RequestThread(
      () => new Worker(SOURCE, { eval: true, workerData: { key }, execArgv: [] }),
      'signing thread',
    );
  }

  /** Base64 Ed25519 signatures of `messages` (UTF-8), in order. The thread starts on first use. */
  sign(messages: readonly string[]): Promise<string[]> {
    return this.thread.request(messages);
  }

  /** Stops the thread; groups still owed are rejected. */
  close(): Promise<void> {
    return this.thread.close();
  }
}
