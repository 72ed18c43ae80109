// The sequencer end to end on the local store: a 70,000+ leaf tree checked against a naive
// RFC 6962 root, append-only checkpoints (consistency proofs from tiles between every pair
// of a sample), receipts, restart, strictly increasing timestamps, two sequencers racing on
// one directory, tampered right-edge tiles, and crashes between the lock swap and the tile
// writes (simulated with store wrappers).
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { bytesEqual, leafHash, toHex } from '../../src/core/hash.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { verifyConsistency, verifyInclusion } from '../../src/core/merkle.js';
import { SeedSigner } from '../../src/core/note.js';
import { LogReader } from '../../src/read/reader.js';
import {
  type AnchorReceipt,
  LogStateError,
  type PublishedCheckpoint,
  SequencerStoppedError,
} from '../../src/sequencer/contract.js';
import { Sequencer } from '../../src/sequencer/sequencer.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { DEFAULT_INLINE_LIMIT, type LockState, type SequencerLock, StoreLock } from '../../src/store/lock.js';
import type { CreateOptions, ObjectStore, StoredObject, VersionedObject } from '../../src/store/store.js';
import { auditLogDir, tileFile, verifyCheckpointNote, writeTestKey } from '../helpers/audit.js';
import { naiveLeafHash } from '../helpers/naive.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'test.example/sequencer';
const dirs: string[] = [];

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'stele-seq-'));
  dirs.push(d);
  await writeTestKey(d, ORIGIN);
  return d;
}

afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

const digestOf = (salt: string, i: number): string => createHash('sha256').update(`${salt}/${i}`).digest('hex');

/** Varied requests: some with artifact and scope, some bare. */
function request(salt: string, i: number) {
  const labels = i % 3 === 0 ? { artifact: `build-${i}.tar.gz`, scope: i % 2 === 0 ? 'ci' : undefined } : {};
  return anchorRequest('ledger_anchor', 'Anchored', digestOf(salt, i), labels);
}

const hex = (b: Uint8Array): string => toHex(b);
const recordDigest = (record: Uint8Array): string =>
  (JSON.parse(Buffer.from(record).toString('utf8')) as { digest: string }).digest;

