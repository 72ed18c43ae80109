// Lookups (issue 20): `ledger get --digest|--leaf|--id|--artifact [--scope]` from the API and
// from a mirror's tiles, each match verified; an artifact label without a scope lists the
// latest entry of each scope; and `ledger status` (the pin, the log, a mirror's lag).
import { cpSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { type TamperProxy, startTamperProxy } from '../helpers/fake-log-server.js';
import type { JsonObject } from '../helpers/json.js';

type Json = JsonObject;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const rule = (m: Json, n: number) => (m.checks as Json[]).find((c) => c.rule === n)!;
const leaves = (out: Json) => (out.matches as Json[]).map((m) => m.leafIndex as number);

// The anchored entries: leaf → (artifact, scope).
const ENTRIES: [string, string][] = [
  ['build-150.bin', 'nightly'], // 0
  ['build-150.bin', 'release'], // 1
  ['build-150.bin', 'nightly'], // 2
  ['other.bin', 'nightly'], // 3
  ['build-150.bin', 'release'], // 4: after the mirror was copied
];

describe('stele ledger get and status', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let search: TamperProxy;
  const ids: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-lookup-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'lookup.test/log' });
    for (const [i, [artifact, scope]] of ENTRIES.entries()) {
      if (i === 4) cpSync(join(serve.dataDir, 'log'), join(sb.work, 'mirror'), { recursive: true });
      const r = await postAnchor(serve.url, sha(`entry ${i}`), { artifact, scope });
      ids.push((r.entry as Json).id);
    }
    // In front of the real log: passes everything through until a test tampers with an answer.
    search = await startTamperProxy(serve.url);
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
  }, 180_000);

  afterAll(async () => {
    await search?.close();
    await serve?.stop();
    sb?.cleanup();
  });

  it('gets an entry by digest, leaf and id from the API, verified (the lagging mirror is not in the way)', async () => {
    const [byDigest, byLeaf, byId, text] = await Promise.all([
      sb.json(['ledger', 'get', '--digest', sha('entry 4').toUpperCase()]),
      sb.json(['ledger', 'get', '--leaf', '1']),
      sb.json(['ledger', 'get', '--id', ids[3]!]),
      sb.run(['ledger', 'get', '--leaf', '1']),
    ]);
    expect(byDigest.code, byDigest.stdout).toBe(0);
    expect(byDigest.out).toMatchObject({ result: 'PASS', mode: 'api', lookup: { by: 'digest' } });
    expect(leaves(byDigest.out)).toEqual([4]);
    // Rule 3 bound the entry with entry 3's hash, which the mirror (size 4) lacks in a bundle of 5.
    expect(rule((byDigest.out.matches as Json[])[0]!, 3)).toMatchObject({ status: 'PASS' });
    expect(leaves(byLeaf.out)).toEqual([1]);
    expect((byLeaf.out.matches as Json[])[0]!.entry).toMatchObject({ artifact: 'build-150.bin', scope: 'release' });
    expect((byId.out.matches as Json[])[0]!.entryId).toBe(ids[3]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`Entry ${ids[1]}  leaf 1 of tree size 5`);
    expect(text.stdout).toMatch(/labels {6}artifact "build-150.bin", scope "release"/);
    expect(text.stdout).toContain('Result: PASS');
  });

  it('gets an artifact in a scope (its latest entry) from the API and from the tiles', async () => {
    const [api, tiles] = await Promise.all([
      sb.json(['ledger', 'get', '--artifact', 'build-150.bin', '--scope', 'nightly']),
      sb.json(['ledger', 'get', '--artifact', 'build-150.bin', '--scope', 'release', '--tiles', 'mirror']),
    ]);
    expect(leaves(api.out)).toEqual([2]);
    expect(api.out.result).toBe('PASS');
    // The mirror (size 4) does not have leaf 4 yet: its latest "release" is leaf 1.
    expect(tiles.out).toMatchObject({ result: 'PASS', mode: 'tiles' });
    expect(leaves(tiles.out)).toEqual([1]);
  });

  it('lists the latest entry of every scope for an artifact without scope: tiles, and the API search route', async () => {
    const tiles = await sb.json(['ledger', 'get', '--artifact', 'build-150.bin', '--tiles', 'mirror']);
    expect(tiles.code).toBe(0);
    expect(leaves(tiles.out)).toEqual([1, 2]);

    // The log's search route lists each scope's latest entry; every match is fetched and verified.
    const api = await sb.json(['ledger', 'get', '--artifact', 'build-150.bin']);
    expect(api.code, api.stdout).toBe(0);
    expect(leaves(api.out)).toEqual([2, 4]);
    for (const m of api.out.matches as Json[]) expect(m.result).toBe('PASS');

    // A server without the route (an older log): a clear usage error, not a "not found".
    search.tamper = {
      rewrite: (u) => (u.pathname === '/api/ledger/search' ? new URL('/api/ledger/no-such-route', u) : u),
    };
    const env = { STELE_LEDGER_ENDPOINT: search.url };
    const noRoute = await sb.json(['ledger', 'get', '--artifact', 'build-150.bin'], env);
    expect(noRoute.code).toBe(2);
    expect(noRoute.out.error.message).toMatch(/no artifact search across scopes .*pass --scope/);
    search.tamper = {};

    // A search that names an entry of another artifact: that match FAILs rule 3.
    search.tamper.json = (route, body) => (route === 'search' ? { matches: [{ leafIndex: 3 }] } : body);
    const lied = await sb.json(['ledger', 'get', '--artifact', 'build-150.bin'], env);
    expect(lied.code).toBe(1);
    expect(rule((lied.out.matches as Json[])[0]!, 3)).toMatchObject({ status: 'FAIL' });
    expect(rule((lied.out.matches as Json[])[0]!, 3).detail).toMatch(/records artifact "other.bin"/);
  });

  it('says NOT_FOUND (exit 1) when nothing matches, and refuses malformed lookups (exit 2)', async () => {
    const [api, tiles, two, bad, scopeAlone] = await Promise.all([
      sb.json(['ledger', 'get', '--digest', sha('nobody')]),
      sb.run(['ledger', 'get', '--leaf', '4', '--tiles', 'mirror']),
      sb.run(['ledger', 'get', '--leaf', '1', '--digest', sha('x')]),
      sb.run(['ledger', 'get', '--digest', 'abc']),
      sb.run(['ledger', 'get', '--leaf', '1', '--scope', 'nightly']),
    ]);
    expect(api.code).toBe(1);
    expect(api.out).toMatchObject({ result: 'NOT_FOUND', matches: [] });
    expect(tiles.code).toBe(1);
    expect(tiles.stdout).toMatch(/^Not found: no entry with leaf 4 in .*mirror \(tree size 4\)/);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/exactly one of --digest, --leaf, --id or --artifact/);
    expect(bad.code).toBe(2);
    expect(scopeAlone.code).toBe(2);
  });

  it('status shows the pin, the verified log with its summary, and how far the mirror lags', async () => {
    const j = await sb.json(['ledger', 'status']);
    expect(j.code, j.stdout).toBe(0);
    expect(j.out).toMatchObject({
      result: 'PASS',
      pin: { keyId: serve.keyId, treeSize: 5 },
      log: { result: 'PASS', checkpoint: { treeSize: 5 }, sincePin: 0, summary: { treeSize: 5 } },
      mirror: { result: 'PASS', checkpoint: { treeSize: 4 }, lag: 1, behindPin: 1 },
    });
    const t = await sb.run(['ledger', 'status']);
    expect(t.stdout).toMatch(/Mirror {9}.*mirror: size 4, .*; 1 entry behind the log/);
    expect(t.stdout).toContain('older than your pin (4 < 5): update the mirror');
    expect(t.stdout).not.toMatch(/rolled back/);
  });

  it('shell completion offers the new commands and their options', async () => {
    const r = await sb.run(['completion', 'bash']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /"ledger get"\) words='[^']*--digest[^']*--leaf[^']*--id[^']*--artifact[^']*--scope[^']*--tiles/,
    );
    expect(r.stdout).toMatch(/"ledger status"\) words='[^']*--tiles/);
    expect(r.stdout).toMatch(/"ledger init"\) words='[^']*--vkey/);
  });

  it("answers an artifact's anchor, not a later document_verified of the same file (API and tiles)", async () => {
    const digest = sha('the anchored package');
    const anchored = await postAnchor(serve.url, digest, { artifact: 'pkg.tgz', scope: 'demo' });
    await postAnchor(serve.url, digest, { artifact: 'pkg.tgz', scope: 'demo', type: 'document_verified' });
    const leaf = anchored.leafIndex as number;
    const [inScope, anyScope, tiles] = await Promise.all([
      sb.json(['ledger', 'get', '--artifact', 'pkg.tgz', '--scope', 'demo']),
      sb.json(['ledger', 'get', '--artifact', 'pkg.tgz']),
      sb.json(['ledger', 'get', '--artifact', 'pkg.tgz', '--scope', 'demo', '--tiles', serve.url]),
    ]);
    for (const r of [inScope, anyScope, tiles]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.out.result).toBe('PASS');
      expect(r.out.matches as Json[]).toHaveLength(1);
      expect((r.out.matches as Json[])[0]).toMatchObject({ leafIndex: leaf, entry: { type: 'ledger_anchor' } });
    }
  });
});
