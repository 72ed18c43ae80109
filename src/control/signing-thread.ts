// A worker thread that makes the audit stream's Ed25519 signatures, so the event loop (which
// also runs the sequencer and every request) only hands over a group of messages and takes
// back their signatures: one message each way per group. At ~45 µs a signature, signing on
// the event loop had taken a tenth of it under load; node:crypto's callback form (the libuv
// pool) moved it too, but woke a pool thread per signature and cost more CPU than it saved.
import type { KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';

// Evaluated plain JavaScript: nothing to resolve from the TypeScript sources or from dist/.
// Dynamic imports work whether the evaluation is CommonJS or, under --input-type=module, ESM.
const SOURCE = `
Promise.all([import('node:worker_threads'), import('node:crypto')]).then(([{ parentPort, workerData }, { sign }]) => {
  parentPort.on('message', ({ id, messages }) => {
    const signatures = messages.map((m) => sign(null, Buffer.from(m, 'utf8'), workerData.key).toString('base64'));
    parentPort.postMessage({ id, signatures });
  });
});
`;

interface Waiting {
  resolve(signatures: string[]): void;
  reject(e: Error): void;
}

interface Reply {
  readonly id: number;
  readonly signatures: string[];
}

export class SigningThread {
  /** The running thread and the groups it has not answered yet. */
  private thread: { readonly worker: Worker; readonly waiting: Map<number, Waiting> } | undefined;
  private nextId = 0;

  constructor(private readonly key: KeyObject) {}

  /** Base64 Ed25519 signatures of `messages` (UTF-8), in order. The thread starts on first use. */
  sign(messages: readonly string[]): Promise<string[]> {
    const { worker, waiting } = this.thread ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      // Referenced only while it owes an answer: an idle signer never keeps a process alive.
      worker.ref();
      worker.postMessage({ id, messages });
    });
  }

  private start(): NonNullable<SigningThread['thread']> {
    // No execArgv: the thread needs none of the process's loader flags (tsx under the benches and tests).
    const worker = new Worker(SOURCE, { eval: true, workerData: { key: this.key }, execArgv: [] });
    const thread = { worker, waiting: new Map<number, Waiting>() };
    const { waiting } = thread;
    this.thread = thread;
    worker.on('message', ({ id, signatures }: Reply) => {
      waiting.get(id)?.resolve(signatures);
      waiting.delete(id);
      if (waiting.size === 0) worker.unref();
    });
    // A failed thread fails what it owed; the next group starts a new one.
    worker.on('error', (e) => this.stop(thread, e));
    worker.on('exit', (code) => this.stop(thread, new Error(`the signing thread exited (code ${code})`)));
    return thread;
  }

  /** Forgets `thread` and rejects the groups it owed. */
  private stop(thread: NonNullable<SigningThread['thread']>, e: Error): void {
    if (this.thread === thread) this.thread = undefined;
    for (const w of thread.waiting.values()) w.reject(e);
    thread.waiting.clear();
  }

  /** Stops the thread; groups still owed are rejected. */
  async close(): Promise<void> {
    const thread = this.thread;
    if (!thread) return;
    this.stop(thread, new Error('the signing thread was stopped'));
    await thread.worker.terminate();
  }
}
