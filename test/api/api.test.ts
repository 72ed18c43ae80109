// The compatibility API over real sockets: docs/interface.md §2 shapes, proofs that verify against the
// library verifier, lookups, concurrency, bad input, and restarts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCheckpointBody } from '../../src/core/checkpoint.js';
import {
  artifactId,
  canonicalEntryBytes,
  entryHash as computeEntryHash,
  type Entry,
  ZERO_HASH,
} from '../../src/core/entry.js';
import { hashFromHex, leafHash, sha256, toHex } from '../../src/core/hash.js';
import { MemoryHashReader, treeHash, verifyConsistency, verifyInclusion } from '../../src/core/merkle.js';
import { SIG_ED25519, openNote, parseVkey } from '../../src/core/note.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { LogReader } from '../../src/read/reader.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { digestOf, getJson, postAnchor, startTestServer } from './server.js';
import type { Json } from '../helpers/json.js';

// @noble/ed25519 is this test's own check of the signature, apart from src/core/note.ts (which
// does not load it on Node): it needs its SHA-512 given.
ed.hashes.sha512 = sha512;

const CHECKPOINT_FIELDS = [
  'keyId',
  'lifetimeEntries',
  'logId',
  'note',
  'rootHash',
  'signature',
  'timestamp',
  'treeSize',
  'witnesses',
];
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HEX64 = /^[0-9a-f]{64}$/;

function checkCheckpointJson(cp: Json, vkey: string) {
  expect(Object.keys(cp).sort()).toEqual(CHECKPOINT_FIELDS);
  expect(cp.rootHash).toMatch(HEX64);
  expect(cp.timestamp).toMatch(ISO_MS);
  expect(cp.signature).toMatch(/^ed25519:[A-Za-z0-9+/]{86}==$/);
  expect(Array.isArray(cp.witnesses)).toBe(true);
  // The JSON signature is the note's 0x01 signature over the rebuilt body.
  const v = parseVkey(vkey);
  const body = formatCheckpointBody({ origin: cp.logId, size: cp.treeSize, root: hashFromHex(cp.rootHash) });
  const sig = Buffer.from(cp.signature.slice('ed25519:'.length), 'base64');
  expect(ed.verify(sig, new TextEncoder().encode(body), v.publicKey)).toBe(true);
  expect(openNote(cp.note, v).body).toBe(body);
  expect(cp.keyId).toBe(toHex(sha256(v.publicKey)));
}

function checkEntryProof(r: Json) {
  expect(Object.keys(r).sort()).toEqual([
    'auditPath',
    'checkpoint',
    'entry',
    'leafHash',
    'leafIndex',
    'rootHash',
    'treeSize',
  ]);
  const e: Entry = r.entry;
  expect(e.id).toBe(`led_${r.leafIndex}_${e.proof.entryHash.slice(0, 12)}`);
  expect(r.leafHash).toBe(toHex(leafHash(hashFromHex(e.proof.entryHash))));
  expect(r.treeSize).toBe(r.checkpoint.treeSize);
  expect(r.rootHash).toBe(r.checkpoint.rootHash);
  const ok = verifyInclusion(
    r.leafIndex,
    r.treeSize,
    hashFromHex(r.leafHash),
    r.auditPath.map(hashFromHex),
    hashFromHex(r.rootHash),
  );
  expect(ok).toBe(true);
}

