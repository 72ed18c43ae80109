// DynamoLock and DynamoIndex against a real DynamoDB-protocol server on loopback
// (dynalite), and two sequencers racing on one lock table over one shared S3 store
// (s3rver, which does not enforce conditional PUTs: the DynamoDB lock alone must keep
// the log from forking).
import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { DynamoIndex } from '../../src/aws/dynamo-index.js';
import { IndexGapError } from '../../src/index/types.js';
import { DynamoLock } from '../../src/aws/dynamo-lock.js';
import { S3ObjectStore } from '../../src/store/s3.js';
import { openCheckpoint } from '../../src/core/checkpoint.js';
import { type CanonicalEntry, artifactId } from '../../src/core/entry.js';
import { anchorIdentity } from '../../src/core/duplicates.js';
import { bytesEqual, leafHash, toHex } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { SIG_ED25519, SeedSigner, makeVerifier } from '../../src/core/note.js';
import { LogReader } from '../../src/read/reader.js';
import {
  type AnchorReceipt,
  type IntegratedBatch,
  SequencerStoppedError,
  batchOfEntries,
} from '../../src/sequencer/contract.js';
import { Sequencer } from '../../src/sequencer/sequencer.js';
import { CHECKPOINT_KEY } from '../../src/store/layout.js';
import type { LockState } from '../../src/store/lock.js';
import { VersionConflictError } from '../../src/store/store.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { type S3Server, startS3Server } from '../helpers/s3-server.js';
import { firstCandidate } from '../helpers/index-rows.js';
import { billedBytes, indexItems } from '../helpers/dynamo-items.js';

let ddb: DynamoServer;
let s3: S3Server;

beforeAll(async () => {
  [ddb, s3] = await Promise.all([startDynamoServer(), startS3Server()]);
});
afterAll(async () => {
  await Promise.all([ddb?.close(), s3?.close()]);
});

const conn = () => ({ endpoint: ddb.endpoint, region: ddb.region, credentials: ddb.credentials });
const uniq = () => randomBytes(4).toString('hex');
const digest = (i: number) => toHex(new Uint8Array(32).fill(i & 0xff)).slice(0, 56) + i.toString(16).padStart(8, '0');

function state(size: number, note = `note ${size}`): LockState {
  return { size, root: 'ab'.repeat(32), timestamp: new Date(1_700_000_000_000 + size).toISOString(), note };
}

/**
 * TEST BOUNDARY — a DynamoDB HTTP handler that sends each PutItem twice and returns the
 * second answer: what a lost response followed by an SDK retry looks like to the caller.
 */
function duplicatingPutItems(): { requestHandler: unknown } {
  const inner = new DynamoDBClient({ ...conn() }).config.requestHandler as unknown as {
    handle(
      req: { headers: Record<string, string> },
      o?: unknown,
    ): Promise<{ response: { body?: { resume?(): void } } }>;
  };
  return {
    requestHandler: {
      async handle(req: { headers: Record<string, string> }, o?: unknown) {
        const target = Object.entries(req.headers).find(([k]) => k.toLowerCase() === 'x-amz-target')?.[1] ?? '';
        if (target.endsWith('.PutItem')) {
          const first = await inner.handle(req, o);
          first.response.body?.resume?.();
        }
        return inner.handle(req, o);
      },
      updateHttpClientConfig() {},
      httpHandlerConfigs: () => ({}),
    },
  };
}

describe('DynamoLock (dynalite)', () => {
  it('creates once, then swaps only from the version it read', async () => {
    const lock = new DynamoLock({ ...conn(), table: ddb.table, log: `lock-${uniq()}` });
    expect(await lock.read()).toBeNull();
    const v0 = await lock.swap(null, state(0));
    await expect(lock.swap(null, state(0, 'other'))).rejects.toBeInstanceOf(VersionConflictError);
    const v1 = await lock.swap(v0, state(5));
    await expect(lock.swap(v0, state(7))).rejects.toBeInstanceOf(VersionConflictError);
    const read = await lock.read();
    expect(read).toEqual({ state: state(5), version: v1 });
    expect(lock.stats.conditionFailures).toBe(2);
  });

  it('a swap whose response was lost and retried (condition now fails) is recognised as ours by its version', async () => {
    const log = `lock-${uniq()}`;
    const lock = new DynamoLock({ ...conn(), table: ddb.table, log, clientConfig: duplicatingPutItems() as never });
    const v0 = await lock.swap(null, state(0));
    const v1 = await lock.swap(v0, state(3));
    expect(lock.stats.conditionFailures).toBe(2);
    const other = new DynamoLock({ ...conn(), table: ddb.table, log });
    expect(await other.read()).toEqual({ state: state(3), version: v1 });
  });
});

