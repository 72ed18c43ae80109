// A Stele log pushing to a Stele mirror, both as CLI subprocesses over HTTP: the mirror's
// copy (served under /<hex sha256(origin)>/) passes Go's tlogcheck, and `stele ledger audit`
// passes on the copy's directory (records included, each checked by the mirror); a log that
// requires one mirror cosignature publishes nothing while its mirror is down, and publishes
// with the mirror's cosignature once it is back.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier, openNote, parseVkey } from '../../src/core/note.js';
import { parsePolicy, quorumMet } from '../../src/core/tlog-policy.js';
import { originHash } from '../../src/witness/protocol.js';
import { writeTestKey } from '../helpers/audit.js';
import { type RunningServe, Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { runTlogcheck } from '../helpers/tlogcheck.js';
import { digestOf } from '../helpers/logs.js';
import { freePort } from '../helpers/ports.js';
import { type RunningMirrorCli, startMirrorCli } from './mirror-cli.js';

async function anchorMany(url: string, label: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        postAnchor(url, digestOf(label, i + j), { artifact: `pkg-${(i + j) % 5}`, scope: 'demo' }),
      ),
    );
  }
}

async function sizeAt(url: string): Promise<number> {
  const res = await fetch(url);
  if (res.status !== 200) return -1;
  return Number((await res.text()).split('\n')[1]);
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const logVkeyFor = (origin: string, fill: number) =>
  formatVkey(makeVerifier(origin, SIG_ED25519, new SeedSigner(origin, new Uint8Array(32).fill(fill)).publicKey));

describe('a Stele log pushing to a Stele mirror', () => {
  const ORIGIN = 'push.test/log';
  const sb = new Sandbox('stele-mirror-push-');
  let log: RunningServe;
  let mirror: RunningMirrorCli;
  const mirrorDir = join(sb.root, 'mirror');

  beforeAll(async () => {
    await ensureBuilt();
    const logDir = join(sb.root, 'log');
    await writeTestKey(logDir, ORIGIN, 23);
    const logPort = await freePort();
    mirror = await startMirrorCli(mirrorDir, 0, `${logVkeyFor(ORIGIN, 23)}=http://127.0.0.1:${logPort}`);
    log = await startServe({
      dataDir: logDir,
      origin: ORIGIN,
      args: ['--port', String(logPort), '--mirror', `${mirror.vkey}=${mirror.url}`],
    });
  }, 180_000);

  afterAll(async () => {
    await log?.stop();
    await mirror?.stop();
    sb.cleanup();
  });

  it('keeps the mirror current; the copy passes tlogcheck over HTTP and ledger audit from its directory', async () => {
    await anchorMany(log.url, 'push', 700);
    const logSize = await sizeAt(`${log.url}/checkpoint`);
    expect(logSize).toBe(700);
    const prefix = `${mirror.url}/${originHash(ORIGIN)}`;
    await until('the mirror to reach the log', async () => (await sizeAt(`${prefix}/checkpoint`)) === logSize);
    const note = await (await fetch(`${prefix}/checkpoint`)).text();
    expect(
      openNote(note, parseVkey(log.vkey), [parseVkey(mirror.vkey)]).cosignatures.map((c) => c.verifier.name),
    ).toEqual(['mirror.test/m1']);

    const check = await runTlogcheck([
      '-src',
      prefix,
      '-vkey',
      log.vkey,
      '-origin',
      ORIGIN,
      '-samples',
      '100',
      '-full=true',
    ]);
    expect(check.failures, `${check.stdout}\n${check.stderr}`).toEqual([]);
    expect(check.code).toBe(0);

    expect(
      (
        await sb.run([
          'ledger',
          'init',
          '--endpoint',
          log.url,
          '--tenant',
          'demo',
          '--scope',
          'demo',
          '--trust-key',
          log.keyId,
          '--no-witnesses',
        ])
      ).code,
    ).toBe(0);
    const audit = await sb.json(['ledger', 'audit', join(mirrorDir, 'logs', originHash(ORIGIN))]);
    expect(audit.code, audit.stderr).toBe(0);
    expect(JSON.stringify(audit.out)).toContain('recomputed 700 entry hashes');
  });
});

describe('a log that requires one mirror cosignature', () => {
  const ORIGIN = 'quorum.test/log';
  const sb = new Sandbox('stele-mirror-quorum-');
  let log: RunningServe;
  let mirror: RunningMirrorCli;
  let mirrorPort: number;
  let logSpec: string;
  const mirrorDir = join(sb.root, 'mirror');

  beforeAll(async () => {
    await ensureBuilt();
    const logDir = join(sb.root, 'log');
    await writeTestKey(logDir, ORIGIN, 29);
    const logPort = await freePort();
    mirrorPort = await freePort();
    logSpec = `${logVkeyFor(ORIGIN, 29)}=http://127.0.0.1:${logPort}`;
    mirror = await startMirrorCli(mirrorDir, mirrorPort, logSpec);
    log = await startServe({
      dataDir: logDir,
      origin: ORIGIN,
      args: [
        '--port',
        String(logPort),
        '--mirror',
        `${mirror.vkey}=${mirror.url}`,
        '--mirror-quorum',
        '1',
        '--mirror-timeout',
        '2000',
        '--anchor-timeout',
        '3000',
      ],
    });
  }, 180_000);

  afterAll(async () => {
    await log?.stop();
    await mirror?.stop();
    sb.cleanup();
  });

  it('lists the mirror at /api/ledger/key and in its policy, which a client pins and checks', async () => {
    await anchorMany(log.url, 'quorum', 10);
    const key = (await (await fetch(`${log.url}/api/ledger/key`)).json()) as {
      mirrors: unknown;
      witnessPolicy: { threshold: number; policy: string };
    };
    expect(key.mirrors).toEqual([
      { name: 'mirror.test/m1', vkey: mirror.vkey, tiles: `${mirror.url}/${originHash(ORIGIN)}/` },
    ]);
    const policy = parsePolicy(key.witnessPolicy.policy);
    expect(policy.witnesses).toEqual([{ name: 'mirror.test/m1', vkey: mirror.vkey }]);
    expect(quorumMet(policy, new Set())).toBe(false);
    expect(quorumMet(policy, new Set(['mirror.test/m1']))).toBe(true);
    expect(key.witnessPolicy.threshold).toBe(1);
    const init = await sb.run(['ledger', 'init', '--endpoint', log.url, '--tenant', 't', '--trust-key', log.keyId]);
    expect(init.code, init.stderr).toBe(0);
    const cp = await sb.json(['ledger', 'checkpoint']);
    expect(cp.code, cp.stderr).toBe(0);
    expect(JSON.stringify(cp.out)).toContain('mirror.test/m1');
  });

  it('publishes only with the mirror cosignature, waits while the mirror is down, and publishes once it is back', async () => {
    await anchorMany(log.url, 'quorum-more', 290);
    const note = await (await fetch(`${log.url}/checkpoint`)).text();
    expect(note.split('\n')[1]).toBe('300');
    expect(
      openNote(note, parseVkey(log.vkey), [parseVkey(mirror.vkey)]).cosignatures.map((c) => c.verifier.name),
    ).toEqual(['mirror.test/m1']);

    await mirror.stop();
    const res = await fetch(`${log.url}/api/ledger/anchor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ digest: digestOf('quorum', 999_999) }),
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('anchor_timeout');
    await new Promise((r) => setTimeout(r, 1500));
    expect(await sizeAt(`${log.url}/checkpoint`)).toBe(300);
    // Leaf 300 is signed and durable but not published: its objects are served for a mirror to
    // read (authenticated against the signed root), never cached; nothing beyond them is.
    const pending = await fetch(`${log.url}/tile/records/001.p/45`);
    expect(pending.status).toBe(200);
    expect(pending.headers.get('cache-control')).toBe('no-store');
    expect((await fetch(`${log.url}/tile/records/001.p/46`)).status).toBe(404);
    expect((await fetch(`${log.url}/tile/records/001.p/44`)).headers.get('cache-control')).toMatch(/immutable/);

    mirror = await startMirrorCli(mirrorDir, mirrorPort, logSpec);
    await until('the log to publish with the mirror back', async () => (await sizeAt(`${log.url}/checkpoint`)) === 301);
    const after = await (await fetch(`${log.url}/checkpoint`)).text();
    expect(openNote(after, parseVkey(log.vkey), [parseVkey(mirror.vkey)]).cosignatures).toHaveLength(1);
    expect(await sizeAt(`${mirror.url}/${originHash(ORIGIN)}/checkpoint`)).toBe(301);
  });
});