describe('sequencer on the local store: a 70,000+ leaf log', () => {
  // Cumulative sizes each wave ends at: tile boundaries at every level, including the
  // level-2 boundary 65,536 = 256², and waves larger than maxBatch (split by the sequencer).
  const TARGETS = [
    1, 2, 3, 255, 256, 257, 511, 512, 513, 4096, 9096, 20_000, 40_000, 65_535, 65_536, 65_537, 65_792, 70_000, 70_001,
    70_312,
  ];
  const N = TARGETS[TARGETS.length - 1]!;
  const MORE = 300; // after the restart: 70,612 = 275 full bundles + 212, level-1 width 19, level-2 width 1
  let dataDir: string;
  let publicKey: Uint8Array;
  const published: PublishedCheckpoint[] = [];
  const receipts: AnchorReceipt[] = [];

  it('builds the tree from batches; receipts, root and tiles match a naive RFC 6962 recomputation', async () => {
    dataDir = await tempDir();
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, maxBatch: 5000, batchInterval: 50 });
    publicKey = log.signer.publicKey;
    const requests = Array.from({ length: N }, (_, i) => request('main', i));
    expect(log.sequencer.checkpoint.size).toBe(0);
    log.sequencer.onPublished((c) => published.push(c));

    let next = 0;
    for (const target of TARGETS) {
      const wave: Promise<AnchorReceipt>[] = [];
      for (; next < target; next++) wave.push(log.sequencer.submit(requests[next]!));
      receipts.push(...(await Promise.all(wave)));
      expect(log.sequencer.checkpoint.size).toBe(target);
    }
    await log.sequencer.close();

    // FIFO: the i-th request submitted is leaf i, with the entry the sequencer built from it.
    expect(receipts).toHaveLength(N);
    receipts.forEach((r, i) => {
      if (r.seq !== i || r.entry.digest !== digestOf('main', i))
        throw new Error(`receipt ${i} has seq ${r.seq} digest ${r.entry.digest}`);
    });
    // Every wave's end is a published size; waves above 5,000 went out in batches of at most 5,000.
    const sizes = published.map((c) => c.size);
    for (const t of TARGETS) expect(sizes).toContain(t);
    expect(Math.max(...sizes.map((s, i) => s - (sizes[i - 1] ?? 0)))).toBe(5000);

    // Independent audit: chain from records, naive root, every hash tile.
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, publicKey);
    expect(audit.checkpoint.size).toBe(N);
    expect(audit.tilesChecked).toBe(Math.ceil(N / 256) + Math.ceil(Math.floor(N / 256) / 256) + 1);
    receipts.forEach((r, i) => {
      if (!bytesEqual(r.entryHash, audit.entryHashes[i]!))
        throw new Error(`receipt ${i} entry hash differs from the recomputed chain`);
    });
    for (const c of published) {
      if (!bytesEqual(c.root, audit.tree.root(c.size)))
        throw new Error(`published root at size ${c.size} differs from the naive root`);
      const parsed = verifyCheckpointNote(c.note, ORIGIN, publicKey);
      expect(parsed.size).toBe(c.size);
      expect(hex(parsed.root)).toBe(hex(c.root));
    }
  });

  it('every receipt carries an inclusion proof that verifies against its checkpoint', () => {
    let checked = 0;
    for (const r of receipts) {
      const proof = r.inclusionProof();
      if (!verifyInclusion(r.seq, r.checkpoint.size, leafHash(r.entryHash), proof, r.checkpoint.root)) {
        throw new Error(`inclusion proof of ${r.seq} in ${r.checkpoint.size} does not verify`);
      }
      checked++;
    }
    expect(checked).toBe(N);
    // The checkpoint in a receipt is the first one that includes the entry.
    for (const r of receipts) {
      const first = published.find((c) => c.size > r.seq)!;
      if (first.size !== r.checkpoint.size)
        throw new Error(`receipt ${r.seq} names size ${r.checkpoint.size}, first covering is ${first.size}`);
    }
    // A proof must not verify for a neighbouring leaf or a wrong root.
    const r = receipts[12_345]!;
    expect(
      verifyInclusion(
        r.seq,
        r.checkpoint.size,
        leafHash(receipts[12_346]!.entryHash),
        r.inclusionProof(),
        r.checkpoint.root,
      ),
    ).toBe(false);
    expect(
      verifyInclusion(r.seq, r.checkpoint.size, leafHash(r.entryHash), r.inclusionProof(), published[0]!.root),
    ).toBe(false);
  });

  it('published checkpoints: strictly increasing sizes and timestamps, entries timestamped no later', () => {
    for (let i = 1; i < published.length; i++) {
      expect(published[i]!.size).toBeGreaterThan(published[i - 1]!.size);
      expect(Date.parse(published[i]!.timestamp)).toBeGreaterThan(Date.parse(published[i - 1]!.timestamp));
    }
    for (let i = 1; i < receipts.length; i++) {
      if (receipts[i]!.entry.timestamp < receipts[i - 1]!.entry.timestamp)
        throw new Error(`entry timestamps decrease at ${i}`);
    }
    for (const r of receipts) {
      if (Date.parse(r.entry.timestamp) > Date.parse(r.checkpoint.timestamp))
        throw new Error(`entry ${r.seq} is newer than its checkpoint`);
    }
  });

  it('every published checkpoint is consistent with every earlier one (proofs read from tiles)', async () => {
    const reader = new LogReader(new FsObjectStore(path.join(dataDir, 'log')), { unverified: true });
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, publicKey);
    const check = async (a: PublishedCheckpoint, b: PublishedCheckpoint) => {
      const proof = await reader.consistencyProof(a.size, b.size);
      if (!verifyConsistency(a.size, b.size, proof, a.root, b.root))
        throw new Error(`${a.size} → ${b.size} does not verify`);
      // Byte for byte what the naive RFC 6962 PROOF gives.
      if (a.size < b.size) expect(proof.map(hex)).toEqual(audit.tree.proof(a.size, b.size).map(hex));
    };
    // Every consecutive pair.
    for (let i = 1; i < published.length; i++) await check(published[i - 1]!, published[i]!);
    // Every pair of a sample spread over the history (boundary sizes included).
    const sample = published.filter((c, i) => i % 3 === 0 || TARGETS.includes(c.size) || i === published.length - 1);
    let pairs = 0;
    for (let i = 0; i < sample.length; i++) {
      for (let j = i + 1; j < sample.length; j++) {
        await check(sample[i]!, sample[j]!);
        pairs++;
      }
    }
    expect(pairs).toBeGreaterThan(200);
    // And the check can fail: a proof against another root is refused.
    const a = published[5]!;
    const b = published[published.length - 1]!;
    const proof = await reader.consistencyProof(a.size, b.size);
    expect(verifyConsistency(a.size, b.size, proof, published[6]!.root, b.root)).toBe(false);
    expect(verifyConsistency(a.size, b.size, proof, a.root, published[published.length - 2]!.root)).toBe(false);
  });

  it('a restart on the same directory resumes the chain and keeps timestamps increasing', async () => {
    const last = published[published.length - 1]!;
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, maxBatch: 5000, batchInterval: 5 });
    expect(log.sequencer.checkpoint.size).toBe(N);
    expect(log.sequencer.checkpoint.note).toBe(last.note);
    expect(log.sequencer.checkpoint.timestamp).toBe(last.timestamp);
    const after: PublishedCheckpoint[] = [];
    log.sequencer.onPublished((c) => after.push(c));
    const more: AnchorReceipt[] = [];
    // Two waves: across the bundle boundary 70,400 and then to 70,612.
    for (const [from, to] of [
      [N, 70_401],
      [70_401, N + MORE],
    ] as const) {
      const wave: Promise<AnchorReceipt>[] = [];
      for (let i = from; i < to; i++) wave.push(log.sequencer.submit(request('main', i)));
      more.push(...(await Promise.all(wave)));
    }
    await log.sequencer.close();
    expect(more.map((r) => r.seq)).toEqual(Array.from({ length: MORE }, (_, i) => N + i));
    expect(after.map((c) => c.size)).toEqual([70_401, N + MORE]);
    expect(Date.parse(after[0]!.timestamp)).toBeGreaterThan(Date.parse(last.timestamp));
    expect(Date.parse(after[1]!.timestamp)).toBeGreaterThan(Date.parse(after[0]!.timestamp));

    // The whole chain, recomputed from the record bundles from seq 0, runs through the restart.
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, publicKey);
    expect(audit.checkpoint.size).toBe(N + MORE);
    expect(hex(audit.entryHashes[N - 1]!)).toBe(hex(receipts[N - 1]!.entryHash));
    more.forEach((r, i) => {
      expect(hex(audit.entryHashes[N + i]!)).toBe(hex(r.entryHash));
      expect(recordDigest(audit.records[N + i]!)).toBe(digestOf('main', N + i));
    });
    expect(hex(audit.tree.root(N))).toBe(hex(last.root));
    const reader = new LogReader(new FsObjectStore(path.join(dataDir, 'log')), { unverified: true });
    for (const c of [published[0]!, published[10]!, last, after[0]!]) {
      expect(
        verifyConsistency(c.size, N + MORE, await reader.consistencyProof(c.size, N + MORE), c.root, after[1]!.root),
      ).toBe(true);
    }
    published.push(...after);
  });

  it('a flipped byte in any right-edge tile or bundle makes the reopen fail: a LogStateError naming fsck', async () => {
    const size = N + MORE; // 70,612
    const logDir = path.join(dataDir, 'log');
    const targets: [file: string, offset: number][] = [
      [tileFile(0, 275, 212), 100], // level-0 partial hash tile
      [tileFile(1, 1, 19), 40], // level-1 partial
      [tileFile(2, 0, 1), 31], // level-2 partial (one hash)
      [tileFile('entries', 275, 212), 2 + 34 * 7 + 5], // inside entry hash 7
      [tileFile('records', 275, 212), 12], // inside the first record's JSON
    ];
    expect(Math.floor(size / 256)).toBe(275);
    for (const [file, offset] of targets) {
      const full = path.join(logDir, file);
      const original = await readFile(full);
      const tampered = readContent(full); // a record bundle's JSON, not its gzip stream
      tampered[offset]! ^= 0x01;
      writeContent(full, tampered);
      try {
        // Refused as a state for the operator (exit 4), saying what failed and to run fsck.
        const refused = openLocalLog({ dataDir, origin: ORIGIN, fsync: false });
        await expect(refused, file).rejects.toBeInstanceOf(LogStateError);
        await expect(refused, file).rejects.toThrow(/: the log's storage does not hold the tree .*stele log fsck/);
      } finally {
        await writeFile(full, original);
      }
    }
    // With the bytes restored the log opens again at the same checkpoint.
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false });
    expect(log.sequencer.checkpoint.size).toBe(size);
    expect(hex(log.sequencer.checkpoint.root)).toBe(hex(published[published.length - 1]!.root));
    await log.sequencer.close();
  });
});