function batch(fromSize: number, entries: Partial<CanonicalEntry>[]): IntegratedBatch {
  return batchOfEntries(
    fromSize,
    entries.map(
      (e) =>
        ({
          v: 1,
          type: 'ledger_anchor',
          result: 'Anchored',
          digest: digest(0),
          timestamp: 't',
          ...e,
        }) as CanonicalEntry,
    ),
    undefined as never,
  );
}

describe('DynamoIndex (dynalite)', () => {
  it('digest → earliest leaf, artifact → latest leaf, counts by type, indexed size; replays change nothing', async () => {
    const index = new DynamoIndex({ ...conn(), table: ddb.table, log: `idx-${uniq()}` });
    expect(await index.indexedSize()).toBe(0);
    const b1 = batch(0, [
      { digest: digest(1), artifactId: 'art_aaaaaaaaaaaaaaaaaaaaaaaa' },
      { digest: digest(2), type: 'document_verified', result: 'Verified' },
      { digest: digest(1), artifactId: 'art_aaaaaaaaaaaaaaaaaaaaaaaa' },
    ]);
    const b2 = batch(3, [{ digest: digest(1), artifactId: 'art_aaaaaaaaaaaaaaaaaaaaaaaa' }, { digest: digest(3) }]);
    await index.onBatch(b1);
    await index.onBatch(b2);
    await index.onBatch(b1); // replay (recovery re-applies a staged batch)
    await index.onBatch(b2);
    expect(await index.findByDigest(digest(1), firstCandidate)).toBe(0);
    expect(await index.findByDigest(digest(3), firstCandidate)).toBe(4);
    expect(await index.findByDigest(digest(9), firstCandidate)).toBeUndefined();
    expect(await index.findByArtifact('art_aaaaaaaaaaaaaaaaaaaaaaaa', firstCandidate)).toBe(3);
    expect(await index.indexedSize()).toBe(5);
    expect(await index.countsByType()).toEqual({ ledger_anchor: 4, document_verified: 1 });
    await expect(index.onBatch(batch(7, [{ digest: digest(4) }]))).rejects.toBeInstanceOf(IndexGapError);
    // A batch overlapping the indexed size indexes only its new tail.
    await index.onBatch(batch(4, [{ digest: digest(3) }, { digest: digest(5) }]));
    expect(await index.indexedSize()).toBe(6);
    expect(await index.countsByType()).toEqual({ ledger_anchor: 5, document_verified: 1 });
    await index.close();
  });

  it('two indexers racing over overlapping ranges count every leaf exactly once', async () => {
    const log = `idx-${uniq()}`;
    const a = new DynamoIndex({ ...conn(), table: ddb.table, log });
    const b = new DynamoIndex({ ...conn(), table: ddb.table, log });
    const entries = Array.from({ length: 300 }, (_, i) => ({ digest: digest(i), type: i % 3 === 0 ? 'x' : 'y' }));
    await Promise.all([
      a.onBatch(batch(0, entries.slice(0, 200))),
      b.onBatch(batch(0, entries)),
      a.onBatch(batch(0, entries.slice(0, 100))),
    ]);
    expect(await a.indexedSize()).toBe(300);
    expect(await b.countsByType()).toEqual({ x: 100, y: 200 });
    expect(await b.findByDigest(digest(299), firstCandidate)).toBe(299);
    await Promise.all([a.close(), b.close()]);
  });
});

describe('DynamoIndex items per entry (dynalite)', () => {
  it('an anchor adds at most two items (its digest with its identity, its artifact), one when its artifact is known; lookups and search as before', async () => {
    const log = 'log.example.com/prod';
    const index = new DynamoIndex({ ...conn(), table: ddb.table, log });
    await index.clear();
    const N = 200;
    const label = (i: number) => `release/stele-v1.${i % 97}-build-${i}.tar.gz`;
    const anchors = (from: number, labelOf: (i: number) => string) =>
      batch(
        from,
        Array.from({ length: N }, (_, k) => ({
          digest: digest(from + k),
          artifact: labelOf(from + k),
          artifactId: artifactId(labelOf(from + k), 'acme/ci'),
          scope: 'acme/ci',
        })),
      );
    const items = () => indexItems(index.client, ddb.table, log);
    // Each anchor with its own digest and a new artifact label (bench/scale.ts's entries).
    const writesBefore = index.stats.writes;
    await index.onBatch(anchors(0, label));
    // a write per anchor for its digest and identity together, one for its artifact; the
    // scope's item and the size once per batch
    expect(index.stats.writes - writesBefore).toBe(2 * N + 2);
    const fresh = await items();
    // two per entry, and one for the scope they share (was three per entry: a label row each)
    expect(fresh.length).toBe(2 * N + 1);
    const bytes = fresh.reduce((n, item) => n + billedBytes(item), 0);
    expect(bytes / N).toBeLessThan(380); // was about 592
    expect(Math.max(...fresh.map(billedBytes))).toBeLessThan(1024); // each write is one write unit
    // New digests for the same artifacts: one item each.
    await index.onBatch(anchors(N, (i) => label(i - N)));
    expect((await items()).length).toBe(3 * N + 1);
    // Found as before, each through its digest's item.
    const e = anchors(0, label).entryAt(7);
    const identity = anchorIdentity(e)!;
    expect(await index.findAnchor(identity, e.digest, firstCandidate)).toBe(7);
    expect(await index.findByDigest(e.digest, firstCandidate)).toBe(7);
    expect(await index.findByArtifact(e.artifactId!, firstCandidate)).toBe(N + 7);
    expect(await index.searchArtifact(label(7), 10, undefined, async () => true)).toEqual({
      matches: [{ artifactId: e.artifactId, seq: N + 7 }],
      more: false,
    });
    await index.clear();
    expect(await items()).toEqual([]);
    await index.close();
  }, 60_000);
});

