// The hot read routes (src/api/ledger-reads.ts): GET /api/ledger/entry and /consistency are
// answered before the router on their exact paths. Each answer, success or refusal, must be
// byte for byte and header for header what the router's mount of the same routes gives (a
// trailing slash reaches the routes through it), and every success must be the JSON.stringify
// of its view computed independently, from the leaves with the naive Merkle definitions
// (the answer form before the views were written as bytes). Repeats are answered from the
// kept answers (src/api/answer-cache.ts): they must be the same bytes, refusals the same, and
// a new checkpoint must never be answered with a kept answer of the previous one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entryIdOfHex, parseCanonicalEntry, presentEntry } from '../../src/core/entry.js';
import { hashFromHex, leafHash, toHex } from '../../src/core/hash.js';
import type { CheckpointView, EntryProofView } from '../../src/api/wire.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import type { Json } from '../helpers/json.js';
import { NaiveTree } from '../helpers/naive.js';
import { digestOf, getJson, postAnchor, startTestServer } from './server.js';

/** Past one full tile (256 leaves), so proofs read a full and a partial level-0 tile. */
const SIZE = 300;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

async function answer(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, { headers });
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (k !== 'date') out[k] = v;
  });
  return { status: res.status, headers: out, body: Buffer.from(await res.arrayBuffer()) };
}

