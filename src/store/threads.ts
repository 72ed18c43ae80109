// Worker threads of the process: starting one from this package's own modules, and a thread
// that answers requests (one message each way per request) for the store's writers and the
// audit stream's signer.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts `./<name>.js` next to `from` (an import.meta.url) as a worker: the compiled module,
 * or from the TypeScript sources (tests, benches) the `.ts` one through tsx's loader.
 */
export function startModuleWorker(from: string, name: string, options: WorkerOptions = {}): Worker {
  if (from.endsWith('.ts')) {
    const module = new URL(`./${name}.ts`, from).href;
    const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(module)}); })`;
    return new Worker(boot, { ...options, eval: true });
  }
  return new Worker(new URL(`./${name}.js`, from), options);
}

/** What crosses to a request thread and back: the body, tagged with the request's id. */
export interface Tagged<T> {
  readonly id: number;
  readonly body: T;
}

interface Waiting<Res> {
  resolve(reply: Res): void;
  reject(e: Error): void;
}

/**
 * A worker that answers each request once, in any order (`Tagged` messages both ways).
 * Started on first use, and referenced only while it owes an answer, so an idle one never
 * keeps a process alive. A thread that fails or exits rejects what it owed; the next request
 * starts a new one.
 */
export class RequestThread<Req, Res> {
  private thread: { readonly worker: Worker; readonly waiting: Map<number, Waiting<Res>> } | undefined;
  private nextId = 0;

  /** `start` makes the worker; `what` names it in errors. */
  constructor(
    private readonly start: () => Worker,
    private readonly what: string,
  ) {}

  request(body: Req, transfer: ArrayBuffer[] = []): Promise<Res> {
    const { worker, waiting } = this.thread ?? this.open();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ id, body } satisfies Tagged<Req>, transfer);
    });
  }

  /** Stops the thread; requests still owed are rejected. */
  async close(): Promise<void> {
    const thread = this.thread;
    if (!thread) return;
    this.stop(thread, new Error(`the ${this.what} was stopped`));
    await thread.worker.terminate();
  }

  private open(): NonNullable<RequestThread<Req, Res>['thread']> {
    const worker = this.start();
    const thread = { worker, waiting: new Map<number, Waiting<Res>>() };
    this.thread = thread;
    worker.on('message', ({ id, body }: Tagged<Res>) => {
      thread.waiting.get(id)?.resolve(body);
      thread.waiting.delete(id);
      if (thread.waiting.size === 0) worker.unref();
    });
    worker.on('error', (e) => this.stop(thread, e));
    worker.on('exit', (code) => this.stop(thread, new Error(`the ${this.what} exited (code ${code})`)));
    return thread;
  }

  /** Forgets `thread` and rejects the requests it owed. */
  private stop(thread: NonNullable<RequestThread<Req, Res>['thread']>, e: Error): void {
    if (this.thread === thread) this.thread = undefined;
    for (const w of thread.waiting.values()) w.reject(e);
    thread.waiting.clear();
  }
}
