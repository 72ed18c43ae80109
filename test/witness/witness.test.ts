// Witnesses: the tlog-witness add-checkpoint protocol (every status of the current text over
// HTTP, extension lines, durable and monotonic state), the monitoring path, a log collecting
// cosignatures from three witnesses, the collector against current and v1.0.0 witnesses,
// split-view detection, and a witness that cosigned a larger tree stopping a rolled-back log.
import { pino } from 'pino';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openCheckpoint, signCheckpoint } from '../../src/core/checkpoint.js';
import { EMPTY_ROOT, leafHash, sha256, toBase64, toHex } from '../../src/core/hash.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../../src/core/merkle.js';
import { SIG_ED25519, SeedSigner, cosignBody, makeVerifier, openNote, signBody } from '../../src/core/note.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { WitnessCollector, WitnessRollbackError } from '../../src/witness/collector.js';
import { type RunningWitness, startWitness } from '../../src/witness/host.js';
import { SIZE_CONTENT_TYPE, formatAddCheckpoint } from '../../src/witness/protocol.js';
import { Witness } from '../../src/witness/witness.js';
import { digestOf, getJson, postAnchor, startTestServer } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'witness.test/log';
const logKey = new SeedSigner(ORIGIN, new Uint8Array(32).fill(1));
const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, logKey.publicKey);
const silent = pino({ level: 'silent' });
const tmp = (p: string) => scratchDir(p);

/** A tree of n leaves; `fork` changes one leaf so the same size has another root. */
function leaves(n: number, fork = false): Uint8Array[] {
  return Array.from({ length: n }, (_, i) =>
    leafHash(sha256(new Uint8Array([i & 255, i >> 8, fork && i === 0 ? 1 : 0]))),
  );
}

async function checkpointOf(n: number, fork = false, signer = logKey) {
  const reader = new MemoryHashReader(leaves(Math.max(n, 1), fork));
  return signCheckpoint({ origin: ORIGIN, size: n, root: await treeHash(n, reader) }, signer);
}

async function consistency(old: number, n: number, fork = false) {
  return old === 0 || old === n ? [] : proveConsistency(old, n, new MemoryHashReader(leaves(n, fork)));
}

async function post(url: string, body: string) {
  const res = await fetch(`${url}/add-checkpoint`, { method: 'POST', body });
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}

async function add(url: string, old: number, n: number, fork = false) {
  const cp = await checkpointOf(n, fork);
  return post(url, formatAddCheckpoint({ oldSize: old, proof: await consistency(old, n, fork), checkpoint: cp.note }));
}

