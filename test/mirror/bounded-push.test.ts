// The mirror push is bounded (issue 31): a real mirror over HTTP, behind a proxy on a real
// socket that counts the requests it gets. A mirror that holds a larger tree of the log than
// the checkpoint pushed (a log restored from an old backup) is a rollback, reported at once
// and never retried; a mirror whose next entry never moves gets a few requests, each after a
// longer pause, not a request per millisecond until the round's deadline.
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signCheckpoint } from '../../src/core/checkpoint.js';
import { leafHash, sha256 } from '../../src/core/hash.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../../src/core/merkle.js';
import { SIG_ED25519, SeedSigner, makeVerifier } from '../../src/core/note.js';
import { proveSubtree } from '../../src/core/subtree.js';
import { type LogData, MirrorClient } from '../../src/mirror/client.js';
import { type RunningMirror, startMirror } from '../../src/mirror/host.js';
import { MIRROR_INFO_CONTENT_TYPE, formatMirrorInfo } from '../../src/mirror/protocol.js';
import { WitnessRollbackError } from '../../src/witness/collector.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'bounded.test/log';
const logKey = new SeedSigner(ORIGIN, new Uint8Array(32).fill(41));
const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, logKey.publicKey);
const ENTRIES = Array.from({ length: 40 }, (_, i) => sha256(new TextEncoder().encode(`entry ${i}`)));

async function logAt(size: number): Promise<{ note: string; data: LogData }> {
  const reader = new MemoryHashReader(ENTRIES.slice(0, size).map((e) => leafHash(e)));
  const { note } = await signCheckpoint({ origin: ORIGIN, size, root: await treeHash(size, reader) }, logKey);
  return {
    note,
    data: {
      size,
      entries: async (s, e) => ENTRIES.slice(s, e),
      subtreeProof: (s, e) => proveSubtree(s, e, size, reader),
      consistencyProof: (old) => proveConsistency(old, size, reader),
      rootAt: (n) => treeHash(n, reader),
    },
  };
}

/** A proxy in front of `target` counting requests by path; `answer` may answer one itself. */
async function countingProxy(
  target: () => string,
  answer?: (path: string, res: ServerResponse) => boolean,
): Promise<{ url: string; counts: Map<string, number>; server: Server }> {
  const counts = new Map<string, number>();
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = req.url ?? '/';
    counts.set(path, (counts.get(path) ?? 0) + 1);
    if (answer?.(path, res)) return;
    const headers: Record<string, string> = {};
    for (const h of ['content-type', 'content-encoding'])
      if (typeof req.headers[h] === 'string') headers[h] = req.headers[h] as string;
    const r = await fetch(`${target()}${path}`, {
      method: req.method ?? 'GET',
      headers,
      ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    });
    res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'text/plain' });
    res.end(Buffer.from(await r.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, counts, server };
}

const total = (counts: Map<string, number>) => [...counts.values()].reduce((a, b) => a + b, 0);

describe('a bounded mirror push', () => {
  let mirror: RunningMirror;
  const servers: Server[] = [];

  beforeAll(async () => {
    mirror = await startMirror({
      dataDir: scratchDir('stele-bounded-'),
      name: 'mirror.test/bounded',
      logs: [{ verifier: logVerifier }],
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
      fsync: false,
    });
  });
  afterAll(async () => {
    for (const s of servers) s.close();
    await mirror?.close();
  });

  it('reports a mirror holding size 30 as a rollback of a log pushing size 20, in one request, without retrying', async () => {
    const at30 = await logAt(30);
    await new MirrorClient({ verifier: mirror.verifier, url: mirror.url }).push(at30.note, at30.data);
    const proxy = await countingProxy(() => mirror.url);
    servers.push(proxy.server);
    // The log restarted from a backup at size 20: a fresh client, as after a restart.
    const restored = new MirrorClient({ verifier: mirror.verifier, url: proxy.url }, { logKey: logVerifier });
    const at20 = await logAt(20);
    const err = await restored.push(at20.note, at20.data, AbortSignal.timeout(5_000)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WitnessRollbackError);
    expect(err).toMatchObject({ witness: 'mirror.test/bounded', witnessSize: 30, logSize: 20, role: 'mirror' });
    expect((err as Error).message).toMatch(
      /^mirror mirror\.test\/bounded has seen size 30 of this log, more than .* size 20/,
    );
    expect(total(proxy.counts)).toBeLessThanOrEqual(3);
    expect(proxy.counts.get('/add-entries') ?? 0).toBe(0);
  });

  it('finds a log that grew another tree past the mirror copy by the copy it serves (a fork is a rollback too)', async () => {
    // The mirror's copy is at 30; a log at 35 whose entry 25 differs signed its own size 30 before.
    const forked = ENTRIES.map((e, i) => (i === 25 ? sha256(new TextEncoder().encode('other')) : e));
    const reader = new MemoryHashReader(forked.slice(0, 35).map((e) => leafHash(e)));
    const { note } = await signCheckpoint({ origin: ORIGIN, size: 35, root: await treeHash(35, reader) }, logKey);
    const data: LogData = {
      size: 35,
      entries: async (s, e) => forked.slice(s, e),
      subtreeProof: (s, e) => proveSubtree(s, e, 35, reader),
      consistencyProof: (old) => proveConsistency(old, 35, reader),
      rootAt: (n) => treeHash(n, reader),
    };
    const client = new MirrorClient({ verifier: mirror.verifier, url: mirror.url }, { logKey: logVerifier });
    await expect(client.push(note, data, AbortSignal.timeout(5_000))).rejects.toMatchObject({
      name: 'WitnessRollbackError',
      role: 'mirror',
      forked: true,
      witnessSize: 30,
      logSize: 35,
    });
  });

  it('gives up on a mirror whose next entry never moves after a few requests, each after a longer pause', async () => {
    const at20 = await logAt(20);
    // A mirror that takes the checkpoint and then answers every upload "202, next entry 0".
    const stuck = await countingProxy(
      () => mirror.url,
      (path, res) => {
        if (path === '/add-checkpoint') res.writeHead(200, { 'content-type': 'text/plain' }).end('');
        else
          res
            .writeHead(202, { 'content-type': MIRROR_INFO_CONTENT_TYPE })
            .end(formatMirrorInfo({ size: 20, next: 0, ticket: new Uint8Array(0) }));
        return true;
      },
    );
    servers.push(stuck.server);
    const started = Date.now();
    await expect(
      new MirrorClient({ verifier: mirror.verifier, url: stuck.url }).push(
        at20.note,
        at20.data,
        AbortSignal.timeout(10_000),
      ),
    ).rejects.toThrow(/without progress at entry 0/);
    expect(stuck.counts.get('/add-entries')).toBe(3);
    expect(total(stuck.counts)).toBeLessThanOrEqual(4);
    // Two pauses between the three uploads: at least 100 ms and then 200 ms (half of each doubling step).
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });
});
