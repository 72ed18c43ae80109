// An API replica's own lookup index, kept by following the published log instead of sharing
// a database: fetch the published checkpoint (its signature and its growth checked by
// `fetchCheckpoint`), then index the record bundles up to it (read through the reader's
// checks against that checkpoint). A checkpoint is served — used for lookups and proofs —
// only once it is verified and every entry under it is indexed, so a replica never answers
// for a tree it has not checked, and one started from an empty directory catches up first.
import type { Logger } from 'pino';
import type { LogReader } from '../read/reader.js';
import type { PublishedCheckpoint } from '../sequencer/contract.js';
import { catchUpIndex } from './catchup.js';
import type { LookupIndex } from './types.js';

export interface FollowerStatus {
  /** Size of the latest verified published checkpoint seen. */
  readonly published: number;
  /** Leaves indexed so far (ahead of `served` while a catch-up runs). */
  readonly indexed: number;
  /** Size of the checkpoint served. */
  readonly served: number;
  /** Published leaves not served yet. */
  readonly lag: number;
  /** How long the replica has been behind the published checkpoint (0 when it is not). */
  readonly behindMs: number;
}

export class IndexFollower {
  private served: PublishedCheckpoint | undefined;
  private published = 0;
  private indexed = 0;
  private lastProgressLog = 0;
  private behindSince: number | undefined;
  private running: Promise<PublishedCheckpoint | undefined> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly index: LookupIndex,
    private readonly reader: LogReader,
    /** The latest published checkpoint, verified (signature, never shrinking or forking), or undefined if none yet. */
    private readonly fetchCheckpoint: () => Promise<PublishedCheckpoint | undefined>,
    private readonly logger?: Logger,
  ) {}

  /** The checkpoint served: verified and fully indexed. */
  checkpoint(): PublishedCheckpoint | undefined {
    return this.served;
  }

  status(): FollowerStatus {
    const served = this.served?.size ?? 0;
    const lag = Math.max(0, this.published - served);
    return {
      published: this.published,
      indexed: this.indexed,
      served,
      lag,
      behindMs: lag > 0 && this.behindSince !== undefined ? Date.now() - this.behindSince : 0,
    };
  }

  /** Ends a catch-up at the end of the bundle it is indexing, and every later round at once (a shutdown). */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running?.catch(() => undefined);
  }

  /** One round (concurrent calls share it): fetch the checkpoint, index up to it, serve it. */
  poll(): Promise<PublishedCheckpoint | undefined> {
    this.running ??= this.round().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async round(): Promise<PublishedCheckpoint | undefined> {
    if (this.stopping.signal.aborted) return this.served;
    const cp = await this.fetchCheckpoint();
    if (!cp) return this.served;
    this.published = Math.max(this.published, cp.size);
    if (this.served && cp.size <= this.served.size) {
      this.behindSince = undefined;
      return this.served;
    }
    this.behindSince ??= Date.now();
    if (!this.served) {
      // First round: an index holding leaves beyond the tree (kept across a rolled-back or
      // replaced log) is rebuilt; rows below the size are re-checked by every lookup.
      this.indexed = await this.index.indexedSize();
      const ahead = this.indexed > cp.size;
      if (ahead || (await this.index.outdated())) {
        this.logger?.warn(
          { indexed: this.indexed, treeSize: cp.size },
          ahead
            ? 'the replica index is ahead of the published tree; rebuilding it from the record bundles'
            : 'the replica index is of an older version; rebuilding it from the record bundles',
        );
        await this.index.clear();
        this.indexed = 0;
      }
      if (this.indexed < cp.size)
        this.logger?.info(
          { indexed: this.indexed, treeSize: cp.size },
          'replica index catching up from the record bundles',
        );
    }
    const started = this.indexed;
    const t0 = Date.now();
    this.indexed = await catchUpIndex(
      this.index,
      this.reader,
      cp.size,
      cp,
      (indexed, size) => {
        this.indexed = indexed;
        if (Date.now() - this.lastProgressLog >= 5_000) {
          this.lastProgressLog = Date.now();
          this.logger?.info(
            {
              indexed,
              treeSize: size,
              entriesPerSecond: Math.round(((indexed - started) * 1000) / Math.max(1, Date.now() - t0)),
            },
            'replica index catching up',
          );
        }
      },
      this.stopping.signal,
    );
    // Stopped part way: the checkpoint is not served (its entries are not all indexed).
    if (this.indexed < cp.size) return this.served;
    this.served = cp;
    if (this.published <= cp.size) this.behindSince = undefined;
    return cp;
  }
}
