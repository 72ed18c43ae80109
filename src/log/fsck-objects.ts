// `stele log fsck`, the objects side (src/log/fsck.ts does the tree and the lock): what it
// is pointed at, how it reports, and the listing of every stored key, sorted into the log's
// own objects, leftovers and strangers, with older partial tiles compared to verified ones.
import { CHECKPOINT_JSON_KEY, CHECKPOINT_KEY, EXPLORER_CONFIG_KEY } from '../store/layout.js';
import type { LockState, SequencerLock } from '../store/lock.js';
import type { ObjectReader, ObjectStore } from '../store/store.js';
import { bytesEqual } from '../core/hash.js';
import type { NoteVerifier } from '../core/note.js';
import {
  TILE_WIDTH,
  type TileId,
  type TileKind,
  levelHashCount,
  parseTilePath,
  tilePath,
  tileWidthAt,
} from '../core/tiles.js';
import { decodeBundle, encodeBundle } from '../core/bundle.js';
import { parallelRange } from '../read/pipeline.js';
import { readTileBytes } from '../read/tilestore.js';

/** What a stored key is on disk; a bucket holds only objects, so it has no such question. */
export type FileKind = 'file' | 'symlink' | 'other' | 'missing';

export interface FsckTarget {
  /** Where the log is, for messages (a directory, `s3://bucket/prefix`). */
  readonly where: string;
  /** The public objects: read, and listed. */
  readonly store: ObjectStore;
  /** The sequencer's lock record; null to leave it unchecked. */
  readonly lock: SequencerLock | null;
  /** How the lock record is named in messages (`private/lock.json`, `DynamoDB item …`). */
  readonly lockName: string;
  /** The log key (its name is the origin). */
  readonly key: NoteVerifier;
  /** A local directory's answer to "is this key a regular file?" (lstat, never following links). */
  readonly fileKind?: (key: string) => Promise<{ kind: FileKind; detail?: string }>;
  /** The sequencer's private objects, where a staged batch's records are; absent: a staged batch named by key is not read. */
  readonly staging?: ObjectReader;
  /** Where fsck keeps its own state (verified checkpoints, progress): the private objects; absent: none kept. */
  readonly state?: ObjectStore;
}

export type FindingKind =
  | 'checkpoint'
  | 'tree'
  | 'missing'
  | 'beyond'
  | 'unpublished'
  | 'stale-partial'
  | 'tmp'
  | 'mutex'
  | 'unexpected'
  | 'not-regular'
  | 'lock'
  | 'rollback';

export interface Finding {
  /** A problem makes fsck fail (exit 1); a notice is odd but harmless. */
  readonly severity: 'problem' | 'notice';
  readonly kind: FindingKind;
  readonly object: string;
  readonly message: string;
}

/** A broken directory can have millions of bad names; the report keeps the first of each kind. */
export const FINDINGS_PER_KIND = 20;

export class Findings {
  readonly list: Finding[] = [];
  problems = 0;
  notices = 0;
  readonly perKind = new Map<FindingKind, number>();

  add(severity: Finding['severity'], kind: FindingKind, object: string, message: string): void {
    if (severity === 'problem') this.problems++;
    else this.notices++;
    const n = this.perKind.get(kind) ?? 0;
    this.perKind.set(kind, n + 1);
    if (n < FINDINGS_PER_KIND) this.list.push({ severity, kind, object, message });
  }
}

const levelOf = (kind: TileKind): number => (typeof kind === 'number' ? kind : 0);
const basename = (key: string): string => key.slice(key.lastIndexOf('/') + 1);
const WELL_KNOWN = new Set([CHECKPOINT_KEY, CHECKPOINT_JSON_KEY, EXPLORER_CONFIG_KEY]);

/** Every tile and bundle a tree of `size` needs, each at the width it has at that size. */
export function* impliedObjects(size: number): Iterable<TileId> {
  const bundles = Math.ceil(size / TILE_WIDTH);
  for (let n = 0; n < bundles; n++) {
    const width = tileWidthAt(0, n, size);
    for (const kind of ['entries', 'records', 0] as const) yield { kind, index: n, width };
  }
  for (let level = 1; levelHashCount(level, size) > 0; level++) {
    const tiles = Math.ceil(levelHashCount(level, size) / TILE_WIDTH);
    for (let n = 0; n < tiles; n++) yield { kind: level, index: n, width: tileWidthAt(level, n, size) };
  }
}