describe('tlog-witness add-checkpoint', () => {
  let w: RunningWitness;
  let dir: string;
  beforeAll(async () => {
    dir = tmp('stele-witness-');
    w = await startWitness({
      dataDir: dir,
      name: 'w1.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
  });
  afterAll(() => w?.close());

  it('cosigns a first checkpoint and then consistent extensions', async () => {
    const r = await add(w.url, 0, 10);
    expect(r.status).toBe(200);
    const cp = await checkpointOf(10);
    const opened = openNote(cp.note + r.text, logVerifier, [w.verifier]);
    expect(opened.cosignatures).toHaveLength(1);
    expect(Math.abs(opened.cosignatures[0]!.timestamp! - Date.now() / 1000)).toBeLessThan(5);
    expect((await add(w.url, 10, 300)).status).toBe(200);
    expect((await add(w.url, 300, 300)).status).toBe(200); // same checkpoint again
    expect(await w.witness.stateOf(ORIGIN)).toMatchObject({ size: 300 });
  });

  it('answers a stale old size with 409 and the size it holds', async () => {
    const r = await add(w.url, 10, 400);
    expect(r.status).toBe(409);
    expect(r.type).toBe(SIZE_CONTENT_TYPE);
    expect(r.text).toBe('300\n');
  });

  it('refuses a second root for the same size, a rollback, and a bad proof', async () => {
    const fork = await add(w.url, 300, 300, true);
    expect(fork.status).toBe(422);
    const older = await checkpointOf(200);
    const rollback = await post(w.url, formatAddCheckpoint({ oldSize: 300, proof: [], checkpoint: older.note }));
    expect(rollback.status).toBe(400);
    const cp = await checkpointOf(400);
    const badProof = (await consistency(300, 400)).map((h, i) => (i === 0 ? sha256(h) : h));
    expect(
      (await post(w.url, formatAddCheckpoint({ oldSize: 300, proof: badProof, checkpoint: cp.note }))).status,
    ).toBe(422);
    const forkedExtension = await add(w.url, 300, 400, true);
    expect(forkedExtension.status).toBe(422);
    expect(await w.witness.stateOf(ORIGIN)).toMatchObject({ size: 300 });
  });

  it('refuses unknown logs (404), bad signatures (403) and malformed bodies (400), keeping its state', async () => {
    const before = await w.witness.stateOf(ORIGIN);
    const other = new SeedSigner('other.test/log', new Uint8Array(32).fill(9));
    const unknown = await signCheckpoint({ origin: 'other.test/log', size: 1, root: sha256(new Uint8Array(1)) }, other);
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: unknown.note }))).status).toBe(
      404,
    );
    const forged = await checkpointOf(500, false, new SeedSigner(ORIGIN, new Uint8Array(32).fill(2)));
    expect(
      (
        await post(
          w.url,
          formatAddCheckpoint({ oldSize: 300, proof: await consistency(300, 500), checkpoint: forged.note }),
        )
      ).status,
    ).toBe(403);
    const good = (await checkpointOf(500)).note;
    const malformed = [
      '',
      'old 300',
      `old -1\n\n${good}`,
      `old 0300\n\n${good}`,
      `old 300\nnot-base64!\n\n${good}`,
      `old 300\n${Buffer.alloc(31).toString('base64')}\n\n${good}`,
      `old 300\n${'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n'.repeat(64)}\n${good}`,
      `old 300\n\n`,
      `old 300\n\nnot a note`,
      `old 300\n\n${good.replace('\n500\n', '\n5x0\n')}`,
    ];
    for (const body of malformed) expect((await post(w.url, body)).status, JSON.stringify(body.slice(0, 40))).toBe(400);
    expect((await fetch(`${w.url}/add-checkpoint`)).status).toBe(405);
    expect((await fetch(`${w.url}/other`, { method: 'POST' })).status).toBe(404);
    expect(await w.witness.stateOf(ORIGIN)).toEqual(before);
  });

  it('keeps its state across a restart', async () => {
    await w.close();
    w = await startWitness({
      dataDir: dir,
      name: 'w1.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    expect((await add(w.url, 0, 350)).text).toBe('300\n');
    expect((await add(w.url, 300, 350)).status).toBe(200);
  });

  it('never cosigns with a zero timestamp ("the timestamp MUST NOT be zero"), and keeps nothing then', async () => {
    const stopped = new Witness({
      signer: new SeedSigner('w0.test', new Uint8Array(32).fill(4)),
      logs: [logVerifier],
      state: new FsObjectStore(tmp('stele-w0-')),
      now: () => 999,
    });
    await expect(
      stopped.addCheckpoint({ oldSize: 0, proof: [], checkpoint: (await checkpointOf(10)).note }),
    ).rejects.toThrow(/clock is wrong/);
    expect((await stopped.stateOf(ORIGIN)).version).toBeNull();
  });

  it('never moves backwards under concurrent requests', async () => {
    const witness = new Witness({
      signer: new SeedSigner('w2.test', new Uint8Array(32).fill(3)),
      logs: [logVerifier],
      state: new FsObjectStore(tmp('stele-w2-')),
    });
    const sizes = Array.from({ length: 30 }, (_, i) => 10 + i * 7);
    let held = 0;
    for (let round = 0; round < 3; round++) {
      const results = await Promise.allSettled(
        sizes.map(async (n) =>
          witness.addCheckpoint({
            oldSize: held,
            proof: await consistency(held, n),
            checkpoint: (await checkpointOf(n)).note,
          }),
        ),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      expect(ok).toBeGreaterThanOrEqual(1);
      const state = await witness.stateOf(ORIGIN);
      expect(state.size).toBeGreaterThanOrEqual(held);
      held = state.size;
    }
    // Sequential updates from the held size always go forward.
    const max = sizes[sizes.length - 1]!;
    await witness.addCheckpoint({
      oldSize: held,
      proof: await consistency(held, max + 5),
      checkpoint: (await checkpointOf(max + 5)).note,
    });
    expect((await witness.stateOf(ORIGIN)).size).toBe(max + 5);
  });
});

/** A signed note over any body (extension lines allowed), signed by `signer` (the log key by default). */
async function noteOf(body: string, signer = logKey): Promise<string> {
  return `${body}\n${(await signBody(body, signer)).line}`;
}

/** A cosignature line as the witness returns it: "— <name> <base64>\n", one or more. */
const COSIGNATURE_LINES = /^(\u2014 [^\s+]+ [A-Za-z0-9+/]+={0,2}\n)+$/;

describe('tlog-witness status codes of the current text, one case each, over HTTP', () => {
  let w: RunningWitness;
  beforeEach(async () => {
    w = await startWitness({
      dataDir: tmp('stele-codes-'),
      name: 'codes.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
  });
  afterEach(() => w?.close());
  const held = () => w.witness.stateOf(ORIGIN);
  const monitored = (origin = ORIGIN) =>
    fetch(`${w.url}/${createHash('sha256').update(origin).digest('hex')}/checkpoint`);

  it('200: one or more cosignature lines over the whole body, with a non-zero timestamp, persisted before the answer', async () => {
    const r = await add(w.url, 0, 10);
    expect(r.status).toBe(200);
    expect(r.text).toMatch(COSIGNATURE_LINES);
    const opened = openNote((await checkpointOf(10)).note + r.text, logVerifier, [w.verifier]);
    expect(opened.cosignatures[0]!.timestamp).toBeGreaterThan(0);
    expect(await held()).toMatchObject({ size: 10 });
  });

  it('400: an old size above the checkpoint size ("MUST be equal to or lower")', async () => {
    const cp = await checkpointOf(10);
    const r = await post(w.url, formatAddCheckpoint({ oldSize: 11, proof: [], checkpoint: cp.note }));
    expect(r.status).toBe(400);
    expect(r.text).toMatch(/old size 11 exceeds checkpoint size 10/);
    expect((await held()).version).toBeNull();
  });

  it('400: a body outside the request grammar', async () => {
    const r = await post(w.url, `old 00\n\n${(await checkpointOf(10)).note}`);
    expect(r.status).toBe(400);
    expect(r.type).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/\n$/);
  });

  it('403: no signature from a trusted key for the origin (lines under other keys are ignored)', async () => {
    const other = new SeedSigner(ORIGIN, new Uint8Array(32).fill(2)); // same name, another key ID
    const r = await post(
      w.url,
      formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: (await checkpointOf(10, false, other)).note }),
    );
    expect(r.status).toBe(403);
    expect((await held()).version).toBeNull();
  });

  it('403: a valid log signature beside a line under the same key name and ID that fails to verify', async () => {
    const good = (await checkpointOf(10)).note;
    const keyId = Buffer.from(logVerifier.keyHash);
    const bad = `\u2014 ${ORIGIN} ${Buffer.concat([keyId, Buffer.alloc(64, 7)]).toString('base64')}\n`;
    for (const note of [good + bad, good.replace('\n\n', `\n\n${bad}`)]) {
      const r = await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: note }));
      expect(r.status).toBe(403);
      expect(r.text).toMatch(/invalid signature/);
    }
    // The same bytes under an unknown key ID are ignored: cosigned.
    const foreign = `\u2014 ${ORIGIN} ${Buffer.concat([Buffer.alloc(4, 1), Buffer.alloc(64, 7)]).toString('base64')}\n`;
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: good + foreign }))).status).toBe(
      200,
    );
  });

  it('404: an unknown origin', async () => {
    const other = new SeedSigner('other.test/log', new Uint8Array(32).fill(9));
    const unknown = await signCheckpoint({ origin: 'other.test/log', size: 1, root: sha256(new Uint8Array(1)) }, other);
    const r = await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: unknown.note }));
    expect(r.status).toBe(404);
    expect(r.text).toMatch(/unknown log other\.test\/log/);
  });

  it('409: an old size that is not the latest cosigned size, answered with that size as text/x.tlog.size', async () => {
    expect((await add(w.url, 0, 10)).status).toBe(200);
    for (const old of [0, 5]) {
      const r = await add(w.url, old, 20); // 0: the client asking what the witness holds
      expect(r).toEqual({ status: 409, type: SIZE_CONTENT_TYPE, text: '10\n' });
    }
  });

  it("422: a checkpoint of size 0 whose root is not the empty tree's; nothing is stored, and the empty root is cosigned", async () => {
    const bogus = await signCheckpoint({ origin: ORIGIN, size: 0, root: sha256(new Uint8Array([1])) }, logKey);
    const r = await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: bogus.note }));
    expect(r.status).toBe(422);
    expect(r.text).toMatch(/empty-tree root/);
    expect(await held()).toEqual({ size: 0, root: '', version: null });
    const empty = await signCheckpoint({ origin: ORIGIN, size: 0, root: EMPTY_ROOT }, logKey);
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: empty.note }))).status).toBe(
      200,
    );
    expect(await held()).toMatchObject({ size: 0, root: toHex(EMPTY_ROOT) });
  });

  it('422: consistency proof lines after old 0', async () => {
    const r = await post(
      w.url,
      formatAddCheckpoint({ oldSize: 0, proof: await consistency(5, 10), checkpoint: (await checkpointOf(10)).note }),
    );
    expect(r.status).toBe(422);
    expect(r.text).toMatch(/must be empty when the old size is 0/);
    expect((await held()).version).toBeNull();
  });

  it('422: the held size with a different root', async () => {
    expect((await add(w.url, 0, 10)).status).toBe(200);
    const r = await add(w.url, 10, 10, true);
    expect(r.status).toBe(422);
    expect(await held()).toMatchObject({ size: 10, root: toHex((await checkpointOf(10)).root) });
  });

  it('422: a consistency proof that does not verify (and a proof where the sizes are equal)', async () => {
    expect((await add(w.url, 0, 10)).status).toBe(200);
    const cp = await checkpointOf(20);
    const bad = (await consistency(10, 20)).map((h, i) => (i === 0 ? sha256(h) : h));
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 10, proof: bad, checkpoint: cp.note }))).status).toBe(422);
    const same = await checkpointOf(10);
    expect(
      (await post(w.url, formatAddCheckpoint({ oldSize: 10, proof: await consistency(5, 10), checkpoint: same.note })))
        .status,
    ).toBe(422);
    expect(await held()).toMatchObject({ size: 10 });
  });

  it("200 for a checkpoint carrying 16 other signatures of nearly 5 kB (signed-note's minimum), ignored as unknown keys", async () => {
    const others = Array.from(
      { length: 16 },
      (_, i) => `\u2014 other${i}.test ${Buffer.alloc(4 + 4900, i).toString('base64')}\n`,
    ).join('');
    const body = formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: (await checkpointOf(10)).note + others });
    expect(body.length).toBeGreaterThan(100_000);
    const r = await post(w.url, body);
    expect(r.status).toBe(200);
    expect(r.text).toMatch(COSIGNATURE_LINES);
  });

  it('404 for other paths, 405 for other methods', async () => {
    expect((await fetch(`${w.url}/add-checkpoint`)).status).toBe(405);
    expect((await fetch(`${w.url}/add-checkpoint`)).headers.get('allow')).toBe('POST');
    expect((await fetch(`${w.url}/sign-subtree`, { method: 'POST', body: 'subtree 0 1\n' })).status).toBe(404); // OPTIONAL, not offered
    expect((await monitored()).status).toBe(404);
    expect((await fetch((await monitored()).url, { method: 'POST' })).status).toBe(405);
  });

  it('cosigns a checkpoint with extension lines; the cosignature covers them and verifies with src/core/note.ts', async () => {
    const root = toBase64(await treeHash(10, new MemoryHashReader(leaves(10))));
    const body = `${ORIGIN}\n10\n${root}\nextension one\n\u00e9xtension two: opaque\n`;
    const r = await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: await noteOf(body) }));
    expect(r.status).toBe(200);
    const cosigned = `${await noteOf(body)}${r.text}`;
    const opened = openNote(cosigned, logVerifier, [w.verifier]);
    expect(opened.body).toBe(body);
    expect(opened.cosignatures.map((c) => c.verifier.name)).toEqual(['codes.test']);
    // Signed over the whole body: it does not verify over the first three lines alone.
    const bare = `${ORIGIN}\n10\n${root}\n`;
    const bareNote = `${await noteOf(bare)}${r.text}`;
    expect(() => openNote(bareNote, logVerifier, [w.verifier])).toThrow(/invalid signature by codes\.test/);
    // Extensions say nothing of the tree: the same tree with other extension lines is the same checkpoint.
    const again = `${ORIGIN}\n10\n${root}\nanother extension\n`;
    expect(
      (await post(w.url, formatAddCheckpoint({ oldSize: 10, proof: [], checkpoint: await noteOf(again) }))).status,
    ).toBe(200);
    // Extension lines MUST be non-empty (tlog-checkpoint): an empty one is malformed.
    const empty = `${ORIGIN}\n10\n${root}\n\nafter an empty line\n`;
    expect(
      (await post(w.url, formatAddCheckpoint({ oldSize: 10, proof: [], checkpoint: await noteOf(empty) }))).status,
    ).toBe(400);
  });

  it('serves the latest cosigned checkpoint at GET /<hex SHA-256(origin)>/checkpoint, 404 before the first', async () => {
    expect((await monitored()).status).toBe(404);
    expect((await monitored('other.test/log')).status).toBe(404);
    const third = new SeedSigner('third.test', new Uint8Array(32).fill(5)); // a line the witness cannot verify
    const withThird = async (n: number) => {
      const cp = await checkpointOf(n);
      const body = cp.note.slice(0, cp.note.indexOf('\n\n') + 1);
      return cp.note + (await cosignBody(body, third, 1_700_000_000));
    };
    const first = await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: await withThird(10) }));
    expect(first.status).toBe(200);
    let res = await monitored();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const note = await res.text();
    // The log's signature the witness verified and the cosignature it returned; not lines it did not verify.
    expect(note).toBe((await checkpointOf(10)).note + first.text);
    expect(openCheckpoint(note, logVerifier, [w.verifier]).cosignatures).toHaveLength(1);
    // Upper-case hex is not the origin hash.
    expect((await fetch(res.url.replace(/[0-9a-f]{64}/, (h) => h.toUpperCase()))).status).toBe(404);
    // It follows the witness: after the next cosignature, the next checkpoint.
    const next = await add(w.url, 10, 30);
    res = await monitored();
    expect(await res.text()).toBe((await checkpointOf(30)).note + next.text);
    // A refused checkpoint changes nothing.
    await add(w.url, 30, 30, true);
    expect(await (await monitored()).text()).toBe((await checkpointOf(30)).note + next.text);
  });
});

