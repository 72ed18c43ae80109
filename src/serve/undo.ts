// A start opens several things in order (the data directory's lock, the port, the log, the
// policy, the control plane); if a later step fails, what opened before it is released,
// newest first — the job of Go's defer or AsyncDisposableStack (not in Node 22).

export class Undo {
  private readonly steps: (() => unknown)[] = [];

  /** Remembers how to release something just opened. */
  push(release: () => unknown): void {
    this.steps.push(release);
  }

  /** `step()`'s result; if it throws, everything pushed so far is released first, then the error goes on. */
  async guard<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (e) {
      await this.run();
      throw e;
    }
  }

  /** Releases everything pushed, newest first (each once). */
  async run(): Promise<void> {
    for (let release = this.steps.pop(); release; release = this.steps.pop()) await release();
  }
}
