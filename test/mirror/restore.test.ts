// A data directory restored from a backup when the only outside party is a mirror (issue 31),
// with `stele serve` and `stele mirror serve` as subprocesses: the mirror (quorum 0) saw size
// 30; the restored log is at 20. Started with the mirror up, serve refuses (exit 4, one line
// naming the mirror and both sizes) and signs nothing; started while the mirror is down, it
// stops (exit 4) as soon as a push meets the mirror again; in process, /readyz then says 503
// and why. With one mirror cosignature required the same start is refused, and a log started
// while the mirror is down publishes nothing and stops once its round meets the mirror.
import { cp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { originHash } from '../../src/witness/protocol.js';
import { startTestServer } from '../api/server.js';
import { writeTestKey } from '../helpers/audit.js';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { digestOf } from '../helpers/logs.js';
import { freePort } from '../helpers/ports.js';
import { type RunningMirrorCli, startMirrorCli } from './mirror-cli.js';

const ORIGIN = 'restore.test/log';
const vkeyOf = (origin: string, fill: number) =>
  formatVkey(makeVerifier(origin, SIG_ED25519, new SeedSigner(origin, new Uint8Array(32).fill(fill)).publicKey));
const logVkey = vkeyOf(ORIGIN, 37);
/** What stops a running log once a push meets the mirror: its size 30, or (the log grew past 30 first) its other root at 30. */
const MET_MIRROR =
  'mirror mirror\\.test/m1 (has seen size 30 of this log|holds a checkpoint of size 30 signed by this log with another root)';

async function anchor(url: string, from: number, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, (_, i) => anchorOne(url, from + i)));
}

async function anchorOne(url: string, i: number): Promise<void> {
  const res = await fetch(`${url}/api/ledger/anchor`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ digest: digestOf('restore', i) }),
  });
  if (res.status !== 201) throw new Error(`anchor ${i}: HTTP ${res.status} ${await res.text()}`);
}

async function sizeAt(url: string): Promise<number> {
  const res = await fetch(url).catch(() => null);
  if (res?.status !== 200) return -1;
  return Number((await res.text()).split('\n')[1]);
}

async function until(what: string, cond: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a restored data directory whose only outside party is a mirror', () => {
  const sb = new Sandbox('stele-mirror-restore-');
  const dataDir = join(sb.root, 'log');
  const backup = join(sb.root, 'log-backup');
  const mirrorDir = join(sb.root, 'mirror');
  let logPort: number;
  let mirrorPort: number;
  let mirror: RunningMirrorCli;
  let mirrorSpec: string;
  const copy = () => `http://127.0.0.1:${mirrorPort}/${originHash(ORIGIN)}/checkpoint`;
  const serveArgs = () => ['--port', String(logPort), '--mirror', mirrorSpec];

  beforeAll(async () => {
    await ensureBuilt();
    await writeTestKey(dataDir, ORIGIN, 37);
    [logPort, mirrorPort] = [await freePort(), await freePort()];
    mirror = await startMirrorCli(mirrorDir, mirrorPort, `${logVkey}=http://127.0.0.1:${logPort}`);
    mirrorSpec = `${mirror.vkey}=${mirror.url}`;

    // Anchor 20, stop, keep a copy of the whole directory; anchor 10 more (the mirror sees 30), stop.
    let log: RunningServe = await startServe({ dataDir, origin: ORIGIN, args: serveArgs() });
    await anchor(log.url, 0, 20);
    await until('the mirror at 20', async () => (await sizeAt(copy())) === 20);
    await log.stop();
    await cp(dataDir, backup, { recursive: true });
    log = await startServe({ dataDir, origin: ORIGIN, args: serveArgs() });
    await anchor(log.url, 20, 10);
    await until('the mirror at 30', async () => (await sizeAt(copy())) === 30);
    await log.stop();
    await rm(dataDir, { recursive: true });
    await cp(backup, dataDir, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    await mirror?.stop();
    sb.cleanup();
  });

  it('refuses to start (exit 4) naming the mirror and both sizes, and signs nothing beyond 20', async () => {
    const lockBefore = await readFile(join(dataDir, 'private', 'lock.json'), 'utf8');
    const r = await sb.run(['serve', '--data-dir', dataDir, '--origin', ORIGIN, '--host', '127.0.0.1', ...serveArgs()]);
    expect(r.code, r.stderr).toBe(4);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^stele: mirror mirror\.test\/m1 has seen size 30 of this log, more than the checkpoint of size 20 now presented/,
    );
    // Nothing signed beyond 20: the published checkpoint and the lock are as restored.
    expect((await readFile(join(dataDir, 'log', 'checkpoint'), 'utf8')).split('\n')[1]).toBe('20');
    expect(await readFile(join(dataDir, 'private', 'lock.json'), 'utf8')).toBe(lockBefore);
    expect(await sizeAt(copy())).toBe(30);
  }, 60_000);

  it('started while the mirror is down, stops (exit 4) once a push meets the mirror again', async () => {
    await mirror.stop();
    const log = await startServe({ dataDir, origin: ORIGIN, args: serveArgs() });
    let stderr = '';
    log.proc.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => log.proc.once('exit', (code) => r(code)));
    try {
      // The fork a log cannot see while its only outside party is away (a pinned client or `stele monitor` would).
      await anchor(log.url, 100, 3);
      mirror = await startMirrorCli(mirrorDir, mirrorPort, `${logVkey}=http://127.0.0.1:${logPort}`);
      // Each publish pushes (after a failed push, a mirror is retried with a growing pause).
      const deadline = Date.now() + 30_000;
      while (log.proc.exitCode === null && Date.now() < deadline) {
        await fetch(`${log.url}/api/ledger/anchor`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ digest: digestOf('restore-more', Date.now()) }),
        }).catch(() => null);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 5_000))]), stderr).toBe(4);
      expect(stderr).toMatch(new RegExp(`stele: the log stopped: ${MET_MIRROR}`));
      // The mirror kept what it had: its copy never moved back or forked.
      expect(await sizeAt(copy())).toBe(30);
    } finally {
      await log.stop();
    }
  }, 90_000);

  it('in process: /readyz answers 503 naming the mirror once a push meets it, and the log stops', async () => {
    await mirror.stop();
    await rm(dataDir, { recursive: true });
    await cp(backup, dataDir, { recursive: true });
    const server = await startTestServer({ dataDir, origin: ORIGIN, port: logPort, mirrors: mirrorSpec });
    try {
      await anchor(server.url, 200, 3);
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
      mirror = await startMirrorCli(mirrorDir, mirrorPort, `${logVkey}=http://127.0.0.1:${logPort}`);
      const stopped = await new Promise<Error | null>((resolve) => {
        const deadline = Date.now() + 30_000;
        server.stopped.then(resolve, () => resolve(null));
        const poke = async () => {
          if (Date.now() > deadline) return resolve(null);
          await fetch(`${server.url}/api/ledger/anchor`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ digest: digestOf('restore-in-process', Date.now()) }),
          }).catch(() => null);
          setTimeout(poke, 200);
        };
        void poke();
      });
      expect(stopped?.message).toMatch(new RegExp(`^${MET_MIRROR}`));
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { reason: string }).reason).toMatch(
        new RegExp(`sequencer stopped: ${MET_MIRROR}`),
      );
    } finally {
      await server.close();
    }
  }, 90_000);
});

