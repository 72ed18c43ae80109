// Following a log: one step at a time (read the checkpoint, check it, take in what is new),
// polling again at `interval` after a step that moved and backing off (doubling, up to
// `maxInterval`) while nothing changes or a step fails. `stele monitor` and
// `stele ledger mirror --follow` both run on this loop; each step does its own checking.

export type StepOutcome = 'moved' | 'idle' | 'stop';

export interface FollowOptions {
  /** One step; 'stop' ends the loop (a fork, an invalid object: nothing more to follow). */
  readonly step: () => Promise<StepOutcome>;
  readonly interval: number;
  readonly maxInterval: number;
  /** A step that threw (the network, a full disk): reported, then retried after the backoff. */
  readonly onError?: (e: Error) => void;
  /** Ends the loop between steps (SIGINT, SIGTERM); a step under way finishes first. */
  readonly signal?: AbortSignal;
}

/** Runs steps until one says 'stop' (returns 'stop') or `signal` aborts (returns 'aborted'). */
export async function follow(o: FollowOptions): Promise<'stop' | 'aborted'> {
  let wait = o.interval;
  while (!o.signal?.aborted) {
    let outcome: StepOutcome;
    try {
      outcome = await o.step();
    } catch (e) {
      o.onError?.(e as Error);
      outcome = 'idle';
    }
    if (outcome === 'stop') return 'stop';
    wait = outcome === 'moved' ? o.interval : Math.min(o.maxInterval, wait * 2);
    await sleep(wait, o.signal);
  }
  return 'aborted';
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
