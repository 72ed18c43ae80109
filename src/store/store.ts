// The object-store boundary: a local directory by default, S3 in production. Tiles and
// bundles are immutable (create-if-absent); the checkpoint and the sequencer's lock
// record change only by compare-and-swap.

export class ImmutableConflictError extends Error {
  override name = 'ImmutableConflictError';
  constructor(readonly key: string) {
    super(`${key} already exists with different bytes; immutable objects are never rewritten`);
  }
}

export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
  constructor(readonly key: string) {
    super(`${key} was changed by another writer (compare-and-swap failed)`);
  }
}

export class InvalidKeyError extends Error {
  override name = 'InvalidKeyError';
}

export interface VersionedObject {
  readonly data: Uint8Array;
  /** Opaque version token for swap (an ETag, a content hash, …). */
  readonly version: string;
}

export interface StoredObject {
  readonly key: string;
  readonly data: Uint8Array;
}

/** Counters every store keeps, for benchmarks and the cost model. */
export interface StoreStats {
  gets: number;
  puts: number;
  deletes: number;
}

export interface SwapOptions {
  /**
   * false: the swap is atomic but need not survive a power loss (the object may come back at
   * its previous version), for objects the caller rebuilds on start. Default true.
   */
  readonly durable?: boolean;
}

export interface CreateOptions {
  /**
   * false: the objects are in place and readable when createAll returns, but survive a power
   * loss only once persist() has returned for them. The caller must hold another durable copy
   * until then (the sequencer's staged batch) and create them again after a crash, with
   * `repairTorn`. Default true.
   */
  readonly durable?: boolean;
  /**
   * Re-creating objects first created with durable:false: an existing object that a power loss
   * cut short (a prefix of the bytes, or zeros where bytes were due) is replaced, not refused.
   */
  readonly repairTorn?: boolean;
}

/** Read access to a log's objects: a store, an HTTP origin or CDN, a mirror directory. */
export interface ObjectReader {
  /** The object's bytes, or null if absent. */
  get(key: string): Promise<Uint8Array | null>;
}

export interface ObjectStore extends ObjectReader {
  getVersioned(key: string): Promise<VersionedObject | null>;
  /**
   * Creates immutable objects durably, with bounded parallelism. An object that already
   * exists with identical bytes counts as created; different bytes throw ImmutableConflictError.
   */
  createAll(objects: readonly StoredObject[], options?: CreateOptions): Promise<void>;
  /** Makes objects created with durable:false survive a power loss (a no-op where every write is durable). */
  persist(keys: readonly string[]): Promise<void>;
  /**
   * Replaces `key` only if its current version is `expected` (null: only if absent);
   * returns the new version or throws VersionConflictError.
   */
  swap(key: string, data: Uint8Array, expected: string | null, options?: SwapOptions): Promise<string>;
  delete(key: string): Promise<void>;
  /**
   * Every key that starts with `prefix` ('' for all), in no set order, including names that
   * are not valid keys (a local directory can hold anything). For start-up checks and fsck,
   * never the hot path: on S3 each page of 1,000 keys is a billed LIST.
   */
  list(prefix: string): AsyncIterable<string>;
  readonly stats: StoreStats;
}

/**
 * Marks the name of a write in progress (`<final name>.tmp-<pid>-<random>`, see
 * src/store/files.ts). No key contains it, so a temporary file is never read or served as an
 * object, whatever a crash left behind.
 */
export const TEMP_MARK = '.tmp-';

/** Keys are relative slash paths of safe characters: no '..', no leading '/', no empty segments, no temporary names. */
export function assertValidKey(key: string): void {
  if (
    !/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(key) ||
    key.split('/').some((s) => s === '.' || s === '..') ||
    key.includes(TEMP_MARK)
  ) {
    throw new InvalidKeyError(`invalid object key ${JSON.stringify(key)}`);
  }
}