describe('two sequencers racing on one DynamoDB lock table, sharing one S3 store', () => {
  it('exactly one publishes each size, the other stops with SequencerStoppedError, and the log never forks', async () => {
    const origin = 'race.example/log';
    const signer = new SeedSigner(origin, new Uint8Array(32).fill(3));
    const prefix = `race-${uniq()}/`;
    const table = `race${uniq()}`;
    await ddb.createTable(table);
    // Every sequencer gets its own clients, as separate processes would.
    const open = () =>
      Sequencer.open({
        origin,
        signer,
        store: new S3ObjectStore({
          bucket: s3.bucket,
          prefix: `${prefix}log/`,
          endpoint: s3.endpoint,
          forcePathStyle: true,
          credentials: s3.credentials,
        }),
        staging: new S3ObjectStore({
          bucket: s3.bucket,
          prefix: `${prefix}private/`,
          endpoint: s3.endpoint,
          forcePathStyle: true,
          credentials: s3.credentials,
        }),
        lock: new DynamoLock({ ...conn(), table, log: origin }),
        batchInterval: 20,
      });
    const published = new Map<number, string[]>();
    const watch = (s: Sequencer, name: string) =>
      s.onPublished((c) => published.set(c.size, [...(published.get(c.size) ?? []), `${name}:${toHex(c.root)}`]));

    const acked: AnchorReceipt[] = [];
    let n = 0;
    let winner = await open();
    watch(winner, 'w0');
    for (let round = 1; round <= 3; round++) {
      const challenger = await open(); // resumes from the lock at the current size
      watch(challenger, `c${round}`);
      const submitTo = (s: Sequencer, k: number) =>
        Array.from({ length: k }, () => s.submit(anchorRequest('ledger_anchor', 'Anchored', digest(n++))));
      const results = await Promise.allSettled([...submitTo(winner, 5 + round), ...submitTo(challenger, 3 + round)]);
      const stopped = [winner, challenger].filter((s) => s.failure);
      expect(stopped).toHaveLength(1);
      expect(stopped[0]!.failure).toBeInstanceOf(SequencerStoppedError);
      for (const r of results) {
        if (r.status === 'fulfilled') acked.push(r.value);
        else expect(r.reason).toBeInstanceOf(SequencerStoppedError);
      }
      winner = winner.failure ? challenger : winner;
      // The survivor keeps publishing.
      acked.push(...(await Promise.all(submitTo(winner, 2))));
    }
    await winner.close();

    // Exactly one root per published size (a second name for a size would be a fork).
    for (const [size, roots] of published) expect(roots, `size ${size}`).toHaveLength(1);

    // Audit from storage: the checkpoint verifies, every acknowledged anchor is at its seq
    // with a valid inclusion proof, nothing unacknowledged slipped in, and every checkpoint
    // ever published is a prefix (same root) of the final tree.
    const reader = new LogReader(
      new S3ObjectStore({
        bucket: s3.bucket,
        prefix: `${prefix}log/`,
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentials: s3.credentials,
      }),
      { unverified: true },
    );
    const note = Buffer.from((await reader.source.get(CHECKPOINT_KEY))!).toString('utf8');
    const cp = openCheckpoint(note, makeVerifier(origin, SIG_ED25519, signer.publicKey));
    expect(cp.size).toBe(acked.length);
    expect(new Set(acked.map((a) => a.seq)).size).toBe(acked.length);
    for (const a of acked) {
      const e = await reader.entry(a.seq, cp.size);
      expect(bytesEqual(e.entryHash, a.entryHash)).toBe(true);
      expect(
        verifyInclusion(a.seq, cp.size, leafHash(a.entryHash), await reader.inclusionProof(a.seq, cp.size), cp.root),
      ).toBe(true);
    }
    for (const [size, [root]] of published) {
      if (size > 0) expect(toHex(await reader.treeHash(size))).toBe(root!.split(':')[1]);
    }
    const lock = await new DynamoLock({ ...conn(), table, log: origin }).read();
    expect(lock?.state.size).toBe(cp.size);
  });
});