/** Waits until the published checkpoint holds `size` entries. */
async function publishedSize(url: string, size: number): Promise<void> {
  for (;;) {
    const treeSize = (await getJson(`${url}/api/ledger/checkpoint`)).body.treeSize as number;
    if (treeSize >= size) return expect(treeSize).toBe(size);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('hot read routes', () => {
  let srv: RunningServer;
  const entryHashes: Uint8Array[] = [];
  const ids: string[] = [];
  let tree: NaiveTree;

  beforeAll(async () => {
    srv = await startTestServer();
    const anchored = await Promise.all(
      Array.from({ length: SIZE }, (_, i) => postAnchor(srv.url, { digest: digestOf(i), artifact: `a${i}` })),
    );
    for (const a of anchored) {
      expect(a.status).toBe(201);
      entryHashes[a.body.leafIndex] = hashFromHex(a.body.entry.proof.entryHash);
      ids[a.body.leafIndex] = a.body.entry.id;
    }
    tree = new NaiveTree(entryHashes.map((h) => leafHash(h)));
    // Every anchor is in a published checkpoint before any answer is compared.
    await publishedSize(srv.url, SIZE);
  }, 60_000);

  afterAll(async () => {
    await srv?.close();
  });

  /** The expected JSON of a successful entry answer, from the naive tree and the checkpoint view. */
  function entryJson(seq: number, cp: CheckpointView, canonical: Json): string {
    const view: EntryProofView = {
      leafIndex: seq,
      treeSize: cp.treeSize,
      leafHash: toHex(tree.leafHashes[seq]!),
      auditPath: tree.path(seq, cp.treeSize).map(toHex),
      rootHash: toHex(tree.root(cp.treeSize)),
      checkpoint: cp,
      entry: presentEntry(parseCanonicalEntry(Buffer.from(JSON.stringify(canonical))), seq, entryHashes[seq]!),
    };
    return JSON.stringify(view);
  }

  /** [query, status (and error code) it must get, request headers]. */
  const entryCases: [string, string, Record<string, string>?][] = [
    [`id=${'{id:5}'}`, '200'],
    [`id=${'{id:270}'}`, '200'],
    [`hash=${digestOf(17)}`, '200'],
    [`hash=${digestOf(299).toUpperCase()}`, '200'],
    ['leaf=0', '200'],
    [`leaf=${SIZE - 1}`, '200'],
    [`artifact=${'{artifact:42}'}`, '200'],
    [`hash=${digestOf(3)}&format=json`, '200', { accept: 'text/x.tlog-proof' }],
    [`hash=${digestOf(3)}&format=tlog-proof`, '200'],
    ['leaf=256', '200', { accept: 'application/json, text/x.tlog-proof;q=0.9' }],
    // Leaf 1's answer is then kept: an id naming leaf 1 with a wrong hash is refused all the same.
    ['leaf=1', '200'],
    ['id=led_1_000000000000', '404 entry_not_found'],
    // Refusals: malformed, unknown and out-of-range keys, and bad query shapes.
    ['id=nope', '400 invalid_id'],
    [`id=led_${SIZE}_000000000000`, '404 entry_not_found'],
    [`hash=${'f'.repeat(64)}`, '404 entry_not_found'],
    ['hash=abc', '400 invalid_hash'],
    [`leaf=${SIZE}`, '404 entry_not_found'],
    ['leaf=01', '400 invalid_leaf'],
    [`artifact=art_${'0'.repeat(24)}`, '404 entry_not_found'],
    [`hash=${digestOf(1)}&hash=${digestOf(1)}`, '400 duplicate_parameter'],
    [`hash=${digestOf(1)}&leaf=1`, '400 lookup_key'],
    [`hash=${digestOf(1)}&x=1`, '400 unknown_parameter'],
    [`hash=${digestOf(1)}&format=xml`, '400 invalid_format'],
    ['', '400 lookup_key'],
  ];
  const consistencyCases: [string, string][] = [
    ['first=1&second=300', '200'],
    ['first=10&second=257', '200'],
    ['first=256&second=300', '200'],
    ['first=300&second=300', '200'],
    ['first=7&second=8', '200'],
    // Refusals, second beyond the tree among them.
    [`first=1&second=${SIZE + 1}`, '400 invalid_second'],
    ['first=0&second=2', '400 invalid_first'],
    ['first=3&second=2', '400 invalid_range'],
    ['first=1', '400 missing_second'],
    ['second=1', '400 missing_first'],
    ['first=1.5&second=2', '400 invalid_first'],
    ['first=1&second=99999999999999999999', '400 invalid_second'],
    ['first=1&second=2&third=3', '400 unknown_parameter'],
    ['first=1&first=1&second=2', '400 duplicate_parameter'],
  ];

  /** The status of an answer and, for a refusal, its error code. */
  const outcome = (a: Answer): string =>
    a.status === 200 ? '200' : `${a.status} ${(JSON.parse(a.body.toString()) as Json).error.code}`;

  /** Fills `{id:N}` and `{artifact:N}` in a case's query. */
  async function filled(query: string): Promise<string> {
    const artifact = /\{artifact:(\d+)\}/.exec(query);
    if (artifact) {
      const leaf = await getJson(`${srv.url}/api/ledger/entry?leaf=${artifact[1]}`);
      query = query.replace(artifact[0], leaf.body.entry.artifactId);
    }
    return query.replace(/\{id:(\d+)\}/, (_, n: string) => ids[Number(n)]!);
  }

  /** Asks `route?query` on its exact path and through the router: the expected outcome, the same bytes and headers. */
  async function expectAsRouted(route: string, query: string, expected: string, headers?: Record<string, string>) {
    const fast = await answer(`${srv.url}/api/ledger/${route}?${query}`, headers);
    const routed = await answer(`${srv.url}/api/ledger/${route}/?${query}`, headers);
    expect({ query, outcome: outcome(fast) }).toEqual({ query, outcome: expected });
    expect({ query, ...fast, body: fast.body.toString() }).toEqual({ query, ...routed, body: routed.body.toString() });
  }

  it('answer /entry on its exact path as the router does, byte for byte, refusals included', async () => {
    for (const [template, expected, headers] of entryCases)
      await expectAsRouted('entry', await filled(template), expected, headers);
  });

  it('answer /consistency on its exact path as the router does, byte for byte, refusals included', async () => {
    for (const [query, expected] of consistencyCases) await expectAsRouted('consistency', query, expected);
  });

  it('answer with the JSON.stringify of views computed from the leaves', async () => {
    const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body as CheckpointView;
    expect(cp.treeSize).toBe(SIZE);
    for (const seq of [0, 5, 255, 256, 270, SIZE - 1]) {
      for (const query of [`id=${ids[seq]}`, `hash=${digestOf(seq)}`, `leaf=${seq}`]) {
        const a = await answer(`${srv.url}/api/ledger/entry?${query}`);
        expect(a.status).toBe(200);
        expect(a.headers['content-type']).toBe('application/json; charset=utf-8');
        expect(a.headers['cache-control']).toBe('no-store');
        const record = (JSON.parse(a.body.toString()) as { entry: Json }).entry;
        const { id: _id, proof: _proof, ...canonical } = record;
        expect(a.body.toString()).toBe(entryJson(seq, cp, canonical));
        expect(record.id).toBe(entryIdOfHex(seq, toHex(entryHashes[seq]!)));
      }
    }
    for (const [first, second] of [
      [1, SIZE],
      [10, 257],
      [256, 300],
      [100, 200],
      [SIZE, SIZE],
    ] as const) {
      const a = await answer(`${srv.url}/api/ledger/consistency?first=${first}&second=${second}`);
      expect(a.status).toBe(200);
      expect(a.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(a.body.toString()).toBe(
        JSON.stringify({
          first,
          second,
          firstRoot: toHex(tree.root(first)),
          secondRoot: toHex(tree.root(second)),
          proof: tree.proof(first, second).map(toHex),
        }),
      );
    }
  });

  it('answer for the tree that is published now, not one answered before', async () => {
    const before = JSON.parse((await answer(`${srv.url}/api/ledger/entry?leaf=3`)).body.toString()) as Json;
    const added = await postAnchor(srv.url, { digest: digestOf(SIZE) });
    expect(added.status).toBe(201);
    entryHashes[added.body.leafIndex] = hashFromHex(added.body.entry.proof.entryHash);
    tree = new NaiveTree(entryHashes.map((h) => leafHash(h)));
    await publishedSize(srv.url, SIZE + 1);
    const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body as CheckpointView;
    const after = await answer(`${srv.url}/api/ledger/entry?leaf=3`);
    const { id: _id, proof: _proof, ...canonical } = (JSON.parse(after.body.toString()) as { entry: Json }).entry;
    expect(after.body.toString()).toBe(entryJson(3, cp, canonical));
    expect(before.treeSize).toBe(SIZE);
    const c = await getJson(`${srv.url}/api/ledger/consistency?first=${SIZE}&second=${SIZE + 1}`);
    expect(c.body.secondRoot).toBe(toHex(tree.root(SIZE + 1)));
  });
});