describe('a restored data directory whose mirror is required (--mirror-quorum 1)', () => {
  const origin = 'restore-quorum.test/log';
  const vkey = vkeyOf(origin, 47);
  const sb = new Sandbox('stele-mirror-restore-q-');
  const dataDir = join(sb.root, 'log');
  const backup = join(sb.root, 'log-backup');
  const mirrorDir = join(sb.root, 'mirror');
  let logPort: number;
  let mirrorPort: number;
  let mirror: RunningMirrorCli;
  let mirrorSpec: string;
  const copy = () => `http://127.0.0.1:${mirrorPort}/${originHash(origin)}/checkpoint`;
  const serveArgs = () => [
    '--port',
    String(logPort),
    '--mirror',
    mirrorSpec,
    '--mirror-quorum',
    '1',
    '--mirror-timeout',
    '2000',
    '--anchor-timeout',
    '1500',
  ];
  const published = async () => (await readFile(join(dataDir, 'log', 'checkpoint'), 'utf8')).split('\n')[1];

  beforeAll(async () => {
    await ensureBuilt();
    await writeTestKey(dataDir, origin, 47);
    [logPort, mirrorPort] = [await freePort(), await freePort()];
    mirror = await startMirrorCli(mirrorDir, mirrorPort, `${vkey}=http://127.0.0.1:${logPort}`);
    mirrorSpec = `${mirror.vkey}=${mirror.url}`;
    let log: RunningServe = await startServe({ dataDir, origin, args: serveArgs() });
    await anchor(log.url, 0, 20);
    await log.stop();
    await cp(dataDir, backup, { recursive: true });
    log = await startServe({ dataDir, origin, args: serveArgs() });
    await anchor(log.url, 20, 10);
    await log.stop();
    expect(await sizeAt(copy())).toBe(30);
    await rm(dataDir, { recursive: true });
    await cp(backup, dataDir, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    await mirror?.stop();
    sb.cleanup();
  });

  it('refuses to start (exit 4), naming the mirror and both sizes', async () => {
    const r = await sb.run(['serve', '--data-dir', dataDir, '--origin', origin, '--host', '127.0.0.1', ...serveArgs()]);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^stele: mirror mirror\.test\/m1 has seen size 30 of this log, more than .* size 20 /);
    expect(await published()).toBe('20');
  }, 60_000);

  it('started while the mirror is down, publishes nothing, and stops (exit 4) when its round meets the mirror', async () => {
    await mirror.stop();
    const log = await startServe({ dataDir, origin, args: serveArgs() });
    let stderr = '';
    log.proc.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => log.proc.once('exit', (code) => r(code)));
    try {
      const res = await fetch(`${log.url}/api/ledger/anchor`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ digest: digestOf('restore-quorum', 1) }),
      });
      expect(res.status).toBe(503);
      expect(await published()).toBe('20');
      mirror = await startMirrorCli(mirrorDir, mirrorPort, `${vkey}=http://127.0.0.1:${logPort}`);
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 30_000))]);
      expect(code, stderr).toBe(4);
      expect(stderr).toMatch(/stele: the log stopped: mirror mirror\.test\/m1 has seen size 30 of this log/);
      // The anchor committed at 21 was never published: no fork reached anyone.
      expect(await published()).toBe('20');
      expect(await sizeAt(copy())).toBe(30);
    } finally {
      await log.stop();
    }
  }, 90_000);
});
