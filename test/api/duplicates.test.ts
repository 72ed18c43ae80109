// Duplicate anchors over real sockets: an anchor identical to one in the log (digest,
// artifact, scope, tenant) gets that entry back with 200 instead of a second entry, also
// when the first copy is still pooled or arrives in the same batch; any other label, the
// opt-out `allowDuplicate`, and events (document_verified) make new entries.
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashFromHex, leafHash } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import type { Json } from '../helpers/json.js';
import { digestOf, getJson, postAnchor, startTestServer, untilIndexed } from './server.js';

let server: RunningServer;
const SETTINGS = { batchIntervalMs: 20, minBatchSpacingMs: 300 };
let next = 0x5000;
const fresh = () => digestOf(next++);

async function treeSize(): Promise<number> {
  return (await getJson(`${server.url}/api/ledger/checkpoint`)).body.treeSize as number;
}

/** The answer's inclusion proof rebuilds its checkpoint's root from the entry hash. */
function proves(a: Json): boolean {
  return verifyInclusion(
    a.leafIndex,
    a.checkpoint.treeSize,
    leafHash(hashFromHex(a.entry.proof.entryHash)),
    (a.inclusionProof as string[]).map(hashFromHex),
    hashFromHex(a.checkpoint.rootHash),
  );
}

beforeAll(async () => {
  // Batches at least 300 ms apart: an anchor sent just after a batch starts stays pooled that long.
  server = await startTestServer(SETTINGS);
}, 60_000);
afterAll(async () => server?.close());

