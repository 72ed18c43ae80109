// Sequencing ahead of the batch: runs of requests get their places (seq, entry, entry_hash,
// leaf hash) chained exactly as RightEdge.append would chain them, in the sequencing worker;
// requests wait packed as records that decode to exactly what was submitted; a request that
// cannot be an entry is refused alone; a failed batch put back is sequenced again from the
// reloaded edge.
import { afterEach, describe, expect, it } from 'vitest';
import { type AnchorRequest, anchorRequest, buildEntry } from '../../src/core/anchor.js';
import { ZERO_HASH, canonicalEntryBytes } from '../../src/core/entry.js';
import { HASH_SIZE, bytesEqual, leafHash } from '../../src/core/hash.js';
import { RightEdge } from '../../src/sequencer/right-edge.js';
import { encodeBundle, frame } from '../../src/core/bundle.js';
import { type Segment, SequencingPool, batchEntries } from '../../src/sequencer/pool.js';
import { UnrecordableRequestError } from '../../src/sequencer/contract.js';
import { RecordBuffer, Repeats } from '../../src/sequencer/records.js';
import { sequenceRun } from '../../src/sequencer/sequencing.js';
import { StagingBuffer } from '../../src/sequencer/staging-buffer.js';

const digest = (i: number) => i.toString(16).padStart(64, '0');
const req = (i: number, artifact?: string): AnchorRequest =>
  anchorRequest('ledger_anchor', 'Anchored', digest(i), artifact ? { artifact, scope: 'ci' } : {});
const huge = (i: number): AnchorRequest => ({ ...req(i), artifact: 'x'.repeat(70_000) });

function records(requests: AnchorRequest[]) {
  const b = new RecordBuffer();
  requests.forEach((r) => b.append(r));
  return b.copy(0, requests.length);
}

const tipOf = (edge: RightEdge, floorMs = 0) => ({ size: edge.size, lastEntryHash: edge.lastEntryHash, floorMs });

/** Every item of a batch: its seq and entry object. */
const places = (batch: Segment<number>[]) =>
  batch.flatMap((s) => Array.from({ length: s.count }, (_, j) => ({ seq: s.seq(s.lo + j), entry: s.entry(s.lo + j) })));

/** Appends a taken batch through appendHashed, checked against a plain append of the same entries. */
function appendBoth(edge: RightEdge, batch: Segment<number>[]) {
  const entries = places(batch).map((p) => p.entry);
  const packed = batchEntries(batch);
  const hashed = edge.appendHashed(packed);
  const plain = edge.append(entries.map((e) => canonicalEntryBytes(e)));
  expect(bytesEqual(hashed.root, plain.root)).toBe(true);
  // The staged bundle frames exactly the batch's canonical entries, in a kept buffer or not.
  const bundle = encodeBundle(entries.map((e) => canonicalEntryBytes(e)));
  expect(bytesEqual(frame([], packed.canonicals), bundle)).toBe(true);
  expect(bytesEqual(new StagingBuffer().fill(packed.canonicals), bundle)).toBe(true);
  expect(bytesEqual(packed.entryHashes, plain.entryHashes)).toBe(true);
  for (let k = 0; k < entries.length; k++) {
    expect(
      bytesEqual(
        packed.leafHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE),
        leafHash(plain.entryHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE)),
      ),
    ).toBe(true);
  }
  expect(hashed.objects.map((o) => [o.key, Buffer.from(o.data).toString('hex')])).toEqual(
    plain.objects.map((o) => [o.key, Buffer.from(o.data).toString('hex')]),
  );
  return hashed.edge;
}

