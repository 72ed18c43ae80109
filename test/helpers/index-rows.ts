// The lookup index's rows seen from a test: a Confirm that takes the first candidate (for a
// test of what the index holds, not of what the API answers), and direct edits of a stopped
// server's LMDB index (a stale or a missing row), in the index's own layout.
import { anchorTag } from '../../src/index/keys.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { type RowSet, artifactRow, digestRow } from '../../src/index/lmdb-rows.js';
import type { Confirm } from '../../src/index/types.js';

/** Accepts the index's first candidate. */
export const firstCandidate: Confirm = async () => true;

interface Internals {
  db: { root: { transaction(f: () => void): Promise<unknown> }; digests: RowSet; artifacts: RowSet };
  short(value: string): Buffer;
}

/**
 * Adds the row naming leaf `seq` for a digest (an anchor's, given its identity) or an
 * artifact id — or, with `seq` undefined, removes every row of that value.
 */
export async function editIndexRow(
  path: string,
  kind: 'digest' | 'artifact',
  value: string,
  seq: number | undefined,
  identity?: string,
): Promise<void> {
  const index = new LmdbIndex(path);
  const { db, short } = index as unknown as Internals;
  const key = short.call(index, value);
  const set = kind === 'digest' ? db.digests : db.artifacts;
  await db.root.transaction(() => {
    if (seq === undefined) for (const row of [...set.startingWith(key)]) set.remove(row);
    else
      set.put(
        kind === 'digest'
          ? digestRow(key, seq, identity === undefined ? 0 : anchorTag(identity))
          : artifactRow(key, seq),
      );
  });
  await index.close();
}