describe('an identical anchor', () => {
  it('gets the existing entry and its proof with 200, appending nothing', async () => {
    const body = { digest: fresh(), artifact: 'build-1.bin', scope: 'ci', tenant: 'acme' };
    const first = await postAnchor(server.url, body);
    expect(first.status).toBe(201);
    expect(first.body.existing).toBeUndefined();
    const size = await treeSize();
    const again = await postAnchor(server.url, { ...body, digest: body.digest.toUpperCase() });
    expect(again.status).toBe(200);
    expect(again.body.existing).toBe(true);
    expect(again.body.leafIndex).toBe(first.body.leafIndex);
    expect(again.body.entry).toEqual(first.body.entry);
    expect(proves(again.body)).toBe(true);
    expect(await treeSize()).toBe(size);
  });

  it('differs in digest, artifact, scope or tenant: a new entry each', async () => {
    const digest = fresh();
    const base = { digest, artifact: 'a.bin', scope: 's', tenant: 't' };
    const variants = [
      base,
      { ...base, digest: fresh() },
      { ...base, artifact: 'b.bin' },
      { ...base, scope: 's2' },
      { ...base, tenant: 't2' },
      { digest, scope: 's', tenant: 't' }, // no artifact is not the same as an artifact
      { digest, artifact: 'a.bin', tenant: 't' },
      { digest, artifact: 'a.bin', scope: 's' },
      { digest, artifact: 'a.bin', scope: '', tenant: 't' }, // an empty scope is not an absent one
    ];
    const leaves = new Set<number>();
    for (const v of variants) {
      const r = await postAnchor(server.url, v);
      expect(r.status, JSON.stringify(v)).toBe(201);
      leaves.add(r.body.leafIndex);
    }
    expect(leaves.size).toBe(variants.length);
    // Each of them is now the one its repeat gets.
    for (const v of variants) expect((await postAnchor(server.url, v)).status).toBe(200);
  });

  it('sent many times at once makes one entry (one batch, the rest wait for the first)', async () => {
    const body = { digest: fresh(), artifact: 'race.bin', scope: 'ci' };
    const size = await treeSize();
    const answers = await Promise.all(Array.from({ length: 12 }, () => postAnchor(server.url, body)));
    expect(answers.map((a) => a.status).sort((a, b) => a - b)).toEqual([...Array(11).fill(200), 201]);
    expect(new Set(answers.map((a) => a.body.leafIndex)).size).toBe(1);
    expect(answers.every((a) => proves(a.body))).toBe(true);
    expect(await treeSize()).toBe(size + 1);
  });

  it('arriving while the first copy is still pooled waits for it and returns it', async () => {
    const body = { digest: fresh(), artifact: 'pooled.bin' };
    const size = await treeSize();
    const opener = postAnchor(server.url, { digest: fresh() }); // starts a batch
    await new Promise((r) => setTimeout(r, 50));
    const first = postAnchor(server.url, body); // waits for the next one, 300 ms later
    for (;;) {
      const s = (await getJson(`${server.url}/api/ledger/summary`)).body;
      if (s.lifetimeEntries === size + 2) {
        // Pooled (or being integrated), not yet published: the case under test.
        expect(s.treeSize).toBeLessThan(size + 2);
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    const second = await postAnchor(server.url, body);
    const firstAnswer = await first;
    await opener;
    expect(firstAnswer.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body.leafIndex).toBe(firstAnswer.body.leafIndex);
    expect(await treeSize()).toBe(size + 2);
  });

  it('with allowDuplicate: true makes a new entry; a plain repeat still gets the earliest', async () => {
    const body = { digest: fresh(), artifact: 'again.bin', scope: 'ci' };
    const first = await postAnchor(server.url, body);
    const forced = await postAnchor(server.url, { ...body, allowDuplicate: true });
    expect(forced.status).toBe(201);
    expect(forced.body.leafIndex).toBeGreaterThan(first.body.leafIndex);
    expect(forced.body.existing).toBeUndefined();
    const plain = await postAnchor(server.url, { ...body, allowDuplicate: false });
    expect(plain.status).toBe(200);
    expect(plain.body.leafIndex).toBe(first.body.leafIndex);
  });

  it('refuses an allowDuplicate that is not a boolean', async () => {
    const r = await postAnchor(server.url, { digest: fresh(), allowDuplicate: 'yes' });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_allowDuplicate');
  });
});

describe('events are never merged', () => {
  it('document_verified twice, even at once, makes an entry each', async () => {
    const body = { digest: fresh(), artifact: 'seen.bin', scope: 'ci', type: 'document_verified' };
    const answers = await Promise.all([postAnchor(server.url, body), postAnchor(server.url, body)]);
    const later = await postAnchor(server.url, body);
    for (const a of [...answers, later]) {
      expect(a.status).toBe(201);
      expect(a.body.entry.type).toBe('document_verified');
    }
    expect(new Set([...answers, later].map((a) => a.body.leafIndex)).size).toBe(3);
  });

  it('a document_verified does not stand in for an anchor of the same file', async () => {
    const digest = fresh();
    await postAnchor(server.url, { digest, artifact: 'x.bin', type: 'document_verified' });
    const anchored = await postAnchor(server.url, { digest, artifact: 'x.bin' });
    expect(anchored.status).toBe(201);
    expect(anchored.body.entry.type).toBe('ledger_anchor');
  });
});

describe('across a restart', () => {
  it('finds the first copy through the lookup index', async () => {
    const body = { digest: fresh(), artifact: 'kept.bin', scope: 'ci', tenant: 'acme' };
    const first = await postAnchor(server.url, body);
    const { dataDir } = server;
    await server.close();
    server = await startTestServer({ dataDir, ...SETTINGS });
    const again = await postAnchor(server.url, body);
    expect(again.status).toBe(200);
    expect(again.body.leafIndex).toBe(first.body.leafIndex);
    expect(proves(again.body)).toBe(true);
  }, 60_000);

  it('rebuilds an index written before anchor identities were kept, so an old anchor is still found', async () => {
    const body = { digest: fresh(), artifact: 'old.bin', scope: 'ci' };
    const first = await postAnchor(server.url, body);
    const { dataDir } = server;
    await server.close();
    // What the first version left: its rows, no schema mark (then no identities, no labels).
    const db = open<number, string | Buffer>({ path: join(dataDir, 'private', 'index'), compression: false });
    expect(db.removeSync('meta:schema')).toBe(true);
    await db.close();
    server = await startTestServer({ dataDir, ...SETTINGS });
    // Until the rebuilt index covers the log, an anchor is refused (503), never a second entry.
    const early = await postAnchor(server.url, body);
    expect([200, 503]).toContain(early.status);
    if (early.status === 503) expect(early.body.error.code).toBe('index_not_ready');
    await untilIndexed(server.url);
    const again = await postAnchor(server.url, body);
    expect(again.status).toBe(200);
    expect(again.body.leafIndex).toBe(first.body.leafIndex);
    const search = await getJson(`${server.url}/api/ledger/search?artifact=old.bin`);
    expect(search.body.matches.map((m: Json) => m.leafIndex)).toEqual([first.body.leafIndex]);
  }, 60_000);
});
