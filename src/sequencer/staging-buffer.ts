// The staged batch (one record bundle of the whole batch, src/sequencer/sequencer.ts) is
// framed into one buffer kept from batch to batch. A buffer the size of a batch made and
// freed every second raises glibc's dynamic mmap threshold to its size; from then on every
// smaller buffer comes from the main heap, which fragments and does not shrink (peak RSS grew
// by a third over 2,000,000 anchors). Kept, it is allocated a few times while batches grow
// and then never freed. It is reused only after the write that read it succeeded: a failed
// store call might still be reading it, so then a fresh one is made.
import { type Packed, frame, framedSize } from '../core/bundle.js';

/** Larger batches get a buffer of their own (freed normally) rather than pinning one this big. */
const MAX_KEPT = 64 * 1024 * 1024;

export class StagingBuffer {
  private buf: Uint8Array | undefined;
  private lent = false;

  /** The record bundle of `pieces`, framed into the kept buffer (until release()). */
  fill(pieces: readonly Packed[]): Uint8Array {
    const size = framedSize([], pieces);
    if (size > MAX_KEPT) return frame([], pieces);
    if (this.lent || !this.buf || this.buf.length < size) {
      // Doubling: a batch a little larger than the last does not free and remake it.
      let capacity = 1024 * 1024;
      while (capacity < size) capacity *= 2;
      this.buf = new Uint8Array(capacity);
    }
    this.lent = true;
    return frame([], pieces, this.buf);
  }

  /** The staged write succeeded: the buffer may be filled again. */
  release(): void {
    this.lent = false;
  }
}
