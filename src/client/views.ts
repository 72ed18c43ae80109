// The two ways a client reads the log: its JSON API, or a copy of its tiles (a CDN, a mirror
// directory), each giving a checkpoint and consistency proofs.
import { parseCheckpointBody } from '../core/checkpoint.js';
import { ZERO_HASH } from '../core/entry.js';
import { hashFromHex } from '../core/hash.js';
import { parseNote } from '../core/note.js';
import { LogReader } from '../read/reader.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { readBundle } from '../read/tilestore.js';
import type { LedgerApi } from './api.js';
import { VerificationError } from './errors.js';
import { type CheckpointInput, type ProveConsistency, hashes } from './rules.js';

export interface LogView {
  readonly kind: 'api' | 'tiles';
  /** URL or directory, for messages. */
  readonly name: string;
  checkpoint(): Promise<CheckpointInput>;
  prove: ProveConsistency;
}

export class ApiView implements LogView {
  readonly kind = 'api';
  constructor(readonly api: LedgerApi) {}
  get name(): string {
    return this.api.endpoint;
  }
  async checkpoint(): Promise<CheckpointInput> {
    return { json: await this.api.checkpoint() };
  }
  prove: ProveConsistency = async (first, second) => {
    const c = await this.api.consistency(first, second);
    return { proof: hashes(c.proof), firstRoot: hashFromHex(c.firstRoot), secondRoot: hashFromHex(c.secondRoot) };
  };
}

export class TilesView implements LogView {
  readonly kind = 'tiles';
  readonly reader: LogReader;
  /** Size of the checkpoint read: the tiles that exist are those of this tree. */
  published = 0;
  constructor(
    readonly source: ObjectReader,
    readonly name: string,
    /**
     * Consistency proofs from a tree that reaches the pin (the log's API, when configured):
     * what tells a copy older than the pin from a rolled-back log (rule 2).
     */
    readonly proveToPin: ProveConsistency | null = null,
  ) {
    // The client verifies every proof against the checkpoint it checked and pinned, and a
    // command reads a few entries: each is checked alone, not with its bundle's 255 others.
    this.reader = new LogReader(source, { cacheBytes: 16 * 1024 * 1024, unverified: true, itemByItem: true });
  }
  async checkpoint(): Promise<CheckpointInput> {
    const bytes = await this.source.get('checkpoint');
    if (!bytes) throw new VerificationError(`${this.name} has no checkpoint`);
    const note = Buffer.from(bytes).toString('utf8');
    try {
      this.published = parseCheckpointBody(parseNote(note).body).size;
    } catch {
      // malformed: checkCheckpoint reports it
    }
    return { note };
  }
  prove: ProveConsistency = async (first, second) => ({
    proof: await this.reader.consistencyProof(first, second, this.published),
  });
}

/** The entry hash of leaf seq − 1 (zeros for seq 0), read from the entry bundle of the tree of `size`. */
export async function priorEntryHash(
  source: ObjectReader,
  seq: number,
  size: number,
  entries: (n: number, width: number) => Promise<Uint8Array[]> = (n, width) => readBundle(source, 'entries', n, width),
): Promise<Uint8Array> {
  if (seq === 0) return ZERO_HASH;
  const n = Math.floor((seq - 1) / TILE_WIDTH);
  const items = await entries(n, Math.min(TILE_WIDTH, size - n * TILE_WIDTH));
  return items[(seq - 1) % TILE_WIDTH]!;
}