describe('compatibility API', () => {
  let srv: RunningServer;
  const anchored: Json[] = [];

  beforeAll(async () => {
    srv = await startTestServer();
    for (let i = 0; i < 40; i++) {
      const res = await postAnchor(srv.url, {
        digest: digestOf(i).toUpperCase(),
        artifact: `pkg-${i % 7}.tgz`,
        scope: 'release',
      });
      expect(res.status).toBe(201);
      anchored.push(res.body);
    }
  });
  afterAll(() => srv?.close());

  it('anchor responses have the docs/interface.md §2.6 fields and verify', async () => {
    for (const [i, a] of anchored.entries()) {
      expect(Object.keys(a).sort()).toEqual(['checkpoint', 'entry', 'inclusionProof', 'leafIndex']);
      expect(a.leafIndex).toBe(i);
      expect(a.leafIndex).toBeLessThan(a.checkpoint.treeSize);
      expect(a.entry.type).toBe('ledger_anchor');
      expect(a.entry.result).toBe('Anchored');
      expect(a.entry.digest).toBe(digestOf(i)); // stored lowercase
      expect(a.entry.artifactId).toBe(artifactId(`pkg-${i % 7}.tgz`, 'release'));
      checkCheckpointJson(a.checkpoint, srv.vkey);
      const leaf = leafHash(hashFromHex(a.entry.proof.entryHash));
      expect(
        verifyInclusion(
          a.leafIndex,
          a.checkpoint.treeSize,
          leaf,
          a.inclusionProof.map(hashFromHex),
          hashFromHex(a.checkpoint.rootHash),
        ),
      ).toBe(true);
    }
  });

  it('entry hashes chain from the canonical entries', () => {
    let prior: Uint8Array = ZERO_HASH;
    for (const [i, a] of anchored.entries()) {
      const eh = computeEntryHash(i, canonicalEntryBytes(a.entry), prior);
      expect(toHex(eh)).toBe(a.entry.proof.entryHash);
      prior = eh;
    }
  });

  it('checkpoint route matches docs/interface.md §2.2 and the published note', async () => {
    const { status, body, headers } = await getJson(`${srv.url}/api/ledger/checkpoint`);
    expect(status).toBe(200);
    expect(headers.get('cache-control')).toBe('no-store');
    checkCheckpointJson(body, srv.vkey);
    expect(body.treeSize).toBe(40);
    expect(body.lifetimeEntries).toBe(40);
    const note = await (await fetch(`${srv.url}/checkpoint`)).text();
    expect(note).toBe(body.note);
  });

  it('key route lets a client pin the key by id', async () => {
    const { body } = await getJson(`${srv.url}/api/ledger/key`);
    expect(body.origin).toBe('api.test/log');
    expect(body.keyId).toBe(srv.keyId);
    expect(body.vkey).toBe(srv.vkey);
    expect(toHex(sha256(Buffer.from(body.publicKey, 'base64')))).toBe(body.keyId);
    expect(parseVkey(body.vkey).type).toBe(SIG_ED25519);
    // No witnesses: the C2SP tlog-policy text names this log and requires nothing.
    expect(body.witnessPolicy).toEqual({ threshold: 0, policy: `log ${srv.vkey}\nquorum none\n` });
  });

  it('finds entries by id, artifact, hash and leaf, with proofs to the current root', async () => {
    const a = anchored[17];
    const byId = await getJson(`${srv.url}/api/ledger/entry?id=${a.entry.id}`);
    const byHash = await getJson(`${srv.url}/api/ledger/entry?hash=${digestOf(17)}`);
    const byHashUpper = await getJson(`${srv.url}/api/ledger/entry?hash=${digestOf(17).toUpperCase()}`);
    const byLeaf = await getJson(`${srv.url}/api/ledger/entry?leaf=17`);
    // Each hex digit of the id's hash prefix counts, the last one too.
    const last = a.entry.id.slice(-1);
    const wrongLast = await getJson(
      `${srv.url}/api/ledger/entry?id=${a.entry.id.slice(0, -1)}${last === '0' ? '1' : '0'}`,
    );
    expect([wrongLast.status, wrongLast.body.error.code]).toEqual([404, 'entry_not_found']);
    for (const r of [byId, byHash, byHashUpper, byLeaf]) {
      expect(r.status).toBe(200);
      checkEntryProof(r.body);
      expect(r.body.leafIndex).toBe(17);
      expect(r.body.entry).toEqual(a.entry);
      checkCheckpointJson(r.body.checkpoint, srv.vkey);
    }
    // Artifact lookups return the most recent entry of that artifact: pkg-3 is at 3, 10, 17, 24, 31, 38.
    const byArtifact = await getJson(`${srv.url}/api/ledger/entry?artifact=${artifactId('pkg-3.tgz', 'release')}`);
    expect(byArtifact.status).toBe(200);
    expect(byArtifact.body.leafIndex).toBe(38);
    checkEntryProof(byArtifact.body);
  });

  it('hash lookup returns the earliest entry with that digest', async () => {
    const again = await postAnchor(srv.url, { digest: digestOf(5) });
    expect(again.status).toBe(201);
    const r = await getJson(`${srv.url}/api/ledger/entry?hash=${digestOf(5)}`);
    expect(r.body.leafIndex).toBe(5);
    expect(r.body.treeSize).toBeGreaterThan(again.body.leafIndex);
  });

  it('consistency proofs recompute both roots', async () => {
    const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    const reader = new LogReader(new FsObjectStore(`${srv.dataDir}/log`), { unverified: true });
    for (const [first, second] of [
      [1, cp.treeSize],
      [7, 8],
      [13, 29],
      [cp.treeSize, cp.treeSize],
      [1, 1],
    ]) {
      const { status, body } = await getJson(`${srv.url}/api/ledger/consistency?first=${first}&second=${second}`);
      expect(status).toBe(200);
      expect(Object.keys(body).sort()).toEqual(['first', 'firstRoot', 'proof', 'second', 'secondRoot']);
      expect(body.firstRoot).toBe(toHex(await reader.treeHash(first!)));
      expect(body.secondRoot).toBe(toHex(await reader.treeHash(second!)));
      expect(
        verifyConsistency(
          first!,
          second!,
          body.proof.map(hashFromHex),
          hashFromHex(body.firstRoot),
          hashFromHex(body.secondRoot),
        ),
      ).toBe(true);
      if (first === second) expect(body.proof).toEqual([]);
    }
    expect((await getJson(`${srv.url}/api/ledger/consistency?first=1&second=${cp.treeSize}`)).body.secondRoot).toBe(
      cp.rootHash,
    );
  });

  it('summary counts entries', async () => {
    const { body } = await getJson(`${srv.url}/api/ledger/summary`);
    expect(body.treeSize).toBe(41);
    expect(body.lifetimeEntries).toBe(41);
    expect(body.entriesByType).toEqual({ ledger_anchor: 41 });
    expect(body.lastCheckpointTime).toMatch(ISO_MS);
  });

  it('records document_verified entries', async () => {
    const r = await postAnchor(srv.url, { digest: digestOf(3), type: 'document_verified' });
    expect(r.status).toBe(201);
    expect(r.body.entry.type).toBe('document_verified');
    expect(r.body.entry.result).toBe('Verified');
  });

  it('serves tiles with immutable caching and the checkpoint with no-cache', async () => {
    const t = await fetch(`${srv.url}/tile/0/000.p/42`);
    expect(t.status).toBe(200);
    expect(t.headers.get('cache-control')).toContain('immutable');
    expect((await t.arrayBuffer()).byteLength).toBe(42 * 32);
    const c = await fetch(`${srv.url}/checkpoint`);
    expect(c.headers.get('cache-control')).toBe('no-cache');
    expect((await fetch(`${srv.url}/tile/0/999`)).status).toBe(404);
    expect((await fetch(`${srv.url}/tile/../private/log.key`)).status).toBe(404);
  });

  it('healthz and metrics', async () => {
    expect((await getJson(`${srv.url}/healthz`)).body).toMatchObject({ ok: true });
    // Errors are counted with the status they were answered with.
    expect((await fetch(`${srv.url}/api/ledger/entry?id=nope`)).status).toBe(400);
    expect((await fetch(`${srv.url}/no/such/route`)).status).toBe(404);
    const m = await (await fetch(`${srv.url}/metrics`)).text();
    expect(m).toMatch(/stele_http_requests_total\{route="\/api\/ledger\/entry",method="GET",status="400"\} [1-9]/);
    expect(m).toMatch(/stele_http_requests_total\{route="other",method="GET",status="404"\} [1-9]/);
    expect(m).toMatch(/stele_http_requests_total\{route="\/healthz",method="GET",status="200"\} [1-9]/);
    expect(m).toMatch(/stele_tree_size \d+/);
    expect(m).toContain('stele_http_requests_total');
    expect(m).toContain('stele_batch_size_bucket');
  });
});

