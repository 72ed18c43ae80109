// Witnesses: the tlog-witness add-checkpoint protocol (statuses, durable and monotonic
// state), a log collecting cosignatures from three witnesses, split-view detection, and a
// witness that cosigned a larger tree stopping a rolled-back log.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCheckpoint, signCheckpoint } from '../src/checkpoint.js';
import { leafHash, sha256 } from '../src/hash.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../src/merkle.js';
import { SIG_ED25519, SeedSigner, makeVerifier, openNote } from '../src/note.js';
import { FsObjectStore } from '../src/store/fs.js';
import { WitnessCollector, WitnessRollbackError } from '../src/witness/collector.js';
import { type RunningWitness, startWitness } from '../src/witness/host.js';
import { SIZE_CONTENT_TYPE, formatAddCheckpoint } from '../src/witness/protocol.js';
import { Witness } from '../src/witness/witness.js';
import { digestOf, getJson, postAnchor, startTestServer } from './api/server.js';
import { scratchDir } from './helpers/tmp.js';

const ORIGIN = 'witness.test/log';
const logKey = new SeedSigner(ORIGIN, new Uint8Array(32).fill(1));
const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, logKey.publicKey);
const silent = pino({ level: 'silent' });
const tmp = (p: string) => scratchDir(p);

/** A tree of n leaves; `fork` changes one leaf so the same size has another root. */
function leaves(n: number, fork = false): Uint8Array[] {
  return Array.from({ length: n }, (_, i) => leafHash(sha256(new Uint8Array([i & 255, i >> 8, fork && i === 0 ? 1 : 0]))));
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
    w = await startWitness({ dataDir: dir, name: 'w1.test', logs: [logVerifier], host: '127.0.0.1', port: 0, logger: silent });
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
    expect(fork.status).toBe(409);
    const older = await checkpointOf(200);
    const rollback = await post(w.url, formatAddCheckpoint({ oldSize: 300, proof: [], checkpoint: older.note }));
    expect(rollback.status).toBe(400);
    const cp = await checkpointOf(400);
    const badProof = (await consistency(300, 400)).map((h, i) => (i === 0 ? sha256(h) : h));
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 300, proof: badProof, checkpoint: cp.note }))).status).toBe(422);
    const forkedExtension = await add(w.url, 300, 400, true);
    expect(forkedExtension.status).toBe(422);
    expect(await w.witness.stateOf(ORIGIN)).toMatchObject({ size: 300 });
  });

  it('refuses unknown logs (404), bad signatures (403) and malformed bodies (400), keeping its state', async () => {
    const before = await w.witness.stateOf(ORIGIN);
    const other = new SeedSigner('other.test/log', new Uint8Array(32).fill(9));
    const unknown = await signCheckpoint({ origin: 'other.test/log', size: 1, root: sha256(new Uint8Array(1)) }, other);
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 0, proof: [], checkpoint: unknown.note }))).status).toBe(404);
    const forged = await checkpointOf(500, false, new SeedSigner(ORIGIN, new Uint8Array(32).fill(2)));
    expect((await post(w.url, formatAddCheckpoint({ oldSize: 300, proof: await consistency(300, 500), checkpoint: forged.note }))).status).toBe(403);
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
      `old 0\n${Buffer.alloc(32).toString('base64')}\n\n${good}`,
    ];
    for (const body of malformed) expect((await post(w.url, body)).status, JSON.stringify(body.slice(0, 40))).toBe(400);
    expect((await fetch(`${w.url}/add-checkpoint`)).status).toBe(405);
    expect((await fetch(`${w.url}/other`, { method: 'POST' })).status).toBe(404);
    expect(await w.witness.stateOf(ORIGIN)).toEqual(before);
  });

  it('keeps its state across a restart', async () => {
    await w.close();
    w = await startWitness({ dataDir: dir, name: 'w1.test', logs: [logVerifier], host: '127.0.0.1', port: 0, logger: silent });
    expect((await add(w.url, 0, 350)).text).toBe('300\n');
    expect((await add(w.url, 300, 350)).status).toBe(200);
  });

  it('never moves backwards under concurrent requests', async () => {
    const witness = new Witness({ signer: new SeedSigner('w2.test', new Uint8Array(32).fill(3)), logs: [logVerifier], state: new FsObjectStore(tmp('stele-w2-')) });
    const sizes = Array.from({ length: 30 }, (_, i) => 10 + i * 7);
    let held = 0;
    for (let round = 0; round < 3; round++) {
      const results = await Promise.allSettled(
        sizes.map(async (n) => witness.addCheckpoint({ oldSize: held, proof: await consistency(held, n), checkpoint: (await checkpointOf(n)).note })),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      expect(ok).toBeGreaterThanOrEqual(1);
      const state = await witness.stateOf(ORIGIN);
      expect(state.size).toBeGreaterThanOrEqual(held);
      held = state.size;
    }
    // Sequential updates from the held size always go forward.
    const max = sizes[sizes.length - 1]!;
    await witness.addCheckpoint({ oldSize: held, proof: await consistency(held, max + 5), checkpoint: (await checkpointOf(max + 5)).note });
    expect((await witness.stateOf(ORIGIN)).size).toBe(max + 5);
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
      const { parseVkey } = await import('../src/note.js');
      const opened = openCheckpoint(cp.note, parseVkey(srv.vkey), key.witnesses.map((w: { vkey: string }) => parseVkey(w.vkey)));
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
    const { loadOrCreateKey } = await import('../src/signer.js');
    const { localPaths } = await import('../src/log/local.js');
    const { signer } = await loadOrCreateKey(localPaths(dataDir).keyFile, 'api.test/log');
    const verifier = makeVerifier('api.test/log', SIG_ED25519, signer.publicKey);
    const start = (i: number, port = 0) => startWitness({ dataDir: dirs[i]!, name: `ext${i}.test`, logs: [verifier], host: '127.0.0.1', port, logger: silent });
    const ws = await Promise.all([0, 1, 2].map((i) => start(i)));
    const srv = await startTestServer({ dataDir, witnesses: ws.map((w) => `${w.vkey}=${w.url}`).join(','), witnessThreshold: 3 });
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
    const w = await startWitness({ dataDir: tmp('stele-split-'), name: 'w3.test', logs: [logVerifier], host: '127.0.0.1', port: 0, logger: silent });
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
      await expect(collector.cosign(await checkpointOf(32), (old) => consistency(old, 32))).rejects.toThrow(WitnessRollbackError);
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


describe('a witness that cosigned a larger tree', () => {
  const start = (name: string) => startWitness({ dataDir: tmp('stele-rb-'), name, logs: [logVerifier], host: '127.0.0.1', port: 0, logger: silent });
  const collectorOf = (...ws: RunningWitness[]) => new WitnessCollector({ witnesses: ws.map((w) => ({ verifier: w.verifier, url: w.url })), threshold: 1 });

  it('makes cosign throw WitnessRollbackError naming the witness and both sizes, not fail the round', async () => {
    const [seen, fresh] = [await start('seen.test'), await start('fresh.test')];
    try {
      expect(await collectorOf(seen).cosign(await checkpointOf(64), (old) => consistency(old, 64))).not.toBeNull();
      // The log restarts from an old lock (a fresh collector knows no sizes) and presents size 40.
      const restarted = collectorOf(fresh, seen);
      const err = await restarted.cosign(await checkpointOf(40), (old) => consistency(old, 40)).then(
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
      await expect(running.cosign(await checkpointOf(63), (old) => consistency(old, 63))).rejects.toMatchObject({ witnessSize: 64, logSize: 63 });
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
      const probe = collectorOf(seen, fresh);
      // A log restored to size 40: refused.
      await expect(probe.checkWitnessedSizes(await checkpointOf(40))).rejects.toMatchObject({ name: 'WitnessRollbackError', witness: 'seen2.test', witnessSize: 64, logSize: 40 });
      // The log at the witnessed size, or beyond it: what each holds, and nobody moved.
      expect(await probe.checkWitnessedSizes(await checkpointOf(64))).toEqual([
        { name: 'seen2.test', status: 'same', size: 64 },
        { name: 'fresh2.test', status: 'behind', size: 0 },
      ]);
      expect(await probe.checkWitnessedSizes(await checkpointOf(100))).toEqual([
        { name: 'seen2.test', status: 'behind', size: 64 },
        { name: 'fresh2.test', status: 'behind', size: 0 },
      ]);
      expect((await probe.checkWitnessedSizes(await checkpointOf(64, true)))[0]).toMatchObject({ status: 'forked', size: 64 });
      expect(await seen.witness.stateOf(ORIGIN)).toEqual(before);
      expect(await fresh.witness.stateOf(ORIGIN)).toEqual({ size: 0, root: '', version: null });
      // A log started again from nothing (a lost lock): refused too. (A witness that never saw
      // the log may cosign the empty tree here, which commits it to nothing.)
      await expect(probe.checkWitnessedSizes(await checkpointOf(0))).rejects.toMatchObject({ witnessSize: 64, logSize: 0 });
      expect(await seen.witness.stateOf(ORIGIN)).toEqual(before);
      expect(await fresh.witness.stateOf(ORIGIN)).toMatchObject({ size: 0 });
      // The sizes learnt serve the next round: the log publishes size 100 at once.
      expect(await probe.cosign(await checkpointOf(100), (old) => consistency(old, 100))).not.toBeNull();
      expect(probe.lastRound).toEqual([{ name: 'seen2.test', ok: true }, { name: 'fresh2.test', ok: true }]);
    } finally {
      await Promise.all([seen.close(), fresh.close()]);
    }
  });
});
