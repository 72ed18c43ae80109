// The sequencer's lock record: the one place a new tree size becomes authoritative.
// Publishing is a compare-and-swap on it, so two sequencers can never both extend the
// same size (docs/design.md §3.1). Backed by an ObjectStore swap (local file, S3 If-Match)
// or DynamoDB conditional writes.
import type { ObjectStore } from './store.js';

/**
 * The committed batch whose objects may not be durable yet: enough to write them again. Its
 * record bundle is a staging object (`key`) or, for a small batch, carried in the lock record
 * itself (`records`, base64), which saves the staging object's write, fsyncs and delete.
 */
export type StagedBatch = { readonly fromSize: number; readonly fromRoot: string } & (
  | { readonly key: string; readonly records?: never }
  | { readonly records: string; readonly key?: never }
);

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
  /** The largest record bundle (base64 characters) a lock record may carry inline; 0 or absent: none. */
  readonly inlineLimit?: number;
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
    const st = s.staged as Partial<Record<keyof StagedBatch, unknown>> | null;
    const stored =
      typeof st?.key === 'string' ? st.records === undefined : typeof st?.records === 'string' && st.key === undefined;
    if (
      !stored ||
      !Number.isSafeInteger(st?.fromSize) ||
      (st?.fromSize as number) < 0 ||
      typeof st?.fromRoot !== 'string' ||
      !/^[0-9a-f]{64}$/.test(st.fromRoot)
    ) {
      throw new LockFormatError('lock record has a malformed staged batch');
    }
  }
  return s as LockState;
}

/**
 * Inline staging for a lock record in a file or an S3 object: a control-plane batch (~10 KB)
 * rides in the commit's one durable write. DynamoDB's lock carries none (items are billed per KB).
 */
export const DEFAULT_INLINE_LIMIT = 256 * 1024;

/** A lock record kept as one object in a store that supports swap. */
export class StoreLock implements SequencerLock {
  constructor(
    private readonly store: ObjectStore,
    private readonly key = 'lock.json',
    readonly inlineLimit = DEFAULT_INLINE_LIMIT,
  ) {}

  async read(): Promise<{ state: LockState; version: string } | null> {
    const obj = await this.store.getVersioned(this.key);
    return obj && { state: parseLockState(obj.data), version: obj.version };
  }

  swap(expected: string | null, next: LockState): Promise<string> {
    return this.store.swap(this.key, Buffer.from(JSON.stringify(next)), expected);
  }
}