describe('two sequencers on one data directory', () => {
  it('racing from the same size: exactly one publishes, the other stops with SequencerStoppedError, no fork', async () => {
    const dataDir = await tempDir();
    const a = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 10 });
    await a.sequencer.submit(request('seed', 0)); // a non-empty starting point
    const b = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 10 });
    expect(b.sequencer.checkpoint.size).toBe(1);

    const pubs: { by: 'a' | 'b'; c: PublishedCheckpoint }[] = [];
    a.sequencer.onPublished((c) => pubs.push({ by: 'a', c }));
    b.sequencer.onPublished((c) => pubs.push({ by: 'b', c }));

    const results: { a: PromiseSettledResult<AnchorReceipt>[]; b: PromiseSettledResult<AnchorReceipt>[] } = {
      a: [],
      b: [],
    };
    for (let round = 0; round < 5; round++) {
      const pa: Promise<AnchorReceipt>[] = [];
      const pb: Promise<AnchorReceipt>[] = [];
      for (let i = 0; i < 40; i++) {
        pa.push(a.sequencer.submit(request('a', round * 40 + i)));
        pb.push(b.sequencer.submit(request('b', round * 40 + i)));
      }
      const [ra, rb] = await Promise.all([Promise.allSettled(pa), Promise.allSettled(pb)]);
      results.a.push(...ra);
      results.b.push(...rb);
    }
    const okA = results.a.filter((r) => r.status === 'fulfilled').length;
    const okB = results.b.filter((r) => r.status === 'fulfilled').length;
    // Exactly one wins everything; the other had every request rejected with SequencerStoppedError.
    expect([okA, okB].sort((x, y) => x - y)).toEqual([0, 200]);
    const aWon = okA > 0;
    const [winner, loser] = aWon ? [a, b] : [b, a];
    const loserResults = aWon ? results.b : results.a;
    const [winnerSalt, loserSalt] = aWon ? ['a', 'b'] : ['b', 'a'];
    for (const r of loserResults) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(SequencerStoppedError);
    }
    expect(loser.sequencer.failure).toBeInstanceOf(SequencerStoppedError);
    await expect(loser.sequencer.submit(request('late', 0))).rejects.toBeInstanceOf(SequencerStoppedError);

    // Each size was published once, by the winner only.
    expect(pubs.every((p) => p.by === (aWon ? 'a' : 'b'))).toBe(true);
    const sizes = pubs.map((p) => p.c.size);
    expect(new Set(sizes).size).toBe(sizes.length);
    await winner.sequencer.close();
    await loser.sequencer.close();

    // One history, verified from the tiles: the winner's entries, in order, and nothing of the loser's.
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, a.signer.publicKey);
    expect(audit.checkpoint.size).toBe(201);
    expect(hex(audit.checkpoint.root)).toBe(hex(winner.sequencer.checkpoint.root));
    const digests = audit.records.map(recordDigest);
    expect(digests[0]).toBe(digestOf('seed', 0));
    expect(digests.slice(1)).toEqual(Array.from({ length: 200 }, (_, i) => digestOf(winnerSalt, i)));
    expect(digests.some((d) => d === digestOf(loserSalt, 0))).toBe(false);
    for (const p of pubs) expect(hex(audit.tree.root(p.c.size))).toBe(hex(p.c.root));
    const lock = JSON.parse(await readFile(path.join(dataDir, 'private', 'lock.json'), 'utf8')) as LockState;
    expect(lock.size).toBe(201);
    expect(lock.root).toBe(hex(audit.checkpoint.root));
  });

  it('a stale sequencer whose log moved on stops at its next publish; the newer one carries on', async () => {
    const dataDir = await tempDir();
    const a = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => a.sequencer.submit(request('a1', i))));
    const b = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => b.sequencer.submit(request('b1', i))));
    expect(b.sequencer.checkpoint.size).toBe(20);

    const stale = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => a.sequencer.submit(request('a2', i))));
    for (const r of stale) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(SequencerStoppedError);
    }
    expect(a.sequencer.checkpoint.size).toBe(10);
    await Promise.all(Array.from({ length: 7 }, (_, i) => b.sequencer.submit(request('b2', i))));
    await b.sequencer.close();
    await a.sequencer.close();

    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, a.signer.publicKey);
    expect(audit.checkpoint.size).toBe(27);
    expect(audit.records.map(recordDigest)).toEqual([
      ...Array.from({ length: 10 }, (_, i) => digestOf('a1', i)),
      ...Array.from({ length: 10 }, (_, i) => digestOf('b1', i)),
      ...Array.from({ length: 7 }, (_, i) => digestOf('b2', i)),
    ]);
  });
});

