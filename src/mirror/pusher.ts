// The log pushes its entries to tlog-mirrors (`stele serve --mirror <vkey>=<url>`), behind the
// sequencer's witnessing hook so the sequencer itself does not change:
// - no mirror required: after each publish, in the background, the latest checkpoint's
//   entries go to every mirror (a push in flight is never doubled; the next one takes the
//   newest checkpoint), and a mirror that is down only falls behind;
// - `required` mirrors: each checkpoint is pushed before it is published, beside the witness
//   round, and published only with at least that many verified mirror cosignatures, which go
//   into the note like witness cosignatures. Until then its anchors wait (the sequencer
//   retries the round), so a copy outside the operator's hands exists before anyone sees it.
// The entries and proofs are read from the log's own objects: the sequencer has written a
// batch's tiles and bundles before it asks for cosignatures.
import type { Logger } from 'pino';
import type { SignedCheckpoint } from '../core/checkpoint.js';
import type { CheckpointWitnessing } from '../sequencer/contract.js';
import type { ObjectReader } from '../store/store.js';
import { type MirrorEndpoint, MirrorClient, logDataFromObjects } from './client.js';

export interface MirrorPushOptions {
  readonly mirrors: readonly MirrorEndpoint[];
  /** Mirror cosignatures a checkpoint needs before it is published (0: push after publishing). */
  readonly required: number;
  /** Deadline of one round of pushes, in ms (default 10,000). */
  readonly timeoutMs?: number;
  /** The log's published objects. */
  readonly objects: ObjectReader;
  readonly logger?: Logger;
}

export interface MirrorOutcome {
  readonly name: string;
  readonly ok: boolean;
  readonly reason?: string;
}

export class MirrorPusher {
  private readonly clients: MirrorClient[];
  lastRound: MirrorOutcome[] = [];
  private inFlight: Promise<void> | null = null;
  private queued: { note: string; size: number } | null = null;

  constructor(private readonly o: MirrorPushOptions) {
    if (o.required > o.mirrors.length)
      throw new Error(`${o.required} mirror cosignatures required, but only ${o.mirrors.length} mirror(s) configured`);
    if (new Set(o.mirrors.map((m) => m.verifier.name)).size !== o.mirrors.length)
      throw new Error('two mirrors share a key name');
    this.clients = o.mirrors.map((m) => new MirrorClient(m));
  }

  /** Pushes to every mirror at once; the verified cosignature lines of those that answered in time. */
  async round(note: string, size: number): Promise<string[]> {
    const signal = AbortSignal.timeout(this.o.timeoutMs ?? 10_000);
    const data = logDataFromObjects(this.o.objects, size);
    const results = await Promise.all(
      this.clients.map((c) =>
        c.push(note, data, signal).then(
          (line): { name: string; ok: boolean; line: string; reason?: string } => ({ name: c.name, ok: true, line }),
          (e: unknown) => ({ name: c.name, ok: false, line: '', reason: (e as Error).message }),
        ),
      ),
    );
    this.lastRound = results.map(({ name, ok, reason }) => ({ name, ok, ...(reason ? { reason } : {}) }));
    for (const r of results)
      if (!r.ok) this.o.logger?.warn({ mirror: r.name, size, reason: r.reason }, 'mirror push failed');
    return results.filter((r) => r.ok).map((r) => r.line);
  }

  /**
   * The sequencer's witnessing hook with mirrors added: `inner` (the witness collector, if
   * any) as it was, plus the required mirror cosignatures; without a requirement, `inner`
   * alone (mirrors are then fed by published()).
   */
  witnessing(inner: CheckpointWitnessing | undefined): CheckpointWitnessing | undefined {
    if (this.o.required === 0) return inner;
    const required = this.o.required;
    return {
      ...(inner?.checkWitnessedSizes
        ? { checkWitnessedSizes: (cp: SignedCheckpoint) => inner.checkWitnessedSizes!(cp) }
        : {}),
      cosign: async (cp, consistencyFrom) => {
        const [witnessed, lines] = await Promise.all([
          inner ? inner.cosign(cp, consistencyFrom) : Promise.resolve(cp.note),
          this.round(cp.note, cp.size),
        ]);
        if (lines.length < required) {
          this.o.logger?.warn(
            { size: cp.size, cosigned: lines.length, required },
            'mirror quorum not met; the checkpoint waits for the next round',
          );
          return null;
        }
        return witnessed === null ? null : witnessed + lines.join('');
      },
    };
  }

  /** After a publish (no mirror required): bring the mirrors up to `note` in the background. */
  published(note: string, size: number): void {
    if (this.o.required > 0) return;
    this.queued = { note, size };
    if (this.inFlight) return;
    const drain = async (): Promise<void> => {
      while (this.queued) {
        const next = this.queued;
        this.queued = null;
        await this.round(next.note, next.size).catch((e: unknown) =>
          this.o.logger?.warn({ err: (e as Error).message }, 'mirror push failed'),
        );
      }
    };
    this.inFlight = drain().finally(() => (this.inFlight = null));
  }

  /** Waits for a background push in flight (closing, tests). */
  async idle(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }
}
