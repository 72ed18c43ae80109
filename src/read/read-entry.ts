// An entry as a LogReader serves it: its record, entry hash, leaf hash and audit path, the
// hashes kept back to back in one array (a warm read copies them there from the tiles, with
// no view per hash), and the record parsed only if asked for.
import { type CanonicalEntry, parseCanonicalEntry } from '../core/entry.js';
import { HASH_SIZE } from '../core/hash.js';

export interface EntryAt {
  readonly seq: number;
  /** The record parsed (on first use: the API writes `canonical` instead). */
  readonly entry: CanonicalEntry;
  /** The record: the entry's canonical JSON. */
  readonly canonical: Uint8Array;
  readonly entryHash: Uint8Array;
  /** The leaf hash as the level-0 tile records it (checked against entryHash). */
  readonly leafHash: Uint8Array;
}

export interface EntryWithProof extends EntryAt {
  /** The entry's audit path in the tree it was read from. */
  readonly auditPath: Uint8Array[];
  /** The same hashes back to back (what an answer writes, without a view per hash). */
  readonly auditPathBytes: Uint8Array;
  /**
   * The same entry in one buffer of its own, to keep for long: its bytes are otherwise views
   * of cached bundles and of a slab of Node's buffer pool, which it would keep alive whole.
   */
  detached(): EntryWithProof;
}

/** An entry as read from the bundles; its record is parsed on the first read of `entry`. */
export class ReadEntry implements EntryWithProof {
  private parsed: CanonicalEntry | undefined;
  private path: Uint8Array[] | undefined;

  constructor(
    readonly seq: number,
    readonly canonical: Uint8Array,
    readonly entryHash: Uint8Array,
    /** The leaf hash, then the audit path's hashes. */
    private readonly proof: Uint8Array,
  ) {}

  get entry(): CanonicalEntry {
    return (this.parsed ??= parseCanonicalEntry(this.canonical));
  }

  detached(): ReadEntry {
    const at = this.canonical.length;
    const own = new Uint8Array(at + HASH_SIZE + this.proof.length);
    own.set(this.canonical, 0);
    own.set(this.entryHash, at);
    own.set(this.proof, at + HASH_SIZE);
    return new ReadEntry(this.seq, own.subarray(0, at), own.subarray(at, at + HASH_SIZE), own.subarray(at + HASH_SIZE));
  }

  get leafHash(): Uint8Array {
    return this.proof.subarray(0, HASH_SIZE);
  }

  get auditPathBytes(): Uint8Array {
    return this.proof.subarray(HASH_SIZE);
  }

  get auditPath(): Uint8Array[] {
    if (!this.path) {
      this.path = [];
      for (let at = HASH_SIZE; at < this.proof.length; at += HASH_SIZE)
        this.path.push(this.proof.subarray(at, at + HASH_SIZE));
    }
    return this.path;
  }
}
