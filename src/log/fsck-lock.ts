// fsck's view of the sequencer's lock record: how it stands to the published checkpoint, and
// the objects a start would re-create from the batch it has staged.

import { decodeBundle } from '../core/bundle.js';
import { openCheckpoint } from '../core/checkpoint.js';
import { hashFromHex, toHex } from '../core/hash.js';
import { TileFormatError } from '../core/tiles.js';
import { LogIntegrityError, MissingObjectError } from '../read/tilestore.js';
import { loadEdge } from '../sequencer/recover.js';
import type { LockState } from '../store/lock.js';
import type { Findings, FsckTarget } from './fsck-objects.js';
import type { PublishedState } from './published-state.js';

/** How the lock record stands to the published checkpoint. */
export type LockRelation = 'equal' | 'older' | 'newer' | 'forked' | 'missing' | 'invalid' | 'unchecked';

export interface LockReport {
  readonly relation: LockRelation;
  readonly size?: number;
  readonly root?: string;
  readonly detail: string;
}

/** Reads the lock record and says how it stands to `published`. */
export async function checkLock(
  target: FsckTarget,
  published: PublishedState | null,
  out: Findings,
): Promise<{ report: LockReport; state?: LockState }> {
  const { lock, lockName, key } = target;
  if (!lock) return { report: { relation: 'unchecked', detail: 'not checked' } };
  let held;
  try {
    held = await lock.read();
  } catch (e) {
    const detail = `${lockName} cannot be read: ${(e as Error).message}`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'invalid', detail } };
  }
  if (!held) {
    const detail = `there is no lock record (${lockName}): a start would not know the log's size; \`stele log recover\` rebuilds it from the published checkpoint`;
    if (published) out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'missing', detail } };
  }
  const { state } = held;
  const base = { size: state.size, root: state.root };
  try {
    const c = openCheckpoint(state.note, key);
    if (c.size !== state.size || toHex(c.root) !== state.root)
      throw new Error('its note does not match its size and root');
  } catch (e) {
    const detail = `${lockName} does not verify under the log key: ${(e as Error).message}`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'invalid', ...base, detail }, state };
  }
  if (!published)
    return {
      report: { relation: 'unchecked', ...base, detail: `size ${state.size}; no published checkpoint to compare` },
      state,
    };
  const cpRoot = toHex(published.root);
  if (state.size === published.size) {
    if (state.root === cpRoot)
      return {
        report: { relation: 'equal', ...base, detail: `size ${state.size} and root equal the published checkpoint's` },
        state,
      };
    const detail = `${lockName} and the published checkpoint sign two different roots for size ${state.size}: the log forked`;
    out.add('problem', 'lock', lockName, detail);
    return { report: { relation: 'forked', ...base, detail }, state };
  }
  if (state.size > published.size) {
    const detail = `${lockName} (size ${state.size}) is newer than the published checkpoint (size ${published.size}): a batch committed but not yet published; the next start publishes it`;
    out.add('notice', 'lock', lockName, detail);
    return { report: { relation: 'newer', ...base, detail }, state };
  }
  const detail = `${lockName} (size ${state.size}) is older than the published checkpoint (size ${published.size}): a restored or rolled-back lock; \`stele log recover\` rebuilds it`;
  out.add('problem', 'lock', lockName, detail);
  return { report: { relation: 'older', ...base, detail }, state };
}

/**
 * The objects a start re-creates from the lock record's staged batch, by key, as
 * src/sequencer/sequencer.ts re-applies it (the edge at its start size, then its records);
 * none if nothing is staged or its staging object is gone (its objects were durable). What
 * stops a start from re-applying it is a finding.
 */
export async function stagedObjects(
  target: FsckTarget,
  state: LockState,
  out: Findings,
): Promise<Map<string, Uint8Array>> {
  const staged = state.staged;
  const none = new Map<string, Uint8Array>();
  if (!staged) return none;
  const data = staged.key !== undefined ? await target.staging?.get(staged.key) : Buffer.from(staged.records, 'base64');
  if (!data) return none;
  const label = staged.key ?? `the batch staged in ${target.lockName}`;
  try {
    const base = await loadEdge(target.store, staged.fromSize, hashFromHex(staged.fromRoot));
    const result = base.append(decodeBundle(data, label, Number.MAX_SAFE_INTEGER));
    if (result.edge.size !== state.size || toHex(result.root) !== state.root)
      throw new LogIntegrityError(`${label} does not reproduce the lock record's root`);
    return new Map(result.objects.map((o) => [o.key, o.data]));
  } catch (e) {
    if (e instanceof MissingObjectError) {
      out.add(
        'problem',
        'missing',
        e.key,
        `${e.key} is missing: a start re-applies the batch staged in ${target.lockName} onto size ${staged.fromSize}, and needs it`,
      );
    } else if (e instanceof LogIntegrityError || e instanceof TileFormatError) {
      out.add('problem', 'tree', label, `a start cannot re-apply ${label}: ${e.message}`);
    } else throw e;
    return none;
  }
}
