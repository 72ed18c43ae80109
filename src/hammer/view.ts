// The hammer's one shared view of a log: every checkpoint any reader or writer sees is checked
// against it. A checkpoint must carry the log's signature; one of a size already seen must
// have the same root (else the log forked); one of another size must be consistent with the
// largest seen so far (a consistency proof built from the log's tiles, verified here). Each
// acknowledged anchor is then proved included in the first verified checkpoint that covers
// it. Proofs come from tlog-tiles objects only (an unverified LogReader: it only reads the
// tiles, everything it returns is checked here against signed roots).
import { openCheckpoint } from '../core/checkpoint.js';
import { bytesEqual, leafHash, toHex } from '../core/hash.js';
import { checkConsistencyProof, checkInclusion } from '../core/verify/index.js';
import type { NoteVerifier } from '../core/note.js';
import type { LogReader } from '../read/reader.js';
import { TILE_WIDTH } from '../core/tiles.js';

/** A verified checkpoint: its size and root. */
export interface Head {
  readonly size: number;
  readonly root: Uint8Array;
}

export interface ViewCounts {
  /** Distinct checkpoints (sizes) verified: signature, and consistency with the view. */
  checkpoints: number;
  consistencyProofs: number;
  inclusionProofs: number;
  /** Random leaves of the whole tree proved included (their leaf hash read from the tiles). */
  spotChecks: number;
}

/** Failure messages kept for the report (the count is exact, the list is the first few). */
const KEPT_FAILURES = 20;
/** Checkpoint notes remembered as verified: a batch's answers all carry the same one. */
const REMEMBERED_NOTES = 256;

export class SharedView {
  readonly counts: ViewCounts = { checkpoints: 0, consistencyProofs: 0, inclusionProofs: 0, spotChecks: 0 };
  failureCount = 0;
  readonly failures: string[] = [];
  /** Root of every size seen (a second root for one size is a fork). */
  private readonly roots = new Map<number, Uint8Array>();
  private largest: Head | undefined;
  /** Acknowledged anchors not yet proved included, by leaf index. */
  private readonly waiting = new Map<number, Uint8Array>();
  /** Checks run one at a time: each compares against the view the last one left. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Note texts already verified and in the view, oldest first (the same text is the same head). */
  private readonly verifiedNotes = new Map<string, Head>();
  /** A proof of waiting anchors against the largest head is queued. */
  private proofQueued = false;

  constructor(
    private readonly reader: LogReader,
    private readonly verifier: NoteVerifier,
  ) {}

  /** The largest verified checkpoint. */
  get head(): Head | undefined {
    return this.largest;
  }

  /** Acknowledged anchors whose inclusion is not yet verified. */
  get unverified(): number {
    return this.waiting.size;
  }

  /** An acknowledged anchor: leaf `seq` with entry hash `entryHash`, to be proved included. */
  expect(seq: number, entryHash: Uint8Array): void {
    const known = this.waiting.get(seq);
    if (known && !bytesEqual(known, entryHash))
      this.fail(`leaf ${seq} was acknowledged twice with different entry hashes`);
    this.waiting.set(seq, entryHash);
    // Acknowledged with a checkpoint the view already holds: no new head may come to prove it.
    if (this.largest && seq < this.largest.size && !this.proofQueued) {
      this.proofQueued = true;
      this.queue = this.queue.then(() => {
        this.proofQueued = false;
        return this.largest && this.proveWaiting(this.largest);
      });
    }
  }

  /**
   * Checks a signed checkpoint note (from the `checkpoint` object or an anchor response) and
   * adds it to the view; then proves the waiting anchors it covers. Null if it failed.
   */
  observe(note: string, source: string): Promise<Head | null> {
    const run = this.queue.then(() => this.check(note, source));
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Proves leaf `seq` of `head` included, its leaf hash read from the level-0 tile. */
  spotCheck(head: Head, seq: number): Promise<void> {
    const run = this.queue.then(async () => {
      try {
        const tile = await this.reader.tileOf(head.size, 0, Math.floor(seq / TILE_WIDTH));
        const leaf = tile.hashAt(0, seq % TILE_WIDTH);
        const proof = await this.reader.inclusionProof(seq, head.size);
        this.counts.spotChecks++;
        const included = checkInclusion(seq, head.size, leaf, proof, head);
        if (!included.ok)
          this.fail(
            `leaf ${seq} as the tiles give it is not included in checkpoint ${head.size}: the tiles do not match the signed root (${included.detail})`,
          );
      } catch (e) {
        this.fail(`leaf ${seq} of checkpoint ${head.size}: ${(e as Error).message}`);
      }
    });
    this.queue = run;
    return run;
  }

  private async check(note: string, source: string): Promise<Head | null> {
    const seen = this.verifiedNotes.get(note);
    if (seen) return seen;
    let head: Head;
    try {
      const opened = openCheckpoint(note, this.verifier);
      head = { size: opened.size, root: opened.root };
    } catch (e) {
      this.fail(`${source}: the checkpoint does not verify: ${(e as Error).message}`);
      return null;
    }
    const known = this.roots.get(head.size);
    if (known) {
      if (bytesEqual(known, head.root)) {
        this.remember(note, head);
        return head;
      }
      this.fail(
        `${source}: two roots for tree size ${head.size} (${toHex(known)} and ${toHex(head.root)}): the log forked`,
      );
      return null;
    }
    const view = this.largest;
    try {
      if (view && view.size > 0 && head.size > 0) {
        const [small, big] = head.size < view.size ? [head, view] : [view, head];
        const proof = await this.reader.consistencyProof(small.size, big.size);
        this.counts.consistencyProofs++;
        const consistent = checkConsistencyProof(small, big, proof);
        if (!consistent.ok) {
          this.fail(
            `${source}: checkpoint ${head.size} is not consistent with checkpoint ${view.size} of the shared view (${consistent.detail})`,
          );
          return null;
        }
      }
    } catch (e) {
      this.fail(`${source}: consistency of checkpoint ${head.size} with ${view?.size}: ${(e as Error).message}`);
      return null;
    }
    this.roots.set(head.size, head.root);
    this.remember(note, head);
    this.counts.checkpoints++;
    if (!view || head.size > view.size) this.largest = head;
    await this.proveWaiting(head);
    return head;
  }

  private remember(note: string, head: Head): void {
    this.verifiedNotes.set(note, head);
    if (this.verifiedNotes.size > REMEMBERED_NOTES) this.verifiedNotes.delete(this.verifiedNotes.keys().next().value!);
  }

  /** Proves every waiting anchor that `head` covers. */
  private async proveWaiting(head: Head): Promise<void> {
    for (const [seq, entryHash] of this.waiting) {
      if (seq >= head.size) continue;
      this.waiting.delete(seq);
      try {
        const proof = await this.reader.inclusionProof(seq, head.size);
        this.counts.inclusionProofs++;
        const included = checkInclusion(seq, head.size, leafHash(entryHash), proof, head);
        if (!included.ok) {
          this.fail(
            `anchor at leaf ${seq} (entry hash ${toHex(entryHash)}) is not included in checkpoint ${head.size}: ${included.detail}`,
          );
        }
      } catch (e) {
        this.fail(`inclusion of leaf ${seq} in checkpoint ${head.size}: ${(e as Error).message}`);
      }
    }
  }

  private fail(message: string): void {
    this.failureCount++;
    if (this.failures.length < KEPT_FAILURES) this.failures.push(message);
  }
}