describe('bad input', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer();
    for (let i = 0; i < 5; i++) await postAnchor(srv.url, { digest: digestOf(i) });
  });
  afterAll(() => srv?.close());

  const big = 'x'.repeat(20_000);
  const cases: [string, () => Promise<{ status: number; body: Json }>, number, string][] = [
    ['no lookup key', () => getJson(`@/api/ledger/entry`), 400, 'lookup_key'],
    [
      'two lookup keys',
      () => getJson(`@/api/ledger/entry?id=led_0_000000000000&hash=${digestOf(1)}`),
      400,
      'lookup_key',
    ],
    [
      'repeated key',
      () => getJson(`@/api/ledger/entry?hash=${digestOf(1)}&hash=${digestOf(1)}`),
      400,
      'duplicate_parameter',
    ],
    ['unknown parameter', () => getJson(`@/api/ledger/entry?hash=${digestOf(1)}&x=1`), 400, 'unknown_parameter'],
    ['malformed id', () => getJson(`@/api/ledger/entry?id=led_x_1`), 400, 'invalid_id'],
    ['id with leading zero', () => getJson(`@/api/ledger/entry?id=led_01_000000000000`), 400, 'invalid_id'],
    ['id of an absent leaf', () => getJson(`@/api/ledger/entry?id=led_99_000000000000`), 404, 'entry_not_found'],
    ['id with the wrong hash', () => getJson(`@/api/ledger/entry?id=led_1_000000000000`), 404, 'entry_not_found'],
    ['malformed artifact', () => getJson(`@/api/ledger/entry?artifact=art_xyz`), 400, 'invalid_artifact'],
    ['unknown artifact', () => getJson(`@/api/ledger/entry?artifact=art_${'0'.repeat(24)}`), 404, 'entry_not_found'],
    ['short hash', () => getJson(`@/api/ledger/entry?hash=abc`), 400, 'invalid_hash'],
    ['unknown hash', () => getJson(`@/api/ledger/entry?hash=${'f'.repeat(64)}`), 404, 'entry_not_found'],
    ['consistency without second', () => getJson(`@/api/ledger/consistency?first=1`), 400, 'missing_second'],
    ['consistency first=0', () => getJson(`@/api/ledger/consistency?first=0&second=2`), 400, 'invalid_first'],
    ['consistency first>second', () => getJson(`@/api/ledger/consistency?first=3&second=2`), 400, 'invalid_range'],
    ['consistency beyond tree', () => getJson(`@/api/ledger/consistency?first=1&second=6`), 400, 'invalid_second'],
    ['consistency non-integer', () => getJson(`@/api/ledger/consistency?first=1.5&second=2`), 400, 'invalid_first'],
    ['consistency negative', () => getJson(`@/api/ledger/consistency?first=-1&second=2`), 400, 'invalid_first'],
    [
      'consistency huge',
      () => getJson(`@/api/ledger/consistency?first=1&second=99999999999999999999`),
      400,
      'invalid_second',
    ],
    ['anchor not JSON', () => postAnchor('@', '{not json'), 400, 'invalid_json'],
    ['anchor JSON array', () => postAnchor('@', '[1,2]'), 400, 'invalid_body'],
    [
      'anchor wrong content type',
      () => getJson(`@/api/ledger/anchor`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hi' }),
      415,
      'unsupported_media_type',
    ],
    ['anchor without digest', () => postAnchor('@', {}), 400, 'missing_digest'],
    ['anchor bad digest', () => postAnchor('@', { digest: 'zz'.repeat(32) }), 400, 'invalid_digest'],
    ['anchor digest as number', () => postAnchor('@', { digest: 12 }), 400, 'invalid_digest'],
    [
      'anchor long artifact',
      () => postAnchor('@', { digest: digestOf(9), artifact: 'a'.repeat(1025) }),
      400,
      'invalid_artifact',
    ],
    ['anchor long scope', () => postAnchor('@', { digest: digestOf(9), scope: 's'.repeat(257) }), 400, 'invalid_scope'],
    [
      'anchor control characters',
      () => postAnchor('@', { digest: digestOf(9), artifact: 'a\nb' }),
      400,
      'invalid_artifact',
    ],
    ['anchor unknown field', () => postAnchor('@', { digest: digestOf(9), extra: 1 }), 400, 'unknown_field'],
    ['anchor bad type', () => postAnchor('@', { digest: digestOf(9), type: 'policy_evaluation' }), 400, 'invalid_type'],
    ['anchor body too large', () => postAnchor('@', { digest: digestOf(9), artifact: big }), 413, 'body_too_large'],
    ['unknown route', () => getJson(`@/api/ledger/nope`), 404, 'not_found'],
    ['wrong method', () => getJson(`@/api/ledger/checkpoint`, { method: 'DELETE' }), 405, 'method_not_allowed'],
    ['PROPFIND', () => getJson(`@/api/ledger/checkpoint`, { method: 'PROPFIND' }), 405, 'method_not_allowed'],
    ['GET on anchor', () => getJson(`@/api/ledger/anchor`), 405, 'method_not_allowed'],
    ['POST on a tile', () => getJson(`@/tile/0/000.p/5`, { method: 'POST' }), 405, 'method_not_allowed'],
  ];

  it.each(cases)('%s', async (_name, call, status, code) => {
    const before = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    const r = await call();
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ error: { code, message: expect.any(String) } });
    const after = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    expect(after.treeSize).toBe(before.treeSize);
    expect(after.rootHash).toBe(before.rootHash);
  });

  // Substitute the server URL for '@' in each case's address.
  const realFetch = globalThis.fetch;
  beforeAll(() => {
    globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) =>
      realFetch(
        typeof input === 'string' && input.startsWith('@') ? srv.url + input.slice(1) : input,
        init,
      )) as typeof fetch;
  });
  afterAll(() => {
    globalThis.fetch = realFetch;
  });
});