describe('a log witnessed by three witnesses', () => {
  it('publishes checkpoints with three valid cosignatures and reports them', async () => {
    const srv = await startTestServer({ demoWitnesses: 3 });
    try {
      for (let i = 0; i < 5; i++) expect((await postAnchor(srv.url, { digest: digestOf(i) })).status).toBe(201);
      const key = (await getJson(`${srv.url}/api/ledger/key`)).body;
      expect(key.witnesses).toHaveLength(3);
      expect(key.witnessPolicy).toMatchObject({ threshold: 3 });
      expect(key.witnessPolicy.policy).toMatch(/^group quorum all \S+ \S+ \S+\nquorum quorum\n/m);
      const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
      expect(cp.witnesses).toHaveLength(3);
      const { parseVkey } = await import('../../src/core/note.js');
      const opened = openCheckpoint(
        cp.note,
        parseVkey(srv.vkey),
        key.witnesses.map((w: { vkey: string }) => parseVkey(w.vkey)),
      );
      expect(opened.cosignatures).toHaveLength(3);
      expect(await (await fetch(`${srv.url}/checkpoint`)).text()).toBe(cp.note);
    } finally {
      await srv.close();
    }
  });

  it('waits while the policy is unmet and publishes once a witness returns', async () => {
    const dirs = [tmp('stele-ws-'), tmp('stele-ws-'), tmp('stele-ws-')];
    const dataDir = tmp('stele-wlog-');
    // The witnesses must know the log key before the log starts: create it first.
    const { loadOrCreateKey } = await import('../../src/keys/local-signer.js');
    const { localPaths } = await import('../../src/serve/local-log.js');
    const { signer } = await loadOrCreateKey(localPaths(dataDir).keyFile, 'api.test/log');
    const verifier = makeVerifier('api.test/log', SIG_ED25519, signer.publicKey);
    const start = (i: number, port = 0) =>
      startWitness({
        dataDir: dirs[i]!,
        name: `ext${i}.test`,
        logs: [verifier],
        host: '127.0.0.1',
        port,
        logger: silent,
      });
    const ws = await Promise.all([0, 1, 2].map((i) => start(i)));
    const srv = await startTestServer({
      dataDir,
      witnesses: ws.map((w) => `${w.vkey}=${w.url}`).join(','),
      witnessThreshold: 3,
    });
    try {
      expect((await postAnchor(srv.url, { digest: digestOf(1) })).status).toBe(201);
      const port = Number(new URL(ws[2]!.url).port);
      await ws[2]!.close();
      const pending = postAnchor(srv.url, { digest: digestOf(2) });
      await new Promise((r) => setTimeout(r, 400));
      const mid = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
      expect(mid.treeSize).toBe(1); // not published without the third cosignature
      expect(mid.lifetimeEntries).toBe(2);
      ws[2] = await start(2, port);
      const done = await pending;
      expect(done.status).toBe(201);
      expect(done.body.checkpoint.witnesses).toHaveLength(3);
    } finally {
      await srv.close();
      await Promise.all(ws.map((w) => w.close()));
    }
  });
});