// ---------------------------------------------------------------------------------------
// Crashes between the lock swap (the commit point) and the tile writes.
// ---------------------------------------------------------------------------------------

type CreateHook = (objects: readonly StoredObject[], inner: ObjectStore) => Promise<void> | null;

/** Delegates to a real store; `hook` may take over one createAll (returning null passes through). */
class FaultyStore implements ObjectStore {
  hook: CreateHook | undefined;
  /** May take over persist() (returning null passes through). */
  persistHook: ((keys: readonly string[]) => Promise<void> | null) | undefined;
  constructor(private readonly inner: ObjectStore) {}
  get stats() {
    return this.inner.stats;
  }
  get(key: string): Promise<Uint8Array | null> {
    return this.inner.get(key);
  }
  getVersioned(key: string): Promise<VersionedObject | null> {
    return this.inner.getVersioned(key);
  }
  createAll(objects: readonly StoredObject[], options?: CreateOptions): Promise<void> {
    const taken = this.hook?.(objects, this.inner);
    return taken ?? this.inner.createAll(objects, options);
  }
  persist(keys: readonly string[]): Promise<void> {
    return this.persistHook?.(keys) ?? this.inner.persist(keys);
  }
  swap(key: string, data: Uint8Array, expected: string | null): Promise<string> {
    return this.inner.swap(key, data, expected);
  }
  delete(key: string): Promise<void> {
    return this.inner.delete(key);
  }
  list(prefix: string): AsyncIterable<string> {
    return this.inner.list(prefix);
  }
}

