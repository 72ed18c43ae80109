// Authentication failures are audited (each is a ledger entry and an audit event) without
// letting an unauthenticated client grow the ledger: failures are aggregated per source
// address and window. Per source and window, the first failure is recorded at once (an
// attack shows up without delay) and the rest are counted, then recorded as one summary
// entry when the window ends. At most `maxSources` sources get their own entries per window;
// failures from any further source go into one summary for all of them. So the ledger grows
// by at most 2 × maxSources + 1 entries per window, whatever arrives.

/** What one refused request contributes. */
export interface AuthFailure {
  readonly address: string;
  readonly reason: string;
  readonly method: string;
  readonly path: string;
  /** SHA-256 (hex) of the presented token, if any: correlates repeats, reveals nothing. */
  readonly tokenSha256?: string;
}

/** A record to anchor: a single failure (`count` 1) or a window's summary. */
export type FailureRecord = Record<string, unknown>;

interface Window {
  readonly start: number;
  count: number;
  readonly reasons: Record<string, number>;
  last: number;
}

export interface AuthFailureOptions {
  readonly windowMs: number;
  readonly maxSources: number;
  readonly now?: () => number;
  /** How often ended windows are looked for (default: a tenth of the window, at least 50 ms). */
  readonly tickMs?: number;
}

const OTHER_SOURCES = '*';

export class AuthFailureAggregator {
  private readonly windows = new Map<string, Window>();
  private overflow: Window | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly now: () => number;

  constructor(
    private readonly record: (r: FailureRecord) => void,
    private readonly o: AuthFailureOptions,
  ) {
    this.now = o.now ?? Date.now;
    this.timer = setInterval(() => this.flush(false), o.tickMs ?? Math.max(50, Math.floor(o.windowMs / 10)));
    this.timer.unref();
  }

  /** Counts one failure; records it at once when it opens its source's window. */
  add(f: AuthFailure): void {
    const now = this.now();
    const open = this.windows.get(f.address);
    if (open && now < open.start + this.o.windowMs) {
      tally(open, f.reason, now);
      return;
    }
    if (open) {
      this.windows.delete(f.address);
      this.summarise(f.address, open);
    }
    if (!open && this.windows.size >= this.o.maxSources) {
      if (this.overflow && now >= this.overflow.start + this.o.windowMs) this.closeOverflow();
      this.overflow ??= { start: now, count: 0, reasons: {}, last: now };
      tally(this.overflow, f.reason, now);
      return;
    }
    this.windows.set(f.address, { start: now, count: 0, reasons: {}, last: now });
    this.record({
      v: 1,
      kind: 'authentication_failure',
      time: new Date(now).toISOString(),
      reason: f.reason,
      method: f.method,
      path: f.path,
      remote_address: f.address,
      ...(f.tokenSha256 ? { token_sha256: f.tokenSha256 } : {}),
      count: 1,
      window_start: new Date(now).toISOString(),
      window_s: this.o.windowMs / 1000,
    });
  }

  /** Records the summaries of the windows that have ended (all of them when `all`). */
  flush(all: boolean): void {
    const now = this.now();
    for (const [address, w] of this.windows) {
      if (all || now >= w.start + this.o.windowMs) {
        this.windows.delete(address);
        this.summarise(address, w);
      }
    }
    if (this.overflow && (all || now >= this.overflow.start + this.o.windowMs)) this.closeOverflow();
  }

  /** Stops the timer and records what is still counted. */
  close(): void {
    clearInterval(this.timer);
    this.flush(true);
  }

  private closeOverflow(): void {
    const w = this.overflow!;
    this.overflow = undefined;
    this.summarise(OTHER_SOURCES, w);
  }

  private summarise(address: string, w: Window): void {
    if (w.count === 0) return;
    const reasons = Object.keys(w.reasons);
    this.record({
      v: 1,
      kind: 'authentication_failure',
      time: new Date(this.now()).toISOString(),
      // The most frequent reason names the summary; all of them are counted in `reasons`.
      reason: reasons.sort((a, b) => w.reasons[b]! - w.reasons[a]!)[0]!,
      reasons: w.reasons,
      remote_address: address === OTHER_SOURCES ? 'other sources' : address,
      count: w.count,
      window_start: new Date(w.start).toISOString(),
      window_s: this.o.windowMs / 1000,
      last_failure: new Date(w.last).toISOString(),
    });
  }
}

function tally(w: Window, reason: string, now: number): void {
  w.count++;
  w.reasons[reason] = (w.reasons[reason] ?? 0) + 1;
  w.last = now;
}
