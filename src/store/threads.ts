// Worker threads of the process: starting one from this package's own modules, and a thread
// that answers requests (one message each way per request) for the store's writers and the
// audit stream's signer.
import { Worker, type WorkerOptions, workerData } from 'node:worker_threads';

/**
 * A worker's flag, in shared memory, that it sets once its top-level code has run
 * (announceLoaded). Until then its modules may still be evaluating asynchronously (a
 * top-level await anywhere in the graph, as in src/core/hash.ts), and terminating the worker
 * then aborts the whole process inside V8 ("Check failed: (location_) != nullptr" in
 * AsyncModuleExecutionFulfilled). Shared memory, not a message: a 'message' listener added
 * to a worker here stopped the sequencing pool's worker from hearing anything.
 */
const LOADED_FLAG = 'steleLoadedFlag';

/** Set at the end of a worker module's top-level code: its modules are evaluated. */
export function announceLoaded(): void {
  const flag = (workerData as Record<string, unknown> | null | undefined)?.[LOADED_FLAG];
  if (!(flag instanceof Int32Array)) return;
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

/** Per worker started here: its loaded flag, and whether it has exited (a failed load). */
const loaded = new WeakMap<Worker, { readonly flag: Int32Array; exited: Promise<unknown> }>();

/**
 * Terminates `worker` once its modules are evaluated (announceLoaded), it exited, or `waitMs`
 * passed; at once for a worker not started by startModuleWorker.
 */
export async function terminateWhenLoaded(worker: Worker, waitMs = 5000): Promise<number> {
  const tracked = loaded.get(worker);
  if (tracked && Atomics.load(tracked.flag, 0) === 0) {
    const wait = Atomics.waitAsync(tracked.flag, 0, 0, waitMs);
    if (wait.async) await Promise.race([wait.value, tracked.exited]);
  }
  return worker.terminate();
}

/** `options` with a loaded flag added to its workerData (an object, or none). */
function withLoadedFlag(options: WorkerOptions): [WorkerOptions, Int32Array] {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const data = (options.workerData ?? {}) as Record<string, unknown>;
  return [{ ...options, workerData: { ...data, [LOADED_FLAG]: flag } }, flag];
}

function tracked(worker: Worker, flag: Int32Array): Worker {
  loaded.set(worker, { flag, exited: new Promise((r) => worker.once('exit', r)) });
  return worker;
}

/**
 * Starts `./<name>.js` next to `from` (an import.meta.url) as a worker: the compiled module,
 * or from the TypeScript sources (tests, benches) the `.ts` one through tsx's loader. The
 * module must call announceLoaded at the end of its top-level code (see terminateWhenLoaded).
 */
export function startModuleWorker(from: string, name: string, options: WorkerOptions = {}): Worker {
  const [withFlag, flag] = withLoadedFlag(options);
  if (from.endsWith('.ts')) {
    const module = new URL(`./${name}.ts`, from).href;
    const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(module)}); })`;
    return tracked(new Worker(boot, { ...withFlag, eval: true }), flag);
  }
  return tracked(new Worker(new URL(`./${name}.js`, from), withFlag), flag);
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
    await terminateWhenLoaded(thread.worker);
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
