// Sequencing ahead of the batch: runs of requests get their places (seq, entry, entry_hash,
// leaf hash) chained exactly as RightEdge.append would chain them, in the sequencing worker;
// a request that cannot be an entry is refused alone; a failed batch put back is sequenced
// again from the reloaded edge.
import { afterEach, describe, expect, it } from 'vitest';
import { type AnchorRequest, anchorRequest, buildEntry } from '../src/anchor.js';
import { ZERO_HASH, canonicalEntryBytes } from '../src/entry.js';
import { HASH_SIZE, bytesEqual, leafHash } from '../src/hash.js';
import { RightEdge } from '../src/sequencer/edge.js';
import { type PoolItem, SequencingPool, placed } from '../src/sequencer/pool.js';
import { sequenceRun } from '../src/sequencer/sequencing.js';

const digest = (i: number) => i.toString(16).padStart(64, '0');
const req = (i: number, artifact?: string): AnchorRequest => anchorRequest('ledger_anchor', 'Anchored', digest(i), artifact ? { artifact, scope: 'ci' } : {});
const huge = (i: number): AnchorRequest => ({ ...req(i), artifact: 'x'.repeat(70_000) });

function item(request: AnchorRequest, refused: Error[] = []): PoolItem<number> {
  return { request, enqueued: 0, onCommitted: undefined, sequenced: undefined, resolve: () => undefined, reject: (e) => refused.push(e) };
}

const tipOf = (edge: RightEdge, floorMs = 0) => ({ size: edge.size, lastEntryHash: edge.lastEntryHash, floorMs });

/** Appends taken items through appendHashed, checked against a plain append of the same entries. */
function appendBoth(edge: RightEdge, items: PoolItem<number>[]) {
  const places = items.map((p) => placed(p.request, p.sequenced!));
  const hashed = edge.appendHashed(
    places.map((s) => s.canonical),
    places.map((s) => s.entryHash),
    places.map((s) => s.leafHash),
  );
  const plain = edge.append(places.map((s) => s.canonical));
  expect(bytesEqual(hashed.root, plain.root)).toBe(true);
  expect(places.every((s, i) => bytesEqual(s.entryHash, plain.entryHashes[i]!) && bytesEqual(s.leafHash, leafHash(s.entryHash)))).toBe(true);
  expect(places.every((s) => bytesEqual(s.canonical, canonicalEntryBytes(s.entry)))).toBe(true);
  return hashed.edge;
}

describe('sequenceRun', () => {
  it('chains from the given state, one timestamp per run that never goes back, refusing oversize entries alone', () => {
    const edge = RightEdge.empty().append([canonicalEntryBytes(buildEntry(req(0), '2026-01-01T00:00:00.000Z'))]).edge;
    const run = sequenceRun([req(1, 'a.tar'), huge(2), req(3)], { next: 1, prior: edge.lastEntryHash, lastMs: 5_000 }, 4_000);
    expect(run.timestamp).toBe(new Date(5_000).toISOString());
    expect(run.refused).toEqual([null, 'canonical entry exceeds 65,535 bytes', null]);
    expect(run.artifactIds).toEqual([buildEntry(req(1, 'a.tar'), run.timestamp).artifactId, undefined]);
    const canonicals = [0, 1].map((k) => run.canonicals.subarray(k === 0 ? 0 : run.ends[k - 1]!, run.ends[k]!));
    expect(canonicals.map((c) => Buffer.from(c).toString())).toEqual([req(1, 'a.tar'), req(3)].map((r) => Buffer.from(canonicalEntryBytes(buildEntry(r, run.timestamp))).toString()));
    const plain = edge.append(canonicals);
    expect(bytesEqual(run.entryHashes, Buffer.concat(plain.entryHashes))).toBe(true);
    expect(bytesEqual(run.leafHashes, Buffer.concat(plain.entryHashes.map(leafHash)))).toBe(true);
    expect(run.state.next).toBe(3);
    expect(bytesEqual(run.state.prior, run.entryHashes.subarray(HASH_SIZE))).toBe(true);
  });
});

