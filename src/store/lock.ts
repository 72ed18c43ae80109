// The sequencer's lock record: the one place a new tree size becomes authoritative.
// Publishing is a compare-and-swap on it, so two sequencers can never both extend the
// same size (DESIGN.md §3.1). Backed by an ObjectStore swap (local file, S3 If-Match)
// or DynamoDB conditional writes.
import type { ObjectStore } from './store.js';

export interface StagedBatch {
  /** Key of the staging object holding the batch's records. */
  readonly key: string;
  readonly fromSize: number;
  readonly fromRoot: string;
}

export interface LockState {
  readonly size: number;
  /** Root hash, lowercase hex. */
  readonly root: string;
  /** Publish time of this checkpoint (ISO 8601, ms); strictly increasing. */
  readonly timestamp: string;
  /** The signed checkpoint note for this size. */
  readonly note: string;
  /** The batch that produced this size, until its objects are known to be written. */
  readonly staged?: StagedBatch;
}

export interface SequencerLock {
  read(): Promise<{ state: LockState; version: string } | null>;
  /** Installs `next` if the record is still at `expected` (null: absent); throws VersionConflictError. */
  swap(expected: string | null, next: LockState): Promise<string>;
}

export class LockFormatError extends Error {
  override name = 'LockFormatError';
}

export function parseLockState(bytes: Uint8Array): LockState {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw new LockFormatError('lock record is not JSON');
  }
  const s = v as Partial<LockState>;
  if (
    typeof s !== 'object' ||
    s === null ||
    !Number.isSafeInteger(s.size) ||
    (s.size as number) < 0 ||
    typeof s.root !== 'string' ||
    !/^[0-9a-f]{64}$/.test(s.root) ||
    typeof s.timestamp !== 'string' ||
    typeof s.note !== 'string'
  ) {
    throw new LockFormatError('lock record is malformed');
  }
  if (s.staged !== undefined) {
    const st = s.staged;
    if (typeof st.key !== 'string' || !Number.isSafeInteger(st.fromSize) || typeof st.fromRoot !== 'string') {
      throw new LockFormatError('lock record has a malformed staged batch');
    }
  }
  return s as LockState;
}

/** A lock record kept as one object in a store that supports swap. */
export class StoreLock implements SequencerLock {
  constructor(
    private readonly store: ObjectStore,
    private readonly key = 'lock.json',
  ) {}

  async read(): Promise<{ state: LockState; version: string } | null> {
    const obj = await this.store.getVersioned(this.key);
    return obj && { state: parseLockState(obj.data), version: obj.version };
  }

  swap(expected: string | null, next: LockState): Promise<string> {
    return this.store.swap(this.key, Buffer.from(JSON.stringify(next)), expected);
  }
}
