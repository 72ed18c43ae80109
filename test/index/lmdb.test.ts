// The LMDB lookup index writes behind its batches: a batch is visible to lookups as soon as
// onBatch returns, its transaction commits in the background in order, and after a close
// and reopen everything is there exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CanonicalEntry } from '../../src/core/entry.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { IndexGapError } from '../../src/index/types.js';
import { type IntegratedBatch, type PublishedCheckpoint, batchOfEntries } from '../../src/sequencer/contract.js';
import { editIndexRow, firstCandidate } from '../helpers/index-rows.js';

const dir = mkdtempSync(join(tmpdir(), 'stele-index-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const digest = (i: number) => i.toString(16).padStart(64, '0');
const entry = (d: number, type: string, artifactId?: string): CanonicalEntry => ({
  v: 1,
  type,
  result: 'r',
  digest: digest(d),
  timestamp: 't',
  ...(artifactId ? { artifact: 'x', artifactId } : {}),
});
const batch = (fromSize: number, entries: CanonicalEntry[]): IntegratedBatch =>
  batchOfEntries(fromSize, entries, {} as PublishedCheckpoint);

describe('LmdbIndex', () => {
  it('answers for a batch as soon as onBatch returns, keeps first digest / latest artifact, and persists once', async () => {
    const path = join(dir, 'a');
    let index = new LmdbIndex(path);
    await index.onBatch(batch(0, [entry(1, 'anchor', 'art_a'), entry(2, 'anchor'), entry(1, 'verify', 'art_a')]));
    await index.onBatch(batch(3, [entry(3, 'anchor', 'art_b'), entry(2, 'verify', 'art_a')]));
    // Right away, whether or not the transactions have committed:
    expect(await index.findByDigest(digest(1), firstCandidate)).toBe(0);
    expect(await index.findByDigest(digest(2), firstCandidate)).toBe(1);
    expect(await index.findByDigest(digest(3), firstCandidate)).toBe(3);
    expect(await index.findByArtifact('art_a', firstCandidate)).toBe(4);
    expect(await index.indexedSize()).toBe(5);
    expect(await index.countsByType()).toEqual({ anchor: 3, verify: 2 });
    // Replays change nothing; a gap is refused.
    await index.onBatch(batch(3, [entry(3, 'anchor', 'art_b'), entry(2, 'verify', 'art_a')]));
    await expect(index.onBatch(batch(7, [entry(9, 'anchor')]))).rejects.toThrow(IndexGapError);
    await index.close();

    index = new LmdbIndex(path);
    expect(await index.indexedSize()).toBe(5);
    expect(await index.findByDigest(digest(1), firstCandidate)).toBe(0);
    expect(await index.findByDigest(digest(2), firstCandidate)).toBe(1);
    expect(await index.findByArtifact('art_a', firstCandidate)).toBe(4);
    expect(await index.findByArtifact('art_b', firstCandidate)).toBe(3);
    expect(await index.countsByType()).toEqual({ anchor: 3, verify: 2 });
    expect(await index.findByDigest(digest(9), firstCandidate)).toBeUndefined();
    await index.close();
  });

  it('answers synchronously with a synchronous confirm, and lookups interleaved with an asynchronous one each get their own rows', async () => {
    const path = join(dir, 'interleaved');
    const filled = new LmdbIndex(path);
    await filled.onBatch(
      batch(
        0,
        [1, 3, 7, 5, 8].map((n) => entry(n, 'anchor')),
      ),
    );
    await filled.close();
    // Digest 1's rows name leaves 0, 2 and 4 (two of them stale), digest 3's leaf 1, digest 5's leaf 3.
    await editIndexRow(path, 'digest', digest(1), 2);
    await editIndexRow(path, 'digest', digest(1), 4);
    const index = new LmdbIndex(path);
    expect(index.findByDigest(digest(3), () => true)).toBe(1);
    expect(index.findByDigest(digest(1), (seq) => seq === 4)).toBe(4);
    expect(index.findByDigest(digest(9), () => true)).toBeUndefined();
    // Digest 1's lookup waits on each candidate; lookups of 3 and 5 run while it waits.
    const seen: number[] = [];
    const slow = index.findByDigest(digest(1), async (seq) => {
      seen.push(seq);
      await new Promise((r) => setTimeout(r, 5));
      expect(index.findByDigest(digest(3), () => true)).toBe(1);
      expect(await index.findByDigest(digest(5), async () => true)).toBe(3);
      return seq === 4;
    });
    expect(slow).toBeInstanceOf(Promise);
    expect(await slow).toBe(4);
    expect(seen).toEqual([0, 2, 4]);
    // The shared query is free again once every lookup ended.
    expect(index.findByDigest(digest(5), () => true)).toBe(3);
    await index.close();
  });

  it('waits for its batches to commit once more rows than its bound wait (memory stays bounded)', async () => {
    const index = new LmdbIndex(join(dir, 'bounded'), undefined, 100);
    const entries = (from: number) => Array.from({ length: 60 }, (_, i) => entry(from + i, 'anchor'));
    await index.onBatch(batch(0, entries(0)));
    // 60 rows wait: under the bound, onBatch returns before the commit timer fires.
    expect(index.footprint().rows.digest).toBe(0);
    await index.onBatch(batch(60, entries(60)));
    // 120 rows would wait: onBatch returned only once both batches were committed.
    expect(index.footprint().rows.digest).toBe(120);
    await index.close();
  });

  it('counts each batch once while its transaction commits; batches commit in groups', async () => {
    const path = join(dir, 'b');
    let index = new LmdbIndex(path);
    const db = (index as unknown as { db: { root: { transaction: (f: () => void) => Promise<unknown> } } }).db.root;
    const transaction = db.transaction.bind(db);
    let transactions = 0;
    db.transaction = (f) => (transactions++, transaction(f));
    for (let b = 0; b < 20; b++) {
      await index.onBatch(
        batch(
          b * 10,
          Array.from({ length: 10 }, (_, i) => entry(b * 10 + i, i % 2 ? 'odd' : 'even')),
        ),
      );
      if (b % 7 === 6) void index.flush(); // a commit in flight while later batches arrive
      const counts = await index.countsByType();
      expect(counts.odd! + counts.even!).toBe((b + 1) * 10);
    }
    await index.close();
    expect(transactions).toBe(3); // batches 0-6, 7-13 and 14-19
    index = new LmdbIndex(path);
    expect(await index.indexedSize()).toBe(200);
    expect(await index.countsByType()).toEqual({ odd: 100, even: 100 });
    await index.close();
  });

  it('after a failed write (a full disk) keeps the batch in memory and writes it first with the next group, never skipping it', async () => {
    const path = join(dir, 'failed');
    let index = new LmdbIndex(path);
    await index.onBatch(batch(0, [entry(20, 'anchor')]));
    await index.flush();
    const db = (index as unknown as { db: { root: { transaction: (f: () => void) => Promise<unknown> } } }).db.root;
    const transaction = db.transaction.bind(db);
    let failures = 1;
    db.transaction = (f) => (failures-- > 0 ? Promise.reject(new Error('disk full')) : transaction(f));
    await index.onBatch(batch(1, [entry(21, 'anchor')]));
    await index.flush();
    // Lookups still see the batch whose write failed.
    expect(await index.findByDigest(digest(21), firstCandidate)).toBe(1);
    await index.onBatch(batch(2, [entry(22, 'verify')]));
    await index.flush();
    expect(await index.indexedSize()).toBe(3);
    await index.close();
    // Both were stored by the next commit: nothing is left to re-index.
    index = new LmdbIndex(path);
    expect(await index.indexedSize()).toBe(3);
    expect(await index.findByDigest(digest(21), firstCandidate)).toBe(1);
    expect(await index.findByDigest(digest(22), firstCandidate)).toBe(2);
    expect(await index.countsByType()).toEqual({ anchor: 2, verify: 1 });
    await index.close();
  });
});