describe('SequencingPool (worker thread)', () => {
  const pools: SequencingPool<number>[] = [];
  const open = (lookahead: number, now = () => 1_000) => {
    const p = new SequencingPool<number>(now, lookahead);
    pools.push(p);
    return p;
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()));
  });

  it('takes batches sequenced in arrival order and chained across batches', async () => {
    const pool = open(5);
    pool.reset(tipOf(RightEdge.empty()));
    const items = Array.from({ length: 12 }, (_, i) => item(req(i, i % 2 ? `b${i}` : undefined)));
    items.forEach((p) => pool.add(p));
    const first = await pool.take(5);
    expect(first.map((p) => p.sequenced!.seq)).toEqual([0, 1, 2, 3, 4]);
    let edge = appendBoth(RightEdge.empty(), first);
    const rest = await pool.take(100);
    expect(rest.map((p) => p.request.digest)).toEqual(items.slice(5).map((p) => p.request.digest));
    expect(rest.map((p) => p.sequenced!.seq)).toEqual([5, 6, 7, 8, 9, 10, 11]);
    edge = appendBoth(edge, rest);
    expect(edge.size).toBe(12);
    expect(pool.length).toBe(0);
    expect(await pool.take(10)).toEqual([]);
  });

  it('refuses an entry too large for a bundle alone and keeps the others in order', async () => {
    const pool = open(10);
    pool.reset({ size: 0, lastEntryHash: ZERO_HASH, floorMs: 0 });
    const refused: Error[] = [];
    // One that cannot even be serialised (it bypassed validation) is refused alone too.
    const unserialisable = { ...req(4), scope: 10n } as unknown as AnchorRequest;
    [req(1), huge(2), req(3), unserialisable, req(5)].forEach((r) => pool.add(item(r, refused)));
    const batch = await pool.take(10);
    expect(refused.map((e) => e.message)).toEqual(['canonical entry exceeds 65,535 bytes', expect.stringMatching(/^the request cannot be made an entry: .*BigInt/)]);
    expect(batch.map((p) => [p.request.digest, p.sequenced!.seq])).toEqual([
      [digest(1), 0],
      [digest(3), 1],
      [digest(5), 2],
    ]);
    appendBoth(RightEdge.empty(), batch);
  });

  it('a batch put back is sequenced again from the reloaded edge, ahead of later arrivals', async () => {
    const pool = open(10, () => 5_000);
    pool.reset(tipOf(RightEdge.empty()));
    [1, 2, 3].forEach((i) => pool.add(item(req(i))));
    const batch = await pool.take(2);
    expect(batch.map((p) => p.sequenced!.seq)).toEqual([0, 1]);
    // Storage turned out to hold one more leaf (and a later checkpoint time) than we had.
    const edge = RightEdge.empty().append([canonicalEntryBytes(buildEntry(req(0), 'x'))]).edge;
    pool.putBack(batch, tipOf(edge, 9_000));
    const again = await pool.take(3);
    expect(again.map((p) => p.request.digest)).toEqual([digest(1), digest(2), digest(3)]);
    expect(again.map((p) => p.sequenced!.seq)).toEqual([1, 2, 3]);
    expect(placed(again[0]!.request, again[0]!.sequenced!).entry.timestamp).toBe(new Date(9_000).toISOString());
    appendBoth(edge, again);
    // A batch sequenced from another edge is refused by the edge itself.
    const s = placed(again[0]!.request, again[0]!.sequenced!);
    expect(() => RightEdge.empty().appendHashed([s.canonical], [s.entryHash], [s.leafHash])).toThrow(/not chained/);
  });

  it('after close, taking fails', async () => {
    const pool = open(10);
    pool.reset(tipOf(RightEdge.empty()));
    pool.add(item(req(1)));
    await pool.close();
    await expect(pool.take(1)).rejects.toThrow(/closed/);
  });
});