describe('production mode', () => {
  let srv: RunningServer;
  const token = 'tok_0123456789abcdef0123';
  beforeAll(async () => {
    srv = await startTestServer({ mode: 'production', anchorTokens: `ci=${token}@acme`, anchorRate: 3 });
  });
  afterAll(() => srv?.close());

  it('requires a bearer token and records the tenant', async () => {
    const none = await postAnchor(srv.url, { digest: digestOf(1) });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('unauthorized');
    const wrong = await postAnchor(
      srv.url,
      { digest: digestOf(1) },
      { authorization: 'Bearer tok_wrong_wrong_wrong_1' },
    );
    expect(wrong.status).toBe(401);
    const ok = await postAnchor(srv.url, { digest: digestOf(1) }, { authorization: `Bearer ${token}` });
    expect(ok.status).toBe(201);
    expect(ok.body.entry.tenant).toBe('acme');
  });

  it('rate-limits per client with 429 and Retry-After', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        postAnchor(srv.url, { digest: digestOf(100 + i) }, { authorization: `Bearer ${token}` }),
      ),
    );
    const limited = results.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]!.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
    expect(limited[0]!.body.error.code).toBe('rate_limited');
  });

  it('refuses to start without tokens', async () => {
    await expect(startTestServer({ mode: 'production' })).rejects.toThrow(/anchor tokens/);
  });
});

