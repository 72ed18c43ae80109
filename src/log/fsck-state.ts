// What `stele log fsck` keeps in the sequencer's private state (never in the served tree):
// the checkpoints it has verified whole (`--since` starts from one), and the progress of a
// check under way, so a check killed mid-way continues when run again.
import type { AuditState } from '../read/audit.js';
import { hashFromHex, toHex } from '../core/hash.js';
import type { ObjectStore } from '../store/store.js';

const VERIFIED_KEY = 'fsck/verified.json';
const PROGRESS_KEY = 'fsck/progress.json';
/** Verified checkpoints kept, newest last. */
const VERIFIED_KEPT = 100;

/** A checkpoint whose whole tree fsck recomputed (or extended from one it had) and found clean. */
export interface VerifiedCheckpoint {
  readonly size: number;
  readonly root: string;
  /** When fsck verified it (ISO 8601). */
  readonly verifiedAt: string;
}

/** A check under way: the tree pinned, and the audit's state after its last full bundle. */
export interface FsckProgress {
  readonly pin: { readonly size: number; readonly root: string };
  readonly state: AuditState;
}

interface StoredState {
  bundle: number;
  prior: string;
  lastTimestamp: string;
  pending: string[][];
  tileIndex: number[];
  entriesChecked: number;
  bundlesChecked: number;
  hashTilesChecked: number;
  pinRoot: string | null;
}

const hexes = (l: readonly Uint8Array[]) => l.map(toHex);

async function readJson<T>(store: ObjectStore, key: string): Promise<T | null> {
  const bytes = await store.get(key);
  if (!bytes) return null;
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as T;
  } catch {
    return null; // a torn write of fsck's own: as if there were none
  }
}

async function writeJson(store: ObjectStore, key: string, value: unknown): Promise<void> {
  const current = await store.getVersioned(key);
  await store.swap(key, Buffer.from(JSON.stringify(value)), current?.version ?? null);
}

export class FsckStateStore {
  constructor(private readonly store: ObjectStore) {}

  /** Verified checkpoints, oldest first. */
  async verified(): Promise<VerifiedCheckpoint[]> {
    return (await readJson<VerifiedCheckpoint[]>(this.store, VERIFIED_KEY)) ?? [];
  }

  /** The verified checkpoint at `size`, or the newest with 'last'; undefined if none. */
  async verifiedAt(size: number | 'last'): Promise<VerifiedCheckpoint | undefined> {
    const all = await this.verified();
    return size === 'last' ? all[all.length - 1] : all.findLast((v) => v.size === size);
  }

  async recordVerified(size: number, root: Uint8Array): Promise<void> {
    const all = (await this.verified()).filter((v) => !(v.size === size && v.root === toHex(root)));
    all.push({ size, root: toHex(root), verifiedAt: new Date().toISOString() });
    await writeJson(this.store, VERIFIED_KEY, all.slice(-VERIFIED_KEPT));
  }

  async progress(): Promise<FsckProgress | null> {
    const p = await readJson<{ pin: FsckProgress['pin']; state: StoredState }>(this.store, PROGRESS_KEY);
    if (!p) return null;
    const s = p.state;
    return {
      pin: p.pin,
      state: {
        ...s,
        prior: hashFromHex(s.prior),
        pending: s.pending.map((l) => l.map(hashFromHex)),
        pinRoot: s.pinRoot === null ? null : hashFromHex(s.pinRoot),
      },
    };
  }

  async saveProgress(pin: { size: number; root: Uint8Array }, state: AuditState): Promise<void> {
    const stored: StoredState = {
      ...state,
      prior: toHex(state.prior),
      pending: state.pending.map(hexes),
      tileIndex: [...state.tileIndex],
      pinRoot: state.pinRoot === null ? null : toHex(state.pinRoot),
    };
    await writeJson(this.store, PROGRESS_KEY, { pin: { size: pin.size, root: toHex(pin.root) }, state: stored });
  }

  async clearProgress(): Promise<void> {
    await this.store.delete(PROGRESS_KEY);
  }
}