describe('request records', () => {
  it('decode to exactly the request submitted, whatever its strings', () => {
    const odd: AnchorRequest[] = [
      req(1),
      req(2, 'release/ä-ß-𝄞.tar'),
      anchorRequest('document_verified', 'Verified', digest(3), { artifact: 'a', scope: '', tenant: 'acme' }),
      { type: 'ledger_anchor', result: 'Anchored', digest: 'AB'.repeat(32) },
      { type: 'x', result: 'y', digest: 'not hex', artifact: 'lone \ud800 surrogate', tenant: 't' },
    ];
    const b = new RecordBuffer(1);
    odd.forEach((r) => b.append(r));
    expect(odd.map((_, i) => b.request(i))).toEqual(odd);
    // Strings that repeat from record to record are shared, and only those.
    const repeats = new Repeats();
    expect([...odd, ...odd].map((_, i) => b.request(i % odd.length, repeats))).toEqual([...odd, ...odd]);
  });

  it('refuse at once a request that can never be an entry, keeping nothing of it', () => {
    const b = new RecordBuffer();
    expect(() => b.append(huge(1))).toThrow(new UnrecordableRequestError('canonical entry exceeds 65,535 bytes'));
    expect(() => b.append({ ...req(2), scope: 10n } as unknown as AnchorRequest)).toThrow(
      /cannot be made an entry: scope is bigint/,
    );
    expect(() => b.append({ ...req(3), artifact: '€'.repeat(30_000) })).toThrow(/exceeds 65,535/);
    b.append(req(4));
    expect(b.count).toBe(1);
    expect(b.request(0)).toEqual(req(4));
  });
});

