// The LMDB index's size at 200,000 entries (issue 35): at most 80 bytes per entry of rows and
// 120 of file, however it was grown — in 1,000 small batches each committed alone, as `serve`
// grows it, or all at once, as a rebuild (and an upgrade from an older layout) writes it.
// Entries as the benchmarks make them: an anchor with its own digest and a new artifact label.
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { type CanonicalEntry, artifactId } from '../../src/core/entry.js';
import { TILE_WIDTH } from '../../src/core/tiles.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { type PublishedCheckpoint, batchOfEntries } from '../../src/sequencer/contract.js';
import { firstCandidate } from '../helpers/index-rows.js';
import { scratchDir } from '../helpers/tmp.js';

const N = 200_000;
const LIVE_BYTES = 80;
const FILE_BYTES = 120;

function entry(i: number): CanonicalEntry {
  const artifact = `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`;
  return {
    v: 1,
    type: 'ledger_anchor',
    result: 'Anchored',
    digest: (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64),
    timestamp: '2026-01-01T00:00:00.000Z',
    artifact,
    artifactId: artifactId(artifact, 'acme/ci'),
    scope: 'acme/ci',
  };
}

async function feed(index: LmdbIndex, batchSize: number, commitEach: boolean): Promise<void> {
  for (let from = 0; from < N; from += batchSize) {
    const entries = Array.from({ length: Math.min(batchSize, N - from) }, (_, k) => entry(from + k));
    await index.onBatch(batchOfEntries(from, entries, {} as PublishedCheckpoint));
    if (commitEach) await index.flush();
    // Else the batches commit in groups, as their timer fires between them (as a rebuild reading bundles).
    else await new Promise((r) => setImmediate(r));
  }
  await index.flush();
}

async function expectWithinTargets(index: LmdbIndex): Promise<void> {
  const { liveBytes, fileBytes, rows } = index.footprint();
  expect(rows).toEqual({ digest: N, artifact: N, label: N });
  expect(liveBytes / N).toBeLessThanOrEqual(LIVE_BYTES);
  expect(fileBytes / N).toBeLessThanOrEqual(FILE_BYTES);
  // And still an index: a few lookups answer from it.
  for (const i of [0, 12_345, N - 1]) {
    expect(await index.findByDigest(entry(i).digest, firstCandidate)).toBe(i);
    expect(await index.findByArtifact(entry(i).artifactId!, firstCandidate)).toBe(i);
  }
}

describe('LmdbIndex size at 200,000 entries', () => {
  it('grown in 1,000 batches, each its own transaction', async () => {
    const index = new LmdbIndex(join(scratchDir('stele-index-grown-'), 'index'));
    await feed(index, N / 1000, true);
    await expectWithinTargets(index);
    await index.close();
  }, 180_000);

  it('rebuilt at once over an index of the previous layout (an upgrade)', async () => {
    const path = join(scratchDir('stele-index-rebuilt-'), 'index');
    // The previous layout's rows for the same entries, as an upgrade finds them.
    const old = open<number, string | Buffer>({ path, compression: false });
    await old.transaction(() => {
      for (let i = 0; i < N; i++) old.putSync(Buffer.concat([Buffer.of(1), Buffer.from(entry(i).digest, 'hex')]), i);
      old.putSync('meta:size', N);
      old.putSync('meta:schema', 202);
    });
    await old.close();
    const index = new LmdbIndex(path);
    expect(await index.outdated()).toBe(true);
    await index.clear();
    // A rebuild indexes a record bundle (a tile's width of entries) at a time.
    await feed(index, TILE_WIDTH, false);
    await expectWithinTargets(index);
    await index.close();
  }, 180_000);
});