/** A lock that records every state it installs; `beforeSwap` may take over a swap. */
class WatchedLock implements SequencerLock {
  readonly installed: LockState[] = [];
  beforeSwap: ((next: LockState) => Promise<string> | null) | undefined;
  constructor(private readonly inner: SequencerLock) {}
  get inlineLimit() {
    return this.inner.inlineLimit;
  }
  read() {
    return this.inner.read();
  }
  async swap(expected: string | null, next: LockState): Promise<string> {
    const taken = this.beforeSwap?.(next);
    if (taken) return taken;
    const v = await this.inner.swap(expected, next);
    this.installed.push(next);
    return v;
  }
}

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/** How the crash tests' sequencers stage a batch: 0, always as a staging object; else inline in the lock record up to this many characters. */
let inlineLimit = 0;

async function openFaulty(dataDir: string) {
  const signer = new SeedSigner(ORIGIN, new Uint8Array(32).fill(7));
  const publicStore = new FsObjectStore(path.join(dataDir, 'log'), { fsync: false });
  const privateStore = new FsObjectStore(path.join(dataDir, 'private'), { fsync: false });
  const store = new FaultyStore(publicStore);
  const lock = new WatchedLock(new StoreLock(privateStore, 'lock.json', inlineLimit));
  const sequencer = await Sequencer.open({
    origin: ORIGIN,
    signer,
    store,
    staging: privateStore,
    lock,
    batchInterval: 5,
    maxBatch: 1000,
  });
  return { sequencer, store, lock, signer, publicStore, privateStore };
}

