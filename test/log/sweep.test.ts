// Issue 31, item 7: on the local backend a tile's partial versions are deleted once its full
// tile is durable (C2SP tlog-tiles allows it). A trickle of small batches, written by the
// real sequencer with and without the sweep: the bytes of partial tiles per entry (printed,
// the figure of the issue), which partials are left, and readers at older tree sizes, whose
// partials are gone, still reading them from the full tile (the reader, and over HTTP a 404
// that sends a tlog-tiles client to the full tile).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { leafHash } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { type TileId, parseTilePath, tilePath } from '../../src/core/tiles.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { LogReader, type TreeHead } from '../../src/read/reader.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { startTestServer } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';
import { readContent } from '../helpers/stored-objects.js';

const ORIGIN = 'sweep.test/log';
/** Entries, in batches of BATCH: past a full level-0 tile several times. */
const ENTRIES = 1_200;
const BATCH = 3;
const digestOf = (i: number) => i.toString(16).padStart(64, '0');

interface Trickle {
  readonly dir: string;
  /** Every checkpoint the log published, oldest first. */
  readonly heads: TreeHead[];
  readonly partialBytes: number;
  readonly fullBytes: number;
  readonly partials: TileId[];
}

async function trickle(sweepPartials: boolean): Promise<Trickle> {
  const dir = scratchDir('stele-sweep-');
  const { sequencer } = await openLocalLog({
    dataDir: dir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 1,
    sweepPartials,
  });
  const heads: TreeHead[] = [];
  for (let n = 0; n < ENTRIES; n += BATCH) {
    await Promise.all(
      Array.from({ length: BATCH }, (_, i) =>
        sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(n + i))),
      ),
    );
    const { size, root } = sequencer.checkpoint;
    if (heads.at(-1)?.size !== size) heads.push({ size, root });
  }
  await sequencer.close();
  let partialBytes = 0;
  let fullBytes = 0;
  const partials: TileId[] = [];
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(dir, 'log', rel), { withFileTypes: true })) {
      const key = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(key);
      const id = parseTilePath(key);
      if (!id) continue;
      // A record bundle is stored compressed: its content, not its gzip size (which varies
      // with the entries' timestamps), is what both logs must hold alike.
      const file = join(dir, 'log', key);
      const bytes = id.kind === 'records' ? readContent(file).length : statSync(file).size;
      if (id.width < 256) {
        partialBytes += bytes;
        partials.push(id);
      } else fullBytes += bytes;
    }
  };
  walk('');
  return { dir, heads, partialBytes, fullBytes, partials };
}

let kept: Trickle;
let swept: Trickle;

beforeAll(async () => {
  kept = await trickle(false);
  swept = await trickle(true);
}, 120_000);

describe('partial tiles on the local backend', () => {
  it('are swept once their full tile exists: only the last tile of each kind and level keeps partials', () => {
    const perEntry = (bytes: number) => (bytes / ENTRIES / 1024).toFixed(2);
    console.log(
      `trickle of ${ENTRIES} entries in batches of ${BATCH}: partial tiles ${perEntry(kept.partialBytes)} KB/entry before, ${perEntry(swept.partialBytes)} KB/entry swept; full tiles ${perEntry(swept.fullBytes)} KB/entry`,
    );
    expect(swept.fullBytes).toBe(kept.fullBytes);
    expect(kept.partials.some((p) => p.kind === 0 && p.index === 0)).toBe(true);
    // The size the log ends at: 1,200 = 4 full tiles and 176 leaves, so tile 4 at level 0.
    const last = new Map<string, number>([
      ['0', 4],
      ['entries', 4],
      ['records', 4],
      ['1', 0],
    ]);
    for (const p of swept.partials) expect(tilePath(p)).toContain(`tile/${p.kind}/00${last.get(String(p.kind))}.p/`);
    expect(swept.partialBytes).toBeLessThan(kept.partialBytes / 3);
  });

  it('a reader at every published size still reads every entry with a proof that verifies', async () => {
    const reader = new LogReader(new FsObjectStore(join(swept.dir, 'log')));
    for (const head of swept.heads.filter((_, i) => i % 17 === 0 || i === swept.heads.length - 1)) {
      for (const seq of [0, head.size - 1, Math.floor(head.size / 2)]) {
        const e = await reader.entryWithProof(seq, head);
        expect(verifyInclusion(seq, head.size, leafHash(e.entryHash), e.auditPath, head.root)).toBe(true);
      }
    }
  });

  it('over HTTP a swept partial is a 404 (a client falls back to the full tile), the full tile and the last partial are served', async () => {
    const server = await startTestServer({ dataDir: swept.dir, origin: ORIGIN });
    try {
      const status = async (id: TileId) => (await fetch(`${server.url}/${tilePath(id)}`)).status;
      const older = swept.heads.find((h) => h.size > 100)!.size;
      expect(await status({ kind: 0, index: 0, width: older })).toBe(404);
      expect(await status({ kind: 'entries', index: 0, width: older })).toBe(404);
      expect(await status({ kind: 0, index: 0, width: 256 })).toBe(200);
      expect(await status({ kind: 0, index: 4, width: ENTRIES - 1024 })).toBe(200);
    } finally {
      await server.close();
    }
  });
});
