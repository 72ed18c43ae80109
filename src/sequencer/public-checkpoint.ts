// The two public checkpoint objects, `checkpoint` (the signed note) and `checkpoint.json`
// (note and time), swapped by version so a sequencer never overwrites what it did not read.
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY } from '../store/layout.js';
import type { ObjectStore } from '../store/store.js';
import { type PublishedCheckpoint, encodePublishedCheckpoint } from './contract.js';

export class PublicCheckpointObjects {
  private versions: { note: string | null; json: string | null } = { note: null, json: null };

  constructor(private readonly store: ObjectStore) {}

  /** Both objects as stored (either may be absent), their versions kept for the next write. */
  async read(): Promise<{ readonly note?: Uint8Array; readonly json?: Uint8Array }> {
    const [note, json] = await Promise.all([
      this.store.getVersioned(CHECKPOINT_KEY),
      this.store.getVersioned(CHECKPOINT_JSON_KEY),
    ]);
    this.versions = { note: note?.version ?? null, json: json?.version ?? null };
    return { note: note?.data, json: json?.data };
  }

  async write(c: PublishedCheckpoint): Promise<void> {
    // Two independent objects (each complete on its own), so they are swapped side by side.
    // A swap that succeeds keeps its version even if the other fails, so the retry matches.
    // Neither needs to survive a power loss: the lock record holds the committed checkpoint
    // durably, and open() publishes it again before anything is served.
    const relaxed = { durable: false };
    const [json, note] = await Promise.allSettled([
      this.store.swap(CHECKPOINT_JSON_KEY, encodePublishedCheckpoint(c), this.versions.json, relaxed),
      this.store.swap(CHECKPOINT_KEY, Buffer.from(c.note), this.versions.note, relaxed),
    ]);
    if (json.status === 'fulfilled') this.versions.json = json.value;
    if (note.status === 'fulfilled') this.versions.note = note.value;
    for (const r of [json, note]) if (r.status === 'rejected') throw r.reason;
  }
}
