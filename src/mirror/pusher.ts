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
// A mirror that holds more of the log than it has (at start, or answering any push) stops the
// log whatever the quorum, through the one path a witness's larger size takes: a
// WitnessRollbackError from the hook (checkWitnessedSizes at start, cosign before a publish),
// or, found by a background push, handed to the sequencer's stop (stopWith).
import type { Logger } from 'pino';
import type { SignedCheckpoint } from '../core/checkpoint.js';
import type { NoteVerifier } from '../core/note.js';
import type { CheckpointWitnessing, LogStateError } from '../sequencer/contract.js';
import { WitnessRollbackError, probeHeldSize } from '../witness/collector.js';
import { backoffMs } from './backoff.js';
import type { ObjectReader } from '../store/store.js';
import { type MirrorEndpoint, MirrorClient, logDataFromObjects } from './client.js';

export interface MirrorPushOptions {
  readonly mirrors: readonly MirrorEndpoint[];
  /** The log's key: a mirror's copy is opened with it (a fork there is a rollback). */
  readonly log: NoteVerifier;
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

/** Background pushes to a mirror that keeps failing wait this long at most between tries. */
const BACKGROUND_RETRY_BASE_MS = 1_000;
const BACKGROUND_RETRY_CAP_MS = 60_000;

export class MirrorPusher {
  private readonly clients: MirrorClient[];
  lastRound: MirrorOutcome[] = [];
  private inFlight: Promise<void> | null = null;
  private queued: { note: string; size: number } | null = null;
  /** The first rollback a mirror reported; from then on nothing is pushed or published. */
  private rollback: WitnessRollbackError | undefined;
  private stop: ((err: LogStateError) => void) | undefined;
  /** Per mirror: background failures in a row, and when the next background push may start. */
  private readonly retry = new Map<string, { failures: number; at: number }>();
  /**
   * Pushes run one at a time, sizes never going down: a push of an older checkpoint after a
   * newer one would meet the mirror's larger pending size, which reads as a rollback.
   */
  private turn: Promise<unknown> = Promise.resolve();
  private pushedSize = 0;

  constructor(private readonly o: MirrorPushOptions) {
    if (o.required > o.mirrors.length)
      throw new Error(`${o.required} mirror cosignatures required, but only ${o.mirrors.length} mirror(s) configured`);
    if (new Set(o.mirrors.map((m) => m.verifier.name)).size !== o.mirrors.length)
      throw new Error('two mirrors share a key name');
    this.clients = o.mirrors.map((m) => new MirrorClient(m, { logKey: o.log }));
  }

  /** Records a mirror's rollback report once, and stops the log (which says why) if it is open. */
  private rolledBack(err: WitnessRollbackError): WitnessRollbackError {
    if (this.rollback) return this.rollback;
    this.rollback = err;
    this.stop?.(err);
    return err;
  }

  /**
   * At start, for a log resuming from `cp`: what each mirror holds of it (probeHeldSize, as
   * for witnesses, and its served copy); throws WitnessRollbackError if one holds more, or a
   * checkpoint of the log with another root. A mirror that cannot be reached says nothing.
   */
  async checkMirroredSizes(cp: SignedCheckpoint): Promise<void> {
    const signal = AbortSignal.timeout(this.o.timeoutMs ?? 10_000);
    const data = logDataFromObjects(this.o.objects, cp.size);
    const found = await Promise.all(
      this.clients.map(async (c) => {
        const held = await probeHeldSize(c.endpoint, cp, signal);
        if (held.status === 'ahead') return new WitnessRollbackError(c.name, held.size!, cp.size, 'mirror');
        if (held.status === 'forked') return new WitnessRollbackError(c.name, cp.size, cp.size, 'mirror', true);
        return c.checkCopy(data, signal).then(
          () => null,
          (e: unknown) => (e instanceof WitnessRollbackError ? e : null),
        );
      }),
    );
    const rollback = found.find((f) => f !== null);
    if (rollback) throw this.rolledBack(rollback);
  }