/** Lists every stored key and sorts it: the log's own objects, leftovers, strangers. */
export async function classifyListing(
  target: FsckTarget,
  size: number,
  lockState: LockState | undefined,
  out: Findings,
) {
  const present = new Set<string>();
  /** Older partial tiles within the tree, to compare with the verified ones. */
  const stale: TileId[] = [];
  const keys: string[] = [];
  for await (const key of target.store.list('')) keys.push(key);
  const ahead = lockState && lockState.size > size ? lockState.size : size;
  for (const key of keys) {
    const name = basename(key);
    if (name.includes('.tmp-')) {
      out.add(
        'problem',
        'tmp',
        key,
        `${key} is a leftover of a crashed write: remove it (it is never part of the log, but a mirror copies it)`,
      );
      continue;
    }
    if (name.startsWith('.mutex-owner-') || name.endsWith('.lock')) {
      out.add(
        'notice',
        'mutex',
        key,
        `${key} is a swap mutex of a writer process (a later writer removes it once its owner is gone)`,
      );
      continue;
    }
    if (WELL_KNOWN.has(key)) continue;
    const id = parseTilePath(key);
    if (!id) {
      out.add('problem', 'unexpected', key, `${key} is not an object of the log`);
      continue;
    }
    present.add(key);
    const level = levelOf(id.kind);
    const need = tileWidthAt(level, id.index, size);
    if (id.width === need) continue; // read and verified by the audit
    if (id.width < need) stale.push(id);
    else if (id.width <= tileWidthAt(level, id.index, ahead)) {
      out.add(
        'notice',
        'unpublished',
        key,
        `${key} is beyond the published tree (size ${size}) but within the committed lock (size ${ahead}): the next start publishes it`,
      );
    } else {
      out.add(
        'problem',
        'beyond',
        key,
        `${key} is beyond the tree: a tree of size ${size} has ${need === 0 ? 'no such tile' : `only ${tilePath({ ...id, width: need })}`}`,
      );
    }
  }
  if (target.fileKind) {
    const fileKind = target.fileKind;
    await parallelRange(0, keys.length, 16, async (i) => {
      const key = keys[i]!;
      const { kind, detail } = await fileKind(key);
      if (kind === 'symlink')
        out.add(
          'problem',
          'not-regular',
          key,
          `${key} is a symbolic link${detail ? ` to ${detail}` : ''}: the log directory holds regular files only (a link can serve any file)`,
        );
      else if (kind === 'other')
        out.add('problem', 'not-regular', key, `${key} is not a regular file${detail ? ` (${detail})` : ''}`);
    });
  }
  return { present, stale, listed: keys.length };
}

/** Checks each older partial tile against the verified object of the same index. */
export async function checkStalePartials(
  store: ObjectStore,
  size: number,
  stale: readonly TileId[],
  out: Findings,
): Promise<number> {
  const groups = new Map<string, TileId[]>();
  for (const id of stale) {
    const g = `${id.kind}/${id.index}`;
    groups.set(g, [...(groups.get(g) ?? []), id]);
  }
  let checked = 0;
  for (const ids of groups.values()) {
    const { kind, index } = ids[0]!;
    const width = tileWidthAt(levelOf(kind), index, size);
    const verified = await readTileBytes(store, kind, index, width);
    const items = typeof kind === 'number' ? null : decodeBundle(verified, tilePath({ kind, index, width }));
    for (const id of ids) {
      const key = tilePath(id);
      const bytes = await store.get(key);
      if (!bytes) continue; // deleted since the listing (the sweeper)
      const expected = items ? encodeBundle(items.slice(0, id.width)) : verified.subarray(0, id.width * 32);
      checked++;
      if (!bytesEqual(bytes, expected)) {
        out.add(
          'problem',
          'stale-partial',
          key,
          `${key} differs from the first ${id.width} ${items ? 'items' : 'hashes'} of the verified ${tilePath({ kind, index, width })}: clients at older tree sizes read a corrupted tile`,
        );
      }
    }
  }
  return checked;
}