describe('sequenceRun', () => {
  it('chains from the given state, one timestamp per run that never goes back, refusing oversize entries alone', () => {
    const edge = RightEdge.empty().append([canonicalEntryBytes(buildEntry(req(0), '2026-01-01T00:00:00.000Z'))]).edge;
    // 21,800 three-byte characters fit a record, not a canonical entry with its other fields.
    const big = { ...req(2), artifact: '€'.repeat(21_800) };
    const run = sequenceRun(
      records([req(1, 'a.tar'), big, req(3)]),
      { next: 1, prior: edge.lastEntryHash, lastMs: 5_000 },
      4_000,
    );
    expect(run.timestamp).toBe(new Date(5_000).toISOString());
    expect(run.refused).toEqual([{ at: 1, why: 'canonical entry exceeds 65,535 bytes' }]);
    expect(run.artifactIds.split('\n')).toEqual([buildEntry(req(1, 'a.tar'), run.timestamp).artifactId, '']);
    const canonicals = [0, 1].map((k) => run.canonicals.subarray(k === 0 ? 0 : run.ends[k - 1]!, run.ends[k]!));
    expect(canonicals.map((c) => Buffer.from(c).toString())).toEqual(
      [req(1, 'a.tar'), req(3)].map((r) => Buffer.from(canonicalEntryBytes(buildEntry(r, run.timestamp))).toString()),
    );
    const plain = edge.append(canonicals);
    expect(bytesEqual(run.entryHashes, plain.entryHashes)).toBe(true);
    expect(
      bytesEqual(
        run.leafHashes,
        Buffer.concat([0, 1].map((k) => leafHash(plain.entryHashes.subarray(k * HASH_SIZE, (k + 1) * HASH_SIZE)))),
      ),
    ).toBe(true);
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
  const ignore = () => undefined;

  it('takes batches sequenced in arrival order and chained across batches', async () => {
    const pool = open(5);
    pool.reset(tipOf(RightEdge.empty()));
    const requests = Array.from({ length: 12 }, (_, i) => req(i, i % 2 ? `b${i}` : undefined));
    requests.forEach((r) => pool.add(r, ignore, 0));
    const first = await pool.take(5);
    expect(places(first).map((p) => p.seq)).toEqual([0, 1, 2, 3, 4]);
    let edge = appendBoth(RightEdge.empty(), first);
    const rest = await pool.take(100);
    expect(places(rest).map((p) => p.entry.digest)).toEqual(requests.slice(5).map((r) => r.digest));
    expect(places(rest).map((p) => p.seq)).toEqual([5, 6, 7, 8, 9, 10, 11]);
    edge = appendBoth(edge, rest);
    expect(edge.size).toBe(12);
    expect(pool.length).toBe(0);
    expect(await pool.take(10)).toEqual([]);
  });

  it('requests arriving turn by turn while a run is in the worker travel together, in order', async () => {
    const pool = open(65_536);
    pool.reset(tipOf(RightEdge.empty()));
    const sentBefore = pool.runsSent;
    const requests = Array.from({ length: 2_000 }, (_, i) => req(i));
    // Two per turn of the event loop, as an HTTP server hands them over under load.
    for (let i = 0; i < requests.length; i++) {
      pool.add(requests[i]!, ignore, 0);
      if (i % 2 === 1) await new Promise((r) => setImmediate(r));
    }
    const batch = await pool.take(requests.length);
    expect(places(batch).map((p) => p.entry.digest)).toEqual(requests.map((r) => r.digest));
    expect(places(batch).map((p) => p.seq)).toEqual(requests.map((_, i) => i));
    // One message per turn would be 1,000; a run's round trip spans many turns.
    expect(pool.runsSent - sentBefore).toBeLessThan(250);
  });

  it('batches that cut across runs of the worker pack and chain like one append', async () => {
    const pool = open(3_000);
    pool.reset(tipOf(RightEdge.empty()));
    const n = 10_000;
    for (let i = 0; i < n; i++) pool.add(req(i, i % 3 ? `r/${i}` : undefined), ignore, i);
    expect(pool.oldestEnqueued).toBe(0);
    let edge = RightEdge.empty();
    let seq = 0;
    for (const size of [5_000, 1, 4_095, 904]) {
      const batch = await pool.take(size);
      expect(places(batch).map((p) => p.seq)).toEqual(Array.from({ length: size }, (_, k) => seq + k));
      edge = appendBoth(edge, batch);
      seq += size;
      expect(pool.oldestEnqueued).toBe(seq < n ? seq : undefined);
    }
    expect(edge.size).toBe(n);
  });

  it('refuses an entry too large for a bundle alone and keeps the others in order', async () => {
    const pool = open(10);
    pool.reset({ size: 0, lastEntryHash: ZERO_HASH, floorMs: 0 });
    const refused: Error[] = [];
    const settle = (v: number | PromiseLike<number>) => void Promise.resolve(v).catch((e: Error) => refused.push(e));
    const big = { ...req(2), artifact: '€'.repeat(21_800) };
    [req(1), big, req(3), req(5)].forEach((r) => pool.add(r, settle, 0));
    const batch = await pool.take(10);
    await new Promise((r) => setImmediate(r));
    expect(refused.map((e) => [e.name, e.message])).toEqual([['RangeError', 'canonical entry exceeds 65,535 bytes']]);
    expect(places(batch).map((p) => [p.entry.digest, p.seq])).toEqual([
      [digest(1), 0],
      [digest(3), 1],
      [digest(5), 2],
    ]);
    expect(pool.length).toBe(0);
    appendBoth(RightEdge.empty(), batch);
  });

  it('a batch put back is sequenced again from the reloaded edge, ahead of later arrivals', async () => {
    const pool = open(10, () => 5_000);
    pool.reset(tipOf(RightEdge.empty()));
    [1, 2, 3].forEach((i) => pool.add(req(i), ignore, 0));
    const batch = await pool.take(2);
    expect(places(batch).map((p) => p.seq)).toEqual([0, 1]);
    // Storage turned out to hold one more leaf (and a later checkpoint time) than we had.
    const edge = RightEdge.empty().append([canonicalEntryBytes(buildEntry(req(0), 'x'))]).edge;
    pool.putBack(batch, tipOf(edge, 9_000));
    const again = await pool.take(3);
    expect(places(again).map((p) => p.entry.digest)).toEqual([digest(1), digest(2), digest(3)]);
    expect(places(again).map((p) => p.seq)).toEqual([1, 2, 3]);
    expect(places(again)[0]!.entry.timestamp).toBe(new Date(9_000).toISOString());
    appendBoth(edge, again);
    // A batch sequenced from another edge is refused by the edge itself.
    pool.putBack(again, tipOf(edge, 9_000));
    const stale = batchEntries(await pool.take(3));
    expect(() => RightEdge.empty().appendHashed(stale)).toThrow(/not chained/);
  });

  it('after close, taking fails', async () => {
    const pool = open(10);
    pool.reset(tipOf(RightEdge.empty()));
    pool.add(req(1), ignore, 0);
    await pool.close();
    await expect(pool.take(1)).rejects.toThrow(/closed/);
  });
});
