// The digest hints: the digest rows' short keys in memory, which name a lookup's first
// candidate without an LMDB seek once built whole, and give way to the index whenever they
// cannot answer (a key they lack, a leaf refused, a budget outgrown, a clear).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CanonicalEntry } from '../../src/core/entry.js';
import { DigestHints } from '../../src/index/digest-hints.js';
import { type DigestHintOptions, LmdbIndex } from '../../src/index/lmdb.js';
import type { RowSet } from '../../src/index/lmdb-rows.js';
import { type PublishedCheckpoint, batchOfEntries } from '../../src/sequencer/contract.js';
import { editIndexRow } from '../helpers/index-rows.js';

const dir = mkdtempSync(join(tmpdir(), 'stele-hints-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const key = (...bytes: number[]) => Uint8Array.from(bytes);

describe('DigestHints', () => {
  it('finds every key it was given as the table grows, and none it was not', () => {
    const hints = new DigestHints(64 * 1024 * 1024);
    const keys = randomBytes(6 * 200_000);
    for (let i = 0; i < 100_000; i++) expect(hints.add(keys, 6 * i, i)).toBe(true);
    expect(hints.rows).toBe(100_000);
    expect(hints.bytes).toBe(262_144 * 16);
    for (let i = 0; i < 100_000; i++) if (hints.leafOf(keys, 6 * i) !== i) expect.fail(`key ${i}`);
    let found = 0;
    for (let i = 100_000; i < 200_000; i++) if (hints.leafOf(keys, 6 * i) !== undefined) found++;
    expect(found).toBe(0);
  });

  it('is sized for the rows it expects from the start, within its budget', () => {
    const hints = new DigestHints(64 * 1024 * 1024, 100_000);
    expect(hints.bytes).toBe(262_144 * 16);
    const keys = randomBytes(6 * 100_000);
    for (let i = 0; i < 100_000; i++) hints.add(keys, 6 * i, i);
    expect(hints.bytes).toBe(262_144 * 16);
    expect(new DigestHints(1 << 20, 1_000_000).bytes).toBe(1 << 20);
  });

  it('keeps a key’s earliest leaf, in whatever order its rows come', () => {
    const hints = new DigestHints(1 << 20);
    const k = key(1, 2, 3, 4, 5, 6);
    for (const leaf of [9, 3, 7]) hints.add(k, 0, leaf);
    expect(hints.leafOf(k)).toBe(3);
    expect(hints.rows).toBe(1);
  });

  it('tells apart keys that share the low 32 bits (one slot) by their high 16, and leaves beyond 2^32', () => {
    const hints = new DigestHints(1 << 20);
    hints.add(key(0, 0, 9, 9, 9, 9), 0, 1);
    hints.add(key(0, 1, 9, 9, 9, 9), 0, 2 ** 40 - 1);
    hints.add(key(255, 255, 9, 9, 9, 9), 0, 3);
    expect(hints.leafOf(key(0, 0, 9, 9, 9, 9))).toBe(1);
    expect(hints.leafOf(key(0, 1, 9, 9, 9, 9))).toBe(2 ** 40 - 1);
    expect(hints.leafOf(key(255, 255, 9, 9, 9, 9))).toBe(3);
    expect(hints.leafOf(key(1, 0, 9, 9, 9, 9))).toBeUndefined();
  });

  it('refuses a row that would take it past its budget, at half full', () => {
    const hints = new DigestHints(65_536 * 16);
    expect(hints.fits(32_768)).toBe(true);
    expect(hints.fits(32_769)).toBe(false);
    const keys = randomBytes(6 * 32_769);
    for (let i = 0; i < 32_768; i++) expect(hints.add(keys, 6 * i, i)).toBe(true);
    expect(hints.add(keys, 6 * 32_768, 32_768)).toBe(false);
    expect(hints.leafOf(keys, 0)).toBe(0);
  });

  it('counts a budget that is no power of two by the table it can afford: slots are a power of two', () => {
    const budget = 1000 * 2 ** 20; // 2^25 slots fit (512 MiB), 2^26 would not
    expect(DigestHints.fit(budget, 2 ** 24)).toBe(true);
    expect(DigestHints.fit(budget, 2 ** 24 + 1)).toBe(false);
    expect(new DigestHints(1000 * 2 ** 10, 1_000_000).bytes).toBe(2 ** 19);
  });
});

const digest = (i: number) => i.toString(16).padStart(64, '0');
const entry = (d: number): CanonicalEntry => ({ v: 1, type: 'anchor', result: 'r', digest: digest(d), timestamp: 't' });
const batch = (fromSize: number, digests: number[]) =>
  batchOfEntries(fromSize, digests.map(entry), {} as PublishedCheckpoint);

/** Indexes leaves from `fromSize` on, holding `digests`, and commits them. */
async function commit(index: LmdbIndex, fromSize: number, digests: number[]): Promise<void> {
  for (let at = 0; at < digests.length; at += 100)
    await index.onBatch(batch(fromSize + at, digests.slice(at, at + 100)));
  await index.flush();
}

/** An index over `digests` (leaf i holding digests[i]), with its LMDB seeks counted, and a confirm that reads the "log". */
async function indexed(name: string, digests: number[], hints: DigestHintOptions, close = false) {
  const path = join(dir, name);
  let index = new LmdbIndex(path, undefined, undefined, hints);
  await commit(index, 0, digests);
  if (close) {
    await index.close();
    index = new LmdbIndex(path, undefined, undefined, hints);
  }
  return counted(index, path, digests);
}

function counted(index: LmdbIndex, path: string, digests: number[]) {
  const internals = index as unknown as { db: { digests: RowSet }; hints: DigestHints | undefined };
  const seeks = { count: 0 };
  const rows = internals.db.digests;
  const seek = rows.firstStartingWith.bind(rows);
  rows.firstStartingWith = (prefix) => {
    seeks.count++;
    return seek(prefix);
  };
  const confirms: number[] = [];
  const holds = (d: number) => (seq: number) => {
    confirms.push(seq);
    return digests[seq] === d;
  };
  const built = async () => {
    for (let i = 0; i < 200 && !internals.hints; i++) await new Promise((r) => setTimeout(r, 5));
    return internals.hints !== undefined;
  };
  /** Makes the first digest lookup (which starts the build with afterLookups 1); whether the hints then got built. */
  const warm = async () => {
    index.findByDigest(digest(digests[0]!), holds(digests[0]!));
    return built();
  };
  return { index, path, seeks, confirms, holds, built, warm, internals };
}

describe('LmdbIndex with digest hints', () => {
  it('seeks LMDB until the hints are built, then answers every digest from them, its earliest leaf', async () => {
    // 1,000 leaves; digest 7 is anchored again at leaf 900.
    const digests = Array.from({ length: 1000 }, (_, i) => (i === 900 ? 7 : i));
    const { index, seeks, holds, built } = await indexed('answers', digests, { afterLookups: 3 });
    for (const d of [1, 2]) expect(index.findByDigest(digest(d), holds(d))).toBe(d);
    expect(seeks.count).toBe(2);
    expect(await built()).toBe(false);
    expect(index.findByDigest(digest(3), holds(3))).toBe(3);
    expect(await built()).toBe(true);
    seeks.count = 0;
    for (let d = 0; d < 1000; d++)
      if (d !== 900 && index.findByDigest(digest(d), holds(d)) !== d) expect.fail(`digest ${d}`);
    expect(index.findByDigest(digest(7), holds(7))).toBe(7);
    expect(seeks.count).toBe(0);
    // A digest nobody anchored: the hints lack it, and the index is asked.
    expect(index.findByDigest(digest(5000), holds(5000))).toBeUndefined();
    expect(seeks.count).toBe(1);
    await index.close();
  });

  it('adds the rows of batches committed after they are built', async () => {
    const log = [10, 11, 12];
    const { index, seeks, holds, warm } = await indexed('later', log, { afterLookups: 1 });
    expect(await warm()).toBe(true);
    log.push(13, 14);
    await commit(index, 3, [13, 14]);
    seeks.count = 0;
    expect(index.findByDigest(digest(14), holds(14))).toBe(4);
    expect(seeks.count).toBe(0);
    await index.close();
  });

  it('walks the rows, never confirming a leaf twice, when the leaf hinted is refused (a stale row)', async () => {
    const digests = [5, 6, 7, 1, 8];
    const { index: filled, path } = await indexed('stale', digests, {});
    await filled.close();
    // A stale row: digest 1 "at" leaf 0, earlier than its real leaf 3, so the hints name 0.
    await editIndexRow(path, 'digest', digest(1), 0);
    const t = counted(new LmdbIndex(path, undefined, undefined, { afterLookups: 1 }), path, digests);
    expect(await t.warm()).toBe(true);
    t.confirms.length = 0;
    expect(t.index.findByDigest(digest(1), t.holds(1))).toBe(3);
    expect(t.confirms).toEqual([0, 3]);
    // And the same with a confirm that answers later.
    t.confirms.length = 0;
    const later = (seq: number) => Promise.resolve(t.holds(1)(seq));
    expect(await t.index.findByDigest(digest(1), later)).toBe(3);
    expect(t.confirms).toEqual([0, 3]);
    await t.index.close();
  });

  it('gives up hints that would outgrow their budget, and lookups still answer from the index', async () => {
    const digests = Array.from({ length: 300 }, (_, i) => i);
    const { index, holds, built, seeks } = await indexed('budget', digests, { afterLookups: 1, bytes: 1024 }, true);
    expect(index.findByDigest(digest(1), holds(1))).toBe(1);
    expect(await built()).toBe(false);
    seeks.count = 0;
    for (const d of [2, 150, 299]) expect(index.findByDigest(digest(d), holds(d))).toBe(d);
    expect(seeks.count).toBe(3);
    await index.close();
  });

  it('drops its hints when cleared: the rows indexed afterwards are found, under the new salt', async () => {
    const log = [1, 2, 3];
    const { index, holds, warm, internals } = await indexed('cleared', log, { afterLookups: 1 });
    expect(await warm()).toBe(true);
    await index.clear();
    expect(internals.hints).toBeUndefined();
    log.reverse();
    await commit(index, 0, log);
    expect(index.findByDigest(digest(3), holds(3))).toBe(0);
    expect(index.findByDigest(digest(1), holds(1))).toBe(2);
    await index.close();
  });
});
