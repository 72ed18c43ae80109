// Offline verifiers (issue 20): `ledger init --vkey --tiles` with no API at all; `verify FILE
// --tiles` finding the file's entry by its digest in the record bundles (no stored proof),
// with the index of a local mirror cached beside the configuration; a mirror older than the
// pin is "older than your pin (N < M): update the mirror", never "rolled back", in verify
// and audit, while a genuine fork (same size, other root; or an older checkpoint that is no
// prefix of the pinned tree) still FAILs.
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { type RunningServe, Sandbox, copyLogKey, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import type { JsonObject } from '../helpers/json.js';

const ORIGIN = 'offline.test/log';
type Json = JsonObject;
const rule = (out: Json, n: number) => (out.checks as Json[]).find((c) => c.rule === n)!;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('offline verifiers: init from a vkey and tiles, verify by digest, mirrors older than the pin', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let fork: RunningServe;
  const mirror = () => join(sb.work, 'mirror');

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-offline-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: ORIGIN });
    for (let i = 0; i < 5; i++) {
      const body = `release ${i}\n`;
      sb.file(`r${i}.bin`, body);
      await postAnchor(serve.url, sha(body), { artifact: `r${i}.bin`, scope: 'releases' });
    }
    // The mirror: a copy of the log's public files at size 5.
    cpSync(join(serve.dataDir, 'log'), mirror(), { recursive: true });
    // A fork: another log signed by the same key, with other entries.
    const forkDir = join(sb.root, 'fork');
    await copyLogKey(serve.dataDir, forkDir);
    fork = await startServe({ dataDir: forkDir, origin: ORIGIN });
    for (let i = 0; i < 3; i++) await postAnchor(fork.url, sha(`forked ${i}\n`));
  }, 180_000);

  afterAll(async () => {
    await serve?.stop();
    await fork?.stop();
    sb?.cleanup();
  });

  it('init --vkey --tiles pins the key and the mirror checkpoint with no API; a mismatched key id is refused', async () => {
    const bad = await sb.run([
      'ledger',
      'init',
      '--vkey',
      serve.vkey,
      '--trust-key',
      '0'.repeat(64),
      '--tiles',
      'mirror',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/the --vkey key hashes to key id [0-9a-f]{64}, not the --trust-key 0{64}: refusing/);
    expect(existsSync(sb.configFile)).toBe(false);

    const noKey = await sb.run(['ledger', 'init', '--tiles', 'mirror']);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/--trust-key <key_id>.*or --vkey <vkey>/);

    const r = await sb.json(['ledger', 'init', '--vkey', serve.vkey, '--trust-key', serve.keyId, '--tiles', 'mirror']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out).toMatchObject({ offline: true, endpoint: null, keyId: serve.keyId, pinned: { treeSize: 5 } });
    const toml = parseToml(readFileSync(sb.configFile, 'utf8')) as Json;
    expect(toml.ledger.endpoint).toBeUndefined();
    expect(toml.ledger.tiles).toBe(mirror()); // absolute: the configuration is used from anywhere
    expect(toml.ledger.trust).toMatchObject({ key_id: serve.keyId, vkey: serve.vkey, tree_size: 5 });
    // With no endpoint, the commands that read the log read the configured tiles (no --tiles needed).
    const cp = await sb.json(['ledger', 'checkpoint']);
    expect(cp.code, cp.stderr).toBe(0);
    expect(cp.out.checkpoint).toMatchObject({ treeSize: 5 });
    const cons = await sb.json(['ledger', 'consistency', '--from', '2', '--to', '5']);
    expect(cons.code, cons.stderr).toBe(0);
  });

  it('verify finds the entry by the digest in the record bundles, with no stored proof and no API', async () => {
    expect(existsSync(sb.proofsDir)).toBe(false);
    // No --tiles: the configuration's tiles are the only way to the log.
    const v = await sb.json(['ledger', 'verify', 'r3.bin']);
    expect(v.code, v.stderr).toBe(0);
    expect(v.out).toMatchObject({ result: 'PASS', mode: 'tiles', leafIndex: 3, treeSize: 5 });
    expect(v.out.entry).toMatchObject({ artifact: 'r3.bin', digest: sha('release 3\n') });

    sb.file('stranger.bin', 'never anchored\n');
    const none = await sb.json(['ledger', 'verify', 'stranger.bin', '--tiles', 'mirror']);
    expect(none.code).toBe(1);
    expect(rule(none.out, 3)).toMatchObject({ status: 'FAIL' });
    expect(rule(none.out, 3).detail).toMatch(/no entry of .* \(tree size 5\) records the file's digest/);
  });

  it("caches the mirror's digest index beside the configuration, tied to the tree; what it names is still verified", async () => {
    const dir = join(sb.configHome, 'stele', 'mirror-index');
    const [name] = readdirSync(dir);
    const cacheFile = join(dir, name!);
    const cache = JSON.parse(readFileSync(cacheFile, 'utf8')) as Json;
    expect(cache).toMatchObject({ treeSize: 5, source: mirror() });
    expect(cache.digests[sha('release 1\n')]).toBe(1);
    expect(cache.artifacts['r1.bin']).toEqual([['releases', 1]]);

    // A cache that lies is used (nothing rescans the bundles) but cannot make a false PASS.
    cache.digests[sha('release 1\n')] = 2;
    writeFileSync(cacheFile, JSON.stringify(cache));
    const lied = await sb.json(['ledger', 'verify', 'r1.bin']);
    expect(lied.code).toBe(1);
    expect(lied.out.leafIndex).toBe(2);
    expect(rule(lied.out, 3).detail).toMatch(/entry 2 records digest .*, not the file's/);

    // A cache of another tree (its root differs) is rebuilt from the bundles.
    cache.rootHash = '0'.repeat(64);
    writeFileSync(cacheFile, JSON.stringify(cache));
    const rebuilt = await sb.json(['ledger', 'verify', 'r1.bin']);
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.out.leafIndex).toBe(1);
    expect((JSON.parse(readFileSync(cacheFile, 'utf8')) as Json).digests[sha('release 1\n')]).toBe(1);

    // A cache that cannot be written (its directory is a file here; root ignores modes) is
    // said on stderr, and the verification carries on without it.
    rmSync(dir, { recursive: true });
    writeFileSync(dir, 'not a directory');
    const uncached = await sb.json(['ledger', 'verify', 'r1.bin']);
    expect(uncached.code).toBe(0);
    expect(uncached.out.leafIndex).toBe(1);
    expect(uncached.stderr).toMatch(/cannot cache the mirror index at .*mirror-index.*: carrying on without it/);
    rmSync(dir);
  });

  it('a mirror older than the pin is "older than your pin (N < M): update the mirror", never "rolled back"', async () => {
    // The log grows, the user re-pins online, the mirror stays at 5.
    sb.file('r5.bin', 'release 5\n');
    await postAnchor(serve.url, sha('release 5\n'));
    rmSync(sb.configFile);
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      serve.url,
      '--trust-key',
      serve.keyId,
      '--tiles',
      'mirror',
    ]);
    expect(init.code, init.stderr).toBe(0);

    // With the API up, the mirror's checkpoint is proved a prefix of the pin: rule 2 passes.
    const up = await sb.json(['ledger', 'verify', 'r2.bin', '--tiles', 'mirror']);
    expect(up.code, up.stderr).toBe(0);
    expect(rule(up.out, 2)).toMatchObject({ status: 'PASS' });
    expect(rule(up.out, 2).detail).toContain('older than your pin (5 < 6): update the mirror');

    // With the API down, rule 2 cannot run: a SKIP that says why, and the pin stays.
    await serve.stop();
    const [v, t, a, aj] = await Promise.all([
      sb.json(['ledger', 'verify', 'r2.bin', '--tiles', 'mirror']),
      sb.run(['ledger', 'verify', 'r2.bin', '--tiles', 'mirror']),
      sb.run(['ledger', 'audit', 'mirror']),
      sb.json(['ledger', 'audit', 'mirror']),
    ]);
    expect(v.code, v.stderr).toBe(0);
    expect(rule(v.out, 2)).toMatchObject({ status: 'SKIP', reason: 'older than your pin (5 < 6): update the mirror' });
    expect(v.out.verdict).toContain('rule 2 not checked: older than your pin (5 < 6): update the mirror');
    for (const text of [t.stdout, a.stdout, JSON.stringify(v.out), JSON.stringify(aj.out)])
      expect(text).not.toMatch(/rolled back/);
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(/SKIP {2}pinned checkpoint: the mirror's checkpoint is older than your pin \(5 < 6\)/);
    // No witnesses pinned: audit says SKIP for them, as verify does, never PASS.
    expect(a.stdout).toMatch(/^ {2}SKIP {2}witnesses: not witnessed/m);
    expect(t.stdout).toMatch(/^ {2}SKIP {2}5\. Witness cosignatures: not witnessed/m);
    expect(aj.out).toMatchObject({ ok: true, complete: false, pin: { status: 'SKIP' } });
    expect((parseToml(readFileSync(sb.configFile, 'utf8')) as Json).ledger.trust.tree_size).toBe(6);
  });

  it('a fork still FAILs: the same size with another root, and an older checkpoint that is no prefix of the pin', async () => {
    // The fork grows to 5 entries: the size of the real mirror, with other roots.
    for (let i = 3; i < 5; i++) await postAnchor(fork.url, sha(`forked ${i}\n`));
    const forkMirror = join(sb.work, 'fork-mirror');
    cpSync(join(fork.dataDir, 'log'), forkMirror, { recursive: true });
    rmSync(sb.configFile);
    expect((await sb.run(['ledger', 'init', '--vkey', serve.vkey, '--tiles', 'mirror'])).code).toBe(0);
    const same = await sb.json(['ledger', 'verify', 'r0.bin', '--tiles', forkMirror, '--leaf-index', '0']);
    expect(same.code).toBe(1);
    expect(rule(same.out, 2)).toMatchObject({ status: 'FAIL' });
    expect(rule(same.out, 2).detail).toMatch(/size 5 has root .* but the pinned root is .*: the log forked/);

    // A user pinned to the fork's endpoint at size 6 reads the real mirror (5): the endpoint's
    // proof 5 → 6 starts from another root, so this is a fork, not a stale mirror.
    await postAnchor(fork.url, sha('forked 5\n'));
    const other = new Sandbox('stele-offline-fork-');
    try {
      const init = await other.run(['ledger', 'init', '--endpoint', fork.url, '--trust-key', fork.keyId]);
      expect(init.code, init.stderr).toBe(0);
      other.file('r0.bin', 'release 0\n');
      const older = await other.json(['ledger', 'verify', 'r0.bin', '--tiles', mirror()]);
      expect(older.code).toBe(1);
      expect(rule(older.out, 2)).toMatchObject({ status: 'FAIL' });
      expect(rule(older.out, 2).detail).toMatch(/forked/);
      const audit = await other.json(['ledger', 'audit', mirror()]);
      expect(audit.code).toBe(1);
      expect(audit.out.pin).toMatchObject({ ok: false });
      expect(audit.out.pin.detail).toMatch(/forked/);
    } finally {
      other.cleanup();
    }
  });
});
