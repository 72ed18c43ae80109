// An anchor identical to one already in the log (src/core/duplicates.ts says which are) gets
// that entry back instead of a second one. Two places can hold the first copy:
//   - in flight: pooled, or being looked up, for an earlier request of this process. The
//     later request waits for the same promise, so two identical anchors in one batch, or
//     one arriving while the first is integrated, make one entry. The promise tracked is the
//     sequencer's own (not the API's deadline), so a first copy that timed out for its
//     client still holds back the second until it is published.
//   - published: found through the lookup index (`findPublished`). A request is tracked
//     from before that lookup until its entry is published, and the index learns a batch
//     before its anchors are acknowledged, so no identical request falls between the two.
// One process sequences a log (the directory lock, or the single AWS sequencer task), so the
// in-flight map sees every anchor that is not yet in the index.
import type { AnchorRequest } from '../core/anchor.js';
import { anchorIdentity } from '../core/duplicates.js';
import type { AnchorReceipt, FindPublished, SubmitOptions } from './contract.js';

/** Appends a request to the log (Sequencer.submit). */
export type SubmitNew = (request: AnchorRequest) => Promise<AnchorReceipt>;

/** The same receipt, marked as the answer to a request that appended nothing. */
function asExisting(r: AnchorReceipt): AnchorReceipt {
  if (r.existing) return r;
  return {
    seq: r.seq,
    entry: r.entry,
    entryHash: r.entryHash,
    checkpoint: r.checkpoint,
    inclusionProof: () => r.inclusionProof(),
    existing: true,
  };
}

export class DuplicateAnchors {
  /** Anchor identity → the first request's receipt, until it is published. */
  private readonly inFlight = new Map<string, Promise<AnchorReceipt>>();

  constructor(
    private readonly submitNew: SubmitNew,
    private readonly findPublished: FindPublished,
  ) {}

  /** Anchors in flight (pooled or being looked up), for tests and metrics. */
  get tracked(): number {
    return this.inFlight.size;
  }

  submit(request: AnchorRequest, options: SubmitOptions = {}): Promise<AnchorReceipt> {
    const identity = anchorIdentity(request);
    if (identity === undefined) return this.submitNew(request);
    const earlier = this.inFlight.get(identity);
    if (options.allowDuplicate) {
      const receipt = this.submitNew(request);
      if (!earlier) this.track(identity, receipt);
      return receipt;
    }
    if (earlier) return earlier.then(asExisting);
    const receipt = this.findPublished(identity, request.digest).then((found) =>
      found ? asExisting(found) : this.submitNew(request),
    );
    this.track(identity, receipt);
    return receipt;
  }

  private track(identity: string, receipt: Promise<AnchorReceipt>): void {
    this.inFlight.set(identity, receipt);
    const done = () => {
      if (this.inFlight.get(identity) === receipt) this.inFlight.delete(identity);
    };
    receipt.then(done, done);
  }
}
