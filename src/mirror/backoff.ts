// How long a mirror client waits before trying again: exponential in the attempts that made
// no progress, capped, with jitter so that many logs pushing to one mirror do not retry in step.

/** The wait before retry number `attempt` (1 for the first retry), in ms: full doubling, half of it jittered. */
export function backoffMs(attempt: number, baseMs: number, capMs: number): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Sleeps `ms`, or less if `signal` aborts (the caller's next request then fails with its reason). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