  /**
   * Pushes to every mirror at once (in the background, skipping those still waiting out a
   * failure); the verified cosignature lines of those that answered in time. Throws
   * WitnessRollbackError if a mirror holds more of the log.
   */
  round(note: string, size: number, background = false): Promise<string[]> {
    const run = this.turn.then(() => this.roundNow(note, size, background));
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async roundNow(note: string, size: number, background: boolean): Promise<string[]> {
    if (this.rollback) throw this.rollback;
    if (size < this.pushedSize) return [];
    this.pushedSize = size;
    const signal = AbortSignal.timeout(this.o.timeoutMs ?? 10_000);
    const data = logDataFromObjects(this.o.objects, size);
    const now = Date.now();
    const results = await Promise.all(
      this.clients.map((c) => {
        const wait = background ? this.retry.get(c.name) : undefined;
        if (wait && wait.at > now)
          return { name: c.name, ok: false, line: '', error: new Error('waiting after failed pushes'), skipped: true };
        return c.push(note, data, signal).then(
          (line) => ({ name: c.name, ok: true, line, error: undefined, skipped: false }),
          (e: unknown) => ({ name: c.name, ok: false, line: '', error: e as Error, skipped: false }),
        );
      }),
    );
    this.lastRound = results.map(({ name, ok, error }) => ({ name, ok, ...(error ? { reason: error.message } : {}) }));
    const rollback = results.find((r) => r.error instanceof WitnessRollbackError);
    if (rollback) throw this.rolledBack(rollback.error as WitnessRollbackError);
    for (const r of results) {
      if (r.ok) {
        this.retry.delete(r.name);
        continue;
      }
      if (r.skipped) continue;
      this.o.logger?.warn({ mirror: r.name, size, reason: r.error?.message }, 'mirror push failed');
      if (!background) continue;
      const failures = (this.retry.get(r.name)?.failures ?? 0) + 1;
      const at = now + backoffMs(failures, BACKGROUND_RETRY_BASE_MS, BACKGROUND_RETRY_CAP_MS);
      this.retry.set(r.name, { failures, at });
    }
    return results.filter((r) => r.ok).map((r) => r.line);
  }

  /**
   * The sequencer's witnessing hook with mirrors added: `inner` (the witness collector, if
   * any) as it was, plus, at start, the mirrors' sizes, and before each publish any rollback
   * a mirror reported; with a quorum, the required mirror cosignatures (mirrors not required
   * are fed by published()).
   */
  witnessing(inner: CheckpointWitnessing | undefined): CheckpointWitnessing {
    const required = this.o.required;
    return {
      checkWitnessedSizes: async (cp: SignedCheckpoint) => {
        // Asked together; when both refuse (a witness and a mirror that saw more), the
        // witness's refusal is the one reported, whichever answered first.
        const [witnesses, mirrors] = await Promise.allSettled([
          inner?.checkWitnessedSizes?.(cp),
          this.checkMirroredSizes(cp),
        ]);
        if (witnesses.status === 'rejected') throw witnesses.reason;
        if (mirrors.status === 'rejected') throw mirrors.reason;
      },
      stopWith: (stop) => {
        this.stop = stop;
      },
      cosign: async (cp, consistencyFrom) => {
        if (this.rollback) throw this.rollback;
        if (required === 0) return inner ? inner.cosign(cp, consistencyFrom) : cp.note;
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

  /**
   * After a publish: bring the mirrors up to `note` in the background (with a quorum they
   * hold its entries already, and take the published note for the cosignatures it gathered,
   * src/mirror/mirror.ts keeps them). A rollback found here stops the log (stopWith).
   */
  published(note: string, size: number): void {
    if (this.rollback) return;
    this.queued = { note, size };
    if (this.inFlight) return;
    const drain = async (): Promise<void> => {
      while (this.queued && !this.rollback) {
        const next = this.queued;
        this.queued = null;
        await this.round(next.note, next.size, true).catch((e: unknown) => {
          if (!(e instanceof WitnessRollbackError))
            this.o.logger?.warn({ err: (e as Error).message }, 'mirror push failed');
        });
      }
    };
    this.inFlight = drain().finally(() => (this.inFlight = null));
  }

  /** Waits for a background push in flight (closing, tests). */
  async idle(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }
}