describe('split view', () => {
  it('a witness refuses the second of two checkpoints for one size, and the fork is detectable', async () => {
    const w = await startWitness({
      dataDir: tmp('stele-split-'),
      name: 'w3.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    try {
      const collector = new WitnessCollector({ witnesses: [{ verifier: w.verifier, url: w.url }], threshold: 1 });
      const honest = await checkpointOf(64);
      const noteA = await collector.cosign(honest, (old) => consistency(old, 64));
      expect(noteA).not.toBeNull();
      // The log shows another client a different tree of the same size: the witness refuses.
      const evil = await checkpointOf(64, true);
      expect(await collector.cosign(evil, (old) => consistency(old, 64, true))).toBeNull();
      expect(collector.lastRound[0]!.reason).toMatch(/different root/);
      // A rollback to an older size is refused too, as a rollback.
      await expect(collector.cosign(await checkpointOf(32), (old) => consistency(old, 32))).rejects.toThrow(
        WitnessRollbackError,
      );
      // A client holding the cosigned checkpoint sees the same size with another root: a fork.
      const a = openCheckpoint(noteA!, logVerifier, [w.verifier]);
      const b = openCheckpoint(evil.note, logVerifier, [w.verifier]);
      expect(a.size).toBe(b.size);
      expect(Buffer.from(a.root).equals(Buffer.from(b.root))).toBe(false);
      expect(a.cosignatures).toHaveLength(1);
      expect(b.cosignatures).toHaveLength(0);
    } finally {
      await w.close();
    }
  });
});

/**
 * A witness speaking tlog-witness v1.0.0 in front of a current one: v1.0.0 answered another
 * root at the held size with 409 and the held size, where the current text answers 422.
 */
async function v1Witness(inner: RunningWitness): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const r = await post(inner.url, body);
      const old = Number(/^old (\d+)\n/.exec(body)?.[1]);
      const size = Number(body.slice(body.indexOf('\n\n') + 2).split('\n')[1]);
      if (r.status === 422 && old === size) {
        res.writeHead(409, { 'Content-Type': SIZE_CONTENT_TYPE }).end(`${old}\n`);
      } else {
        res.writeHead(r.status, { 'Content-Type': r.type }).end(r.text);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the collector with current and v1.0.0 witnesses', () => {
  it('reads another root at the held size the same way from both (422 now, 409 with that size in v1.0.0)', async () => {
    const current = await startWitness({
      dataDir: tmp('stele-cur-'),
      name: 'current.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    const inner = await startWitness({
      dataDir: tmp('stele-v1-'),
      name: 'v1.test',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    const old = await v1Witness(inner);
    try {
      const collector = new WitnessCollector({
        witnesses: [
          { verifier: current.verifier, url: current.url },
          { verifier: inner.verifier, url: old.url },
        ],
        threshold: 2,
      });
      expect(await collector.cosign(await checkpointOf(64), (o) => consistency(o, 64))).not.toBeNull();
      expect(await collector.cosign(await checkpointOf(64, true), (o) => consistency(o, 64, true))).toBeNull();
      const reason = 'witness refused size 64: it cosigned a different root';
      expect(collector.lastRound).toEqual([
        { name: 'current.test', ok: false, reason },
        { name: 'v1.test', ok: false, reason },
      ]);
      // At start-up both are seen as forked, and both still take the honest log forward.
      const probe = new WitnessCollector({
        witnesses: [
          { verifier: current.verifier, url: current.url },
          { verifier: inner.verifier, url: old.url },
        ],
        threshold: 2,
      });
      expect((await probe.checkWitnessedSizes(await checkpointOf(64, true))).map((f) => f.status)).toEqual([
        'forked',
        'forked',
      ]);
      expect(await probe.cosign(await checkpointOf(80), (o) => consistency(o, 80))).not.toBeNull();
    } finally {
      await Promise.all([current.close(), old.close(), inner.close()]);
    }
  });
});

describe('a witness that cosigned a larger tree', () => {
  const start = (name: string) =>
    startWitness({ dataDir: tmp('stele-rb-'), name, logs: [logVerifier], host: '127.0.0.1', port: 0, logger: silent });
  const collectorOf = (...ws: RunningWitness[]) =>
    new WitnessCollector({ witnesses: ws.map((w) => ({ verifier: w.verifier, url: w.url })), threshold: 1 });

  it('makes cosign throw WitnessRollbackError naming the witness and both sizes, not fail the round', async () => {
    const [seen, fresh] = [await start('seen.test'), await start('fresh.test')];
    try {
      expect(await collectorOf(seen).cosign(await checkpointOf(64), (old) => consistency(old, 64))).not.toBeNull();
      // The log restarts from an old lock (a fresh collector knows no sizes) and presents size 40.
      const restarted = collectorOf(fresh, seen);
      const err = await restarted
        .cosign(await checkpointOf(40), (old) => consistency(old, 40))
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(WitnessRollbackError);
      expect(err).toMatchObject({ witness: 'seen.test', witnessSize: 64, logSize: 40 });
      expect((err as Error).message).toMatch(/seen\.test.*64.*40/);
      // Nothing moved backwards at the witness that had seen more.
      expect(await seen.witness.stateOf(ORIGIN)).toMatchObject({ size: 64 });
      // A collector that already knew the witness's size detects it the same way.
      const running = collectorOf(seen);
      await running.cosign(await checkpointOf(64), (old) => consistency(old, 64));
      await expect(running.cosign(await checkpointOf(63), (old) => consistency(old, 63))).rejects.toMatchObject({
        witnessSize: 64,
        logSize: 63,
      });
      // A consistent larger checkpoint is cosigned as before.
      expect(await running.cosign(await checkpointOf(70), (old) => consistency(old, 70))).not.toBeNull();
    } finally {
      await Promise.all([seen.close(), fresh.close()]);
    }
  });

  it('is found at start-up by checkWitnessedSizes, which moves no witness', async () => {
    const [seen, fresh] = [await start('seen2.test'), await start('fresh2.test')];
    try {
      await collectorOf(seen).cosign(await checkpointOf(64), (old) => consistency(old, 64));
      const before = await seen.witness.stateOf(ORIGIN);
      // Into the next second: a witness that cosigned its held checkpoint again would now
      // store a cosignature with another time.
      await new Promise((r) => setTimeout(r, 1005 - (Date.now() % 1000)));
      const probe = collectorOf(seen, fresh);
      // A log restored to size 40: refused.
      await expect(probe.checkWitnessedSizes(await checkpointOf(40))).rejects.toMatchObject({
        name: 'WitnessRollbackError',
        witness: 'seen2.test',
        witnessSize: 64,
        logSize: 40,
      });
      // The log at the witnessed size, or beyond it: what each holds, and nobody moved.
      expect(await probe.checkWitnessedSizes(await checkpointOf(64))).toEqual([
        { name: 'seen2.test', status: 'same', size: 64 },
        { name: 'fresh2.test', status: 'behind', size: 0 },
      ]);
      expect(await probe.checkWitnessedSizes(await checkpointOf(100))).toEqual([
        { name: 'seen2.test', status: 'behind', size: 64 },
        { name: 'fresh2.test', status: 'behind', size: 0 },
      ]);
      expect((await probe.checkWitnessedSizes(await checkpointOf(64, true)))[0]).toMatchObject({
        status: 'forked',
        size: 64,
      });
      expect(await seen.witness.stateOf(ORIGIN)).toEqual(before);
      expect(await fresh.witness.stateOf(ORIGIN)).toEqual({ size: 0, root: '', version: null });
      // A log started again from nothing (a lost lock): refused too. (A witness that never saw
      // the log may cosign the empty tree here, which commits it to nothing.)
      await expect(probe.checkWitnessedSizes(await checkpointOf(0))).rejects.toMatchObject({
        witnessSize: 64,
        logSize: 0,
      });
      expect(await seen.witness.stateOf(ORIGIN)).toEqual(before);
      expect(await fresh.witness.stateOf(ORIGIN)).toMatchObject({ size: 0 });
      // The sizes learnt serve the next round: the log publishes size 100 at once.
      expect(await probe.cosign(await checkpointOf(100), (old) => consistency(old, 100))).not.toBeNull();
      expect(probe.lastRound).toEqual([
        { name: 'seen2.test', ok: true },
        { name: 'fresh2.test', ok: true },
      ]);
    } finally {
      await Promise.all([seen.close(), fresh.close()]);
    }
  });
});