const publicSize = async (dataDir: string): Promise<number> =>
  Number((await readFile(path.join(dataDir, 'log', 'checkpoint'), 'utf8')).split('\n')[1]);

/** The staging objects on disk (none if the directory was never made). */
const stagingObjects = (dataDir: string): Promise<string[]> =>
  readdir(path.join(dataDir, 'private', 'staging')).catch(() => []);

describe.each([
  ['as a staging object', 0],
  ['inline in the lock record', DEFAULT_INLINE_LIMIT],
])('crash between the lock swap and the tile writes, the batch staged %s', (_, limit) => {
  beforeAll(() => {
    inlineLimit = limit;
  });

  it('a failed tile write after the commit is re-applied from staging and every entry is acknowledged', async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    const sizes: number[] = [];
    s.sequencer.onPublished((c) => sizes.push(c.size));
    const first = await Promise.all(Array.from({ length: 300 }, (_, i) => s.sequencer.submit(request('c1', i))));

    let failures = 0;
    let lockAtFailure: LockState | undefined;
    let publicAtFailure = -1;
    s.store.hook = (objects, inner) => {
      s.store.hook = undefined; // once
      failures++;
      return (async () => {
        lockAtFailure = (await s.lock.read())?.state;
        publicAtFailure = await publicSize(dataDir);
        await inner.createAll(objects.slice(0, Math.floor(objects.length / 2))); // half written, then the crash
        throw new Error('simulated crash after the lock swap');
      })();
    };
    const second = await Promise.all(Array.from({ length: 700 }, (_, i) => s.sequencer.submit(request('c2', i))));
    expect(failures).toBe(1);
    // The failure really came after the commit point: the lock already named size 1,000 and
    // the staged batch, while the public checkpoint still said 300.
    expect(lockAtFailure?.size).toBe(1000);
    expect(lockAtFailure?.staged?.fromSize).toBe(300);
    expect(lockAtFailure?.staged?.records !== undefined).toBe(inlineLimit > 0);
    expect(publicAtFailure).toBe(300);

    expect(second.map((r) => r.seq)).toEqual(Array.from({ length: 700 }, (_, i) => 300 + i));
    expect(sizes).toEqual([300, 1000]);
    await s.sequencer.close();

    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, s.signer.publicKey);
    expect(audit.checkpoint.size).toBe(1000);
    for (const r of [...first, ...second]) {
      expect(hex(audit.entryHashes[r.seq]!)).toBe(hex(r.entryHash));
      expect(
        verifyInclusion(
          r.seq,
          r.checkpoint.size,
          naiveLeafHash(r.entryHash),
          r.inclusionProof(),
          audit.tree.root(r.checkpoint.size),
        ),
      ).toBe(true);
    }
    expect(await stagingObjects(dataDir)).toEqual([]);
  });

  it('a sequencer that dies after the commit: the next one re-applies the staged batch before anything else', async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    await Promise.all(Array.from({ length: 200 }, (_, i) => s.sequencer.submit(request('d1', i))));
    let acked = 0;
    s.store.hook = (objects, inner) => {
      s.store.hook = undefined;
      // Write a third of the batch's objects, then never return: the process is gone.
      return inner.createAll(objects.slice(0, Math.floor(objects.length / 3))).then(() => never<void>());
    };
    const stuck = Array.from({ length: 400 }, (_, i) =>
      s.sequencer.submit(request('d2', i)).then((r) => {
        acked++;
        return r;
      }),
    );
    // Wait until the lock has the batch (the commit) and the tile writes have hung.
    for (let i = 0; i < 200 && s.lock.installed.length < 2 + 1; i++) await new Promise((r) => setTimeout(r, 10));
    expect(s.lock.installed.map((l) => l.size)).toEqual([0, 200, 600]);
    expect(await publicSize(dataDir)).toBe(200);

    const next = await openFaulty(dataDir);
    expect(next.sequencer.checkpoint.size).toBe(600);
    expect(await publicSize(dataDir)).toBe(600);
    expect(acked).toBe(0); // the dead sequencer acknowledged nothing
    const later = await Promise.all(Array.from({ length: 100 }, (_, i) => next.sequencer.submit(request('d3', i))));
    expect(later[0]!.seq).toBe(600);
    await next.sequencer.close();
    void stuck;

    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, next.signer.publicKey);
    expect(audit.checkpoint.size).toBe(700);
    expect(audit.records.map(recordDigest)).toEqual([
      ...Array.from({ length: 200 }, (_, i) => digestOf('d1', i)),
      ...Array.from({ length: 400 }, (_, i) => digestOf('d2', i)),
      ...Array.from({ length: 100 }, (_, i) => digestOf('d3', i)),
    ]);
  });

  it('a power loss after the acknowledgement, before the write-behind fsyncs: torn tiles are repaired from the staged batch', async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    await Promise.all(Array.from({ length: 300 }, (_, i) => s.sequencer.submit(request('w1', i))));
    // The power goes before this batch's fsyncs: persist() never returns.
    let written: string[] = [];
    s.store.hook = (objects) => {
      written = objects.map((o) => o.key);
      return null;
    };
    s.store.persistHook = () => never<void>();
    const acked = await Promise.all(Array.from({ length: 500 }, (_, i) => s.sequencer.submit(request('w2', i))));
    expect(acked.at(-1)!.checkpoint.size).toBe(800);
    // The batch's records are durable in a staging object, or in the lock record itself.
    expect(await stagingObjects(dataDir)).toHaveLength(inlineLimit > 0 ? 0 : 1);
    expect(s.lock.installed.at(-1)!.staged).toMatchObject({ fromSize: 300 });
    expect(s.lock.installed.at(-1)!.staged!.records !== undefined).toBe(inlineLimit > 0);

    // What the disk kept of the unsynced files: one missing, one empty, one cut short, one zeroed.
    const tiles = written.filter((k) => k.startsWith('tile/0/') || k.startsWith('tile/entries/'));
    expect(tiles.length).toBeGreaterThanOrEqual(4);
    const files = tiles.map((k) => path.join(dataDir, 'log', k));
    await rm(files[0]!);
    await writeFile(files[1]!, '');
    await writeFile(files[2]!, (await readFile(files[2]!)).subarray(0, 40));
    await writeFile(files[3]!, Buffer.alloc((await readFile(files[3]!)).length));

    const next = await openFaulty(dataDir);
    expect(next.sequencer.checkpoint.size).toBe(800);
    expect(await stagingObjects(dataDir)).toEqual([]);
    await next.sequencer.submit(request('w3', 0));
    await next.sequencer.close();
    // A clean close leaves nothing staged: the next start re-applies nothing.
    expect(next.lock.installed.at(-1)!.staged).toBeUndefined();
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, next.signer.publicKey);
    expect(audit.checkpoint.size).toBe(801);
    for (const r of acked) expect(hex(audit.entryHashes[r.seq]!)).toBe(hex(r.entryHash));
  });

  it("onCommitted hears each entry's final place after the lock swap, before its receipt; never for a batch that did not commit", async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    let failNext = true;
    s.lock.beforeSwap = () => {
      if (!failNext) return null;
      failNext = false;
      return Promise.reject(new Error('lock store unavailable'));
    };
    const heard: { seq: number; hash: string; lockSize: number }[] = [];
    const receipts = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        s.sequencer.submit(request('c1', i), (seq, hash) =>
          heard.push({ seq, hash: hex(hash), lockSize: s.lock.installed.at(-1)!.size }),
        ),
      ),
    );
    await s.sequencer.close();
    // The first attempt failed before the commit: nothing was heard from it; the retry was.
    expect(heard.map((h) => h.seq)).toEqual(receipts.map((r) => r.seq));
    expect(heard.map((h) => h.hash)).toEqual(receipts.map((r) => hex(r.entryHash)));
    expect(heard.every((h) => h.lockSize === 30)).toBe(true);
  });

  it('a public checkpoint that came back at an older version (it is swapped without fsync) is republished from the lock on open', async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    await Promise.all(Array.from({ length: 50 }, (_, i) => s.sequencer.submit(request('p1', i))));
    const old = await Promise.all(['checkpoint', 'checkpoint.json'].map((f) => readFile(path.join(dataDir, 'log', f))));
    await Promise.all(Array.from({ length: 70 }, (_, i) => s.sequencer.submit(request('p2', i))));
    await s.sequencer.close();
    // A power loss undid the last two swaps: the lock (synced) says 120, the public files 50.
    await Promise.all(
      ['checkpoint', 'checkpoint.json'].map((f, i) => writeFile(path.join(dataDir, 'log', f), old[i]!)),
    );
    expect(await publicSize(dataDir)).toBe(50);

    const next = await openFaulty(dataDir);
    expect(next.sequencer.checkpoint.size).toBe(120);
    expect(await publicSize(dataDir)).toBe(120);
    expect((await next.sequencer.submit(request('p3', 0))).seq).toBe(120);
    await next.sequencer.close();
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, next.signer.publicKey);
    expect(audit.checkpoint.size).toBe(121);
  });

  it('a sequencer that dies after staging but before the lock swap leaves no trace in the log', async () => {
    const dataDir = await tempDir();
    const s = await openFaulty(dataDir);
    await Promise.all(Array.from({ length: 50 }, (_, i) => s.sequencer.submit(request('e1', i))));
    let staged = false;
    s.lock.beforeSwap = () => {
      staged = true;
      return never<string>();
    };
    void s.sequencer.submit(request('e2', 0));
    for (let i = 0; i < 200 && !staged; i++) await new Promise((r) => setTimeout(r, 10));
    expect(staged).toBe(true);
    // The orphaned staging object, unless the batch was small enough to ride in the lock record.
    expect(await stagingObjects(dataDir)).toHaveLength(inlineLimit > 0 ? 0 : 1);

    const next = await openFaulty(dataDir);
    expect(next.sequencer.checkpoint.size).toBe(50);
    const r = await next.sequencer.submit(request('e3', 0));
    expect(r.seq).toBe(50);
    await next.sequencer.close();
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, next.signer.publicKey);
    expect(audit.checkpoint.size).toBe(51);
    expect(recordDigest(audit.records[50]!)).toBe(digestOf('e3', 0));
  });
});
