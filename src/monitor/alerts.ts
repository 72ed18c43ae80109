// Where a monitor's alerts go. An alert is first written into the monitor's state (its
// outbox) in the same atomic write that records the entries it was raised for, and leaves
// the outbox for a sink only once that sink took it: stdout once the line is written, a
// webhook once it answered 2xx. A crash at any moment therefore loses no alert and raises
// none twice; it can only hand one to a sink again (same `id`) if the process dies between
// the sink taking it and the next state write.

export type Alert =
  | {
      readonly kind: 'watch';
      readonly seq: number;
      readonly matched: string[];
      readonly entry: Record<string, unknown>;
    }
  | {
      readonly kind: 'fork';
      readonly severity: 'critical';
      readonly message: string;
      readonly notes: readonly [string, string];
    }
  | { readonly kind: 'invalid'; readonly severity: 'critical'; readonly message: string; readonly source: string };

/** An alert as raised: with the id a receiver can deduplicate on. */
export type RaisedAlert = Alert & { readonly id: string };

export interface AlertSink {
  /** Names the sink in the state's outbox (stable across restarts) and in messages. */
  readonly name: string;
  /** Resolves once the sink has the alert; throws if it could not take it (it stays pending). */
  deliver(a: RaisedAlert): Promise<void>;
}

/** The JSON an alert is shown as, on stdout and in a webhook body. */
export const alertJson = (a: RaisedAlert): string => JSON.stringify({ alert: a.kind, ...a });

/** One JSON line per alert on a stream (stdout). */
export class LineSink implements AlertSink {
  readonly name = 'stdout';
  constructor(private readonly write: (line: string) => void) {}
  async deliver(a: RaisedAlert): Promise<void> {
    this.write(`${alertJson(a)}\n`);
  }
}

export interface WebhookOptions {
  /** Tries per delivery (default 4); the monitor's next step tries again after that. */
  readonly attempts?: number;
  /** First pause between tries, doubled each time (default 500 ms). */
  readonly backoffMs?: number;
  /** Per request (default 10 s). */
  readonly timeoutMs?: number;
}

/**
 * POSTs each alert as JSON, with its id in `Idempotency-Key`; a 2xx answer delivers it. The
 * URL may carry a token, so messages name only its origin.
 */
export class WebhookSink implements AlertSink {
  readonly name = 'webhook';
  private readonly shown: string;

  constructor(
    private readonly url: string,
    private readonly o: WebhookOptions = {},
  ) {
    this.shown = new URL(url).origin;
  }

  async deliver(a: RaisedAlert): Promise<void> {
    const attempts = this.o.attempts ?? 4;
    let pause = this.o.backoffMs ?? 500;
    let last = '';
    for (let i = 0; i < attempts; i++) {
      if (i > 0) {
        await new Promise((r) => setTimeout(r, pause));
        pause *= 2;
      }
      try {
        const res = await fetch(this.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': a.id },
          body: alertJson(a),
          signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) return;
        last = `HTTP ${res.status}`;
      } catch (e) {
        const cause = (e as Error & { cause?: Error }).cause;
        last = cause?.message ?? (e as Error).message;
      }
    }
    throw new Error(`webhook ${this.shown}: ${last} after ${attempts} tries`);
  }
}