describe('concurrency and restart', () => {
  it('1,000 concurrent anchors get distinct leaves and valid proofs; a restart keeps them all', async () => {
    const srv = await startTestServer({ batchIntervalMs: 50 });
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => postAnchor(srv.url, { digest: digestOf(5000 + i) })),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const leaves = new Set(results.map((r) => r.body.leafIndex));
    expect(leaves.size).toBe(1000);
    for (const r of results) {
      const leaf = leafHash(hashFromHex(r.body.entry.proof.entryHash));
      expect(
        verifyInclusion(
          r.body.leafIndex,
          r.body.checkpoint.treeSize,
          leaf,
          r.body.inclusionProof.map(hashFromHex),
          hashFromHex(r.body.checkpoint.rootHash),
        ),
      ).toBe(true);
    }
    // Full recomputation: every leaf from the entry hashes, root against the checkpoint.
    const byLeaf = new Map(results.map((r) => [r.body.leafIndex as number, r.body.entry.proof.entryHash as string]));
    const leavesInOrder = [...Array(1000).keys()].map((i) => leafHash(hashFromHex(byLeaf.get(i)!)));
    const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    expect(toHex(await treeHash(1000, new MemoryHashReader(leavesInOrder)))).toBe(cp.rootHash);

    // Sizes inside a batch have no partial tiles of their own: proofs read the wider ones.
    for (const [first, second] of [
      [289, 1000],
      [1, 777],
      [300, 301],
      [513, 999],
    ] as const) {
      const c = await getJson(`${srv.url}/api/ledger/consistency?first=${first}&second=${second}`);
      expect(c.status).toBe(200);
      expect(
        verifyConsistency(
          first,
          second,
          c.body.proof.map(hashFromHex),
          hashFromHex(c.body.firstRoot),
          hashFromHex(c.body.secondRoot),
        ),
      ).toBe(true);
      expect(c.body.firstRoot).toBe(toHex(await treeHash(first, new MemoryHashReader(leavesInOrder))));
      expect(c.body.secondRoot).toBe(toHex(await treeHash(second, new MemoryHashReader(leavesInOrder))));
    }

    const sample = [0, 255, 256, 511, 999];
    const before = await Promise.all(sample.map((i) => getJson(`${srv.url}/api/ledger/entry?leaf=${i}`)));
    await srv.close();
    const again = await startTestServer({ dataDir: srv.dataDir });
    try {
      const cp2 = (await getJson(`${again.url}/api/ledger/checkpoint`)).body;
      expect(cp2.treeSize).toBe(1000);
      expect(cp2.rootHash).toBe(cp.rootHash);
      const after = await Promise.all(sample.map((i) => getJson(`${again.url}/api/ledger/entry?leaf=${i}`)));
      for (const [k, r] of after.entries()) {
        expect(r.body.auditPath).toEqual(before[k]!.body.auditPath);
        expect(r.body.entry).toEqual(before[k]!.body.entry);
      }
      const byHash = await getJson(`${again.url}/api/ledger/entry?hash=${digestOf(5999)}`);
      expect(byHash.status).toBe(200);
      const next = await postAnchor(again.url, { digest: digestOf(1) });
      expect(next.body.leafIndex).toBe(1000);
    } finally {
      await again.close();
    }
  });
});
