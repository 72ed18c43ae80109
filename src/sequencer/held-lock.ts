// The lock record as this sequencer holds it: the state it last wrote and the version that
// write returned, so the next compare-and-swap fails if anyone else wrote in between. A start
// reads it (or, for a log with nothing published, creates it: the new log's empty tree).
import { signCheckpoint } from '../core/checkpoint.js';
import { toHex } from '../core/hash.js';
import type { NoteSigner } from '../core/note.js';
import type { LockState, SequencerLock } from '../store/lock.js';
import type { ObjectStore } from '../store/store.js';
import { LogStateError, type PublishedCheckpoint } from './contract.js';
import { assertNothingPublished } from './lock-check.js';
import { RightEdge } from './right-edge.js';

export class HeldLock {
  private version: string | null = null;
  private held: LockState | undefined;

  constructor(private readonly lock: SequencerLock) {}

  get state(): LockState | undefined {
    return this.held;
  }

  /**
   * Reads the lock record and holds it. None on `opening` a log that has published nothing:
   * it is new, and its lock is created at size 0. None otherwise: refused, since a lock never
   * disappears while the log runs, and one lost beside published objects would fork it.
   */
  async take(
    log: { readonly store: ObjectStore; readonly signer: NoteSigner; readonly origin: string; readonly now: number },
    published: PublishedCheckpoint | null,
    opening: boolean,
  ): Promise<{ readonly state: LockState; readonly created: boolean }> {
    let read = await this.lock.read();
    const created = !read;
    if (!read) {
      if (!opening)
        throw new LogStateError(
          'the lock record disappeared while the log was running; this sequencer stopped so the log cannot fork',
        );
      await assertNothingPublished(log.store, published);
      const timestamp = new Date(log.now).toISOString();
      const signed = await signCheckpoint({ origin: log.origin, size: 0, root: RightEdge.empty().root() }, log.signer);
      await this.lock.swap(null, { size: 0, root: toHex(signed.root), timestamp, note: signed.note });
      read = await this.lock.read();
      if (!read) throw new Error('lock record vanished after creation');
    }
    this.version = read.version;
    this.held = read.state;
    return { state: read.state, created };
  }

  /** Swaps the record to `state` (the commit point of a batch); fails if anyone else wrote it. */
  async swap(state: LockState): Promise<void> {
    this.version = await this.lock.swap(this.version, state);
    this.held = state;
  }

  /** Rewrites the record without its staged batch (once that batch is durable). */
  async forgetStaged(): Promise<void> {
    const state = this.held;
    if (!state?.staged) return;
    const { staged: _, ...clean } = state;
    await this.swap(clean);
  }
}
