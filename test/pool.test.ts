// The sequencing pool: requests get their place (seq, entry, entry_hash, leaf hash) as they
// arrive, chained exactly as RightEdge.append would chain them; a request that cannot be an
// entry is refused alone; a failed batch put back is sequenced again from the reloaded edge.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type AnchorRequest, anchorRequest } from '../src/anchor.js';
import { ZERO_HASH, canonicalEntryBytes } from '../src/entry.js';
import { bytesEqual, leafHash } from '../src/hash.js';
import { type PoolItem, SequencingPool } from '../src/sequencer/pool.js';
import { RightEdge } from '../src/sequencer/edge.js';

const digest = (i: number) => i.toString(16).padStart(64, '0');

function item(request: AnchorRequest, refused: Error[]): PoolItem<number> {
  return { request, enqueued: 0, onCommitted: undefined, sequenced: undefined, resolve: () => undefined, reject: (e) => refused.push(e) };
}

const tipOf = (edge: RightEdge, floorMs = 0) => ({ size: edge.size, lastEntryHash: edge.lastEntryHash, floorMs });

describe('SequencingPool', () => {
  it('sequences on arrival, up to one batch ahead, chained as the edge chains them', async () => {
    let clock = 1_000;
    const pool = new SequencingPool<number>(() => clock, 5);
    pool.reset({ size: 0, lastEntryHash: ZERO_HASH, floorMs: 0 });
    const refused: Error[] = [];
    const items = Array.from({ length: 8 }, (_, i) => item(anchorRequest('ledger_anchor', 'Anchored', digest(i), { artifact: `a${i}` }), refused));
    items.slice(0, 3).forEach((p) => pool.add(p));
    await nextTurn();
    expect(items.slice(0, 3).map((p) => p.sequenced?.seq)).toEqual([0, 1, 2]);
    clock = 500; // the clock steps back: timestamps must not
    items.slice(3).forEach((p) => pool.add(p));
    await nextTurn();
    // Five (the lookahead) sequenced, the rest wait for the batch that takes them.
    expect(items.map((p) => p.sequenced?.seq)).toEqual([0, 1, 2, 3, 4, undefined, undefined, undefined]);
    expect(items[4]!.sequenced!.entry.timestamp).toBe(new Date(1_000).toISOString());

    const first = pool.take(5);
    const edge = RightEdge.empty();
    const byAppend = edge.append(first.map((p) => p.sequenced!.canonical));
    const placed = first.map((p) => p.sequenced!);
    expect(placed.every((s, i) => bytesEqual(s.entryHash, byAppend.entryHashes[i]!) && bytesEqual(s.leafHash, leafHash(s.entryHash)))).toBe(true);
    expect(placed.every((s) => bytesEqual(s.canonical, canonicalEntryBytes(s.entry)))).toBe(true);
    const viaHashes = edge.appendHashed(
      placed.map((s) => s.canonical),
      placed.map((s) => s.entryHash),
      placed.map((s) => s.leafHash),
    );
    expect(bytesEqual(viaHashes.root, byAppend.root)).toBe(true);

    const rest = pool.take(5);
    expect(rest.map((p) => p.sequenced!.seq)).toEqual([5, 6, 7]);
    const next = byAppend.edge.appendHashed(
      rest.map((p) => p.sequenced!.canonical),
      rest.map((p) => p.sequenced!.entryHash),
      rest.map((p) => p.sequenced!.leafHash),
    );
    expect(bytesEqual(next.root, byAppend.edge.append(rest.map((p) => p.sequenced!.canonical)).root)).toBe(true);
    expect(refused).toEqual([]);
    expect(pool.length).toBe(0);
  });

  it('refuses a batch sequenced from another edge', () => {
    const pool = new SequencingPool<number>(() => 0, 10);
    pool.reset({ size: 0, lastEntryHash: ZERO_HASH, floorMs: 0 });
    const p = item(anchorRequest('ledger_anchor', 'Anchored', digest(1)), []);
    pool.add(p);
    const [taken] = pool.take(1);
    const other = RightEdge.empty().append([canonicalEntryBytes({ v: 1, type: 't', result: 'r', digest: digest(9), timestamp: 'x' })]).edge;
    const s = taken!.sequenced!;
    expect(() => other.appendHashed([s.canonical], [s.entryHash], [s.leafHash])).toThrow(/not chained/);
  });

  it('refuses an entry too large for a bundle alone, and keeps the others in order', async () => {
    const pool = new SequencingPool<number>(() => 0, 10);
    pool.reset({ size: 7, lastEntryHash: ZERO_HASH, floorMs: 0 });
    const refused: Error[] = [];
    const huge = { ...anchorRequest('ledger_anchor', 'Anchored', digest(2)), artifact: 'x'.repeat(70_000) };
    const items = [anchorRequest('ledger_anchor', 'Anchored', digest(1)), huge, anchorRequest('ledger_anchor', 'Anchored', digest(3))].map((r) => item(r, refused));
    items.forEach((p) => pool.add(p));
    await nextTurn();
    expect(refused.map((e) => e.message)).toEqual(['canonical entry exceeds 65,535 bytes']);
    expect(pool.length).toBe(2);
    expect(pool.take(10).map((p) => [p.request.digest, p.sequenced!.seq])).toEqual([
      [digest(1), 7],
      [digest(3), 8],
    ]);
  });

  it('a batch put back is sequenced again from the reloaded edge, ahead of later arrivals', async () => {
    const pool = new SequencingPool<number>(() => 5_000, 10);
    const edge = RightEdge.empty().append([canonicalEntryBytes({ v: 1, type: 't', result: 'r', digest: digest(0), timestamp: 'x' })]).edge;
    pool.reset(tipOf(RightEdge.empty()));
    const items = [1, 2, 3].map((i) => item(anchorRequest('ledger_anchor', 'Anchored', digest(i)), []));
    items.forEach((p) => pool.add(p));
    const batch = pool.take(2);
    expect(batch.map((p) => p.sequenced!.seq)).toEqual([0, 1]);
    // Storage turned out to hold one more leaf (and a later checkpoint time) than we had.
    pool.putBack(batch, tipOf(edge, 9_000));
    const again = pool.take(3);
    expect(again.map((p) => p.request.digest)).toEqual([digest(1), digest(2), digest(3)]);
    expect(again.map((p) => p.sequenced!.seq)).toEqual([1, 2, 3]);
    expect(again[0]!.sequenced!.entry.timestamp).toBe(new Date(9_000).toISOString());
    const r = edge.appendHashed(
      again.map((p) => p.sequenced!.canonical),
      again.map((p) => p.sequenced!.entryHash),
      again.map((p) => p.sequenced!.leafHash),
    );
    expect(r.edge.size).toBe(4);
  });
});
