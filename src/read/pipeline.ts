// Bounded-concurrency helpers: loads run ahead in parallel (up to a window) while results are
// consumed strictly in order, so a verifier can stream a log bundle by bundle in constant memory.

/**
 * Calls `load(i)` for i in [from, to) with at most `window` loads in flight and
 * `consume(i, value)` in increasing i. Stops at the first error (from either side).
 */
export async function orderedPipeline<T>(
  from: number,
  to: number,
  window: number,
  load: (i: number) => Promise<T>,
  consume: (i: number, value: T) => void | Promise<void>,
): Promise<void> {
  const queue: Promise<T>[] = [];
  let next = from;
  const start = () => {
    const p = load(next++);
    p.catch(() => undefined); // awaited in order below; avoids unhandled-rejection noise
    queue.push(p);
  };
  while (next < to && queue.length < window) start();
  for (let i = from; i < to; i++) {
    const value = await queue.shift()!;
    if (next < to) start();
    await consume(i, value);
  }
}

/** Runs `fn` over [from, to) with at most `concurrency` calls at once (order not kept). */
export async function parallelRange(
  from: number,
  to: number,
  concurrency: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  let next = from;
  let failed: unknown;
  const worker = async () => {
    while (next < to && failed === undefined) {
      const i = next++;
      try {
        await fn(i);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, to - from)) }, worker));
  if (failed !== undefined) throw failed;
}
