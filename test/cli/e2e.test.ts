// The `stele` CLI end to end, as a subprocess against a real `stele serve` (with two demo
// witnesses): the README flow init → anchor → proof → verify → consistency → checkpoint,
// verify --anchor, the pinned witnesses (rule 5), then mirror, and verification from the
// mirror with the server stopped.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { type RunningServe, Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { type TamperProxy, dropCosignatures, startTamperProxy } from '../helpers/fake-log-server.js';
import type { JsonObject } from '../helpers/json.js';

const ORIGIN = 'e2e.test/log';

type Json = JsonObject;
const rule = (out: Json, n: number) => (out.checks as Json[]).find((c) => c.rule === n)!;

describe('stele ledger, end to end against stele serve', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let witnesses: { name: string; vkey: string }[] = [];
  const ids: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-e2e-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: ORIGIN, args: ['--demo-witnesses', '2'] });
    sb.file('release-1.2.3.tgz', 'the canonical package bytes of release 1.0\n');
    sb.file('notes.txt', 'release notes\n');
    sb.file('never-anchored.bin', 'nobody anchored this\n');
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('init pins the key and the checkpoint, and writes the docs/interface.md §4.3 tables', async () => {
    const r = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      serve.url,
      '--tenant',
      'acme',
      '--scope',
      'releases',
      '--trust-key',
      serve.keyId,
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Pinned ${ORIGIN}`);
    // The log's two witnesses and their quorum are shown, then written as the trust policy.
    expect(r.stdout).toMatch(/witness {2}witness1\.demo\.stele .*\n.*witness {2}witness2\.demo\.stele /);
    expect(r.stdout).toContain('quorum   all of (witness1.demo.stele, witness2.demo.stele)');
    const toml = parseToml(readFileSync(sb.configFile, 'utf8')) as Json;
    expect(toml.ledger.endpoint).toBe(serve.url);
    expect(toml.ledger.tenant).toBe('acme');
    expect(toml.ledger.scope).toBe('releases');
    expect(toml.ledger.trust.key_id).toBe(serve.keyId);
    expect(toml.ledger.trust.tree_size).toBe(0);
    expect(toml.ledger.trust.root_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(toml.ledger.trust.vkey).toBe(serve.vkey);
    expect(toml.ledger.trust.policy).toBe('ledger.policy');

    // A second init does not silently re-pin.
    const again = await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already exists; pass --force/);

    const key = (await (await fetch(`${serve.url}/api/ledger/key`)).json()) as Json;
    witnesses = key.witnesses;
    expect(witnesses).toHaveLength(2);
    const pin = await sb.json([
      'ledger',
      'trust-config',
      ...witnesses.flatMap((w) => ['--add-witness', w.vkey]),
      '--witness-threshold',
      '2',
    ]);
    expect(pin.code).toBe(0);
    expect(pin.out.trust.witnesses.map((w: Json) => w.name).sort()).toEqual(witnesses.map((w) => w.name).sort());
    expect(pin.out.trust.witnessThreshold).toBe(2);
  });

  it('anchor streams the digest, verifies the answer, stores the proof and prints the entry id', async () => {
    const r = await sb.run(['ledger', 'anchor', 'release-1.2.3.tgz']);
    expect(r.code).toBe(0);
    const id = /entry id\s+(led_\d+_[0-9a-f]{12})/.exec(r.stdout)?.[1];
    expect(id).toBeDefined();
    ids.push(id!);
    expect(r.stdout).toContain('Result: PASS');
    expect(existsSync(join(sb.proofsDir, `${id}.json`))).toBe(true);

    const j = await sb.json(['ledger', 'anchor', 'notes.txt', '--artifact', 'notes', '--scope', 'docs']);
    expect(j.code).toBe(0);
    expect(j.out.result).toBe('PASS');
    expect(j.out.entry).toMatchObject({ type: 'ledger_anchor', result: 'Anchored', artifact: 'notes', scope: 'docs' });
    expect(j.out.entryId).toBe(j.out.entry.id);
    expect(rule(j.out, 5).detail).toMatch(/^2 valid cosignatures/);
    ids.push(j.out.entryId);
    // the pin moved forward with the verified checkpoints
    const toml = parseToml(readFileSync(sb.configFile, 'utf8')) as Json;
    expect(toml.ledger.trust.tree_size).toBe(j.out.checkpoint.treeSize);
  });

  it('proof shows the stored proof and re-verifies it', async () => {
    const [r, j] = await Promise.all([sb.run(['ledger', 'proof', ids[0]!]), sb.json(['ledger', 'proof', ids[1]!])]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Inclusion proof of ${ids[0]} (stored:`);
    expect(r.stdout).toMatch(/audit path\s+\d+ hash/);
    expect(r.stdout).toContain('Result: PASS');
    expect(j.out.result).toBe('PASS');
    expect(j.out.proof.entry.id).toBe(ids[1]);
    expect(j.out.proof.auditPath.length).toBeGreaterThan(0);
  });

  it('verify reports PASS for each rule of docs/interface.md §4.3', async () => {
    const [r, j] = await Promise.all([
      sb.run(['ledger', 'verify', 'release-1.2.3.tgz']),
      sb.json(['ledger', 'verify', 'release-1.2.3.tgz']),
    ]);
    expect(r.code).toBe(0);
    for (const n of [1, 2, 3, 4, 5, 6]) expect(r.stdout).toMatch(new RegExp(`PASS  ${n}\\. `));
    expect(r.stdout).toMatch(/4\. Inclusion: leaf index 0, tree size \d+/);
    expect(r.stdout).toMatch(/5\. Witness cosignatures: 2 valid cosignatures/);
    expect(j.out.result).toBe('PASS');
    expect((j.out.checks as Json[]).map((c) => [c.rule, c.status])).toEqual([1, 2, 3, 4, 5, 6].map((n) => [n, 'PASS']));
    expect(j.out.entryId).toBe(ids[0]);
    expect(j.out.leafIndex).toBe(0);
  });

  it('verify of a file that was never anchored is a FAIL (exit 1)', async () => {
    const j = await sb.json(['ledger', 'verify', 'never-anchored.bin']);
    expect(j.code).toBe(1);
    expect(j.out.result).toBe('FAIL');
    expect(rule(j.out, 3).status).toBe('FAIL');
    expect(rule(j.out, 3).detail).toMatch(/not anchored/);
    expect(rule(j.out, 1).status).toBe('PASS');
  });

  it('consistency and checkpoint', async () => {
    const [c, cj, k, note] = await Promise.all([
      sb.run(['ledger', 'consistency', '--from', '1', '--to', '2']),
      sb.json(['ledger', 'consistency', '--from', '1']),
      sb.run(['ledger', 'checkpoint']),
      sb.run(['ledger', 'checkpoint', '--note']),
    ]);
    expect(c.code).toBe(0);
    expect(c.stdout).toMatch(/Consistency 1 → 2: sizes 1 → 2: both roots/);
    expect(cj.code).toBe(0);
    expect(cj.out.to).toBe(cj.out.checkpoint.treeSize);
    expect(k.code).toBe(0);
    expect(k.stdout).toMatch(/tree size\s+2/);
    expect(note.code).toBe(0);
    const [body, sigs] = note.stdout.split('\n\n');
    expect(body!.split('\n')).toEqual([ORIGIN, '2', expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/)]);
    expect(sigs!.trim().split('\n')).toHaveLength(3); // the log and two witnesses
  });

  it('proof fetches, verifies and stores a proof it did not have', async () => {
    const anchored = (await postAnchor(
      serve.url,
      createHash('sha256').update('anchored by someone else').digest('hex'),
    )) as Json;
    const id = anchored.entry.id as string;
    expect(existsSync(join(sb.proofsDir, `${id}.json`))).toBe(false);
    const r = await sb.run(['ledger', 'proof', id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Inclusion proof of ${id} (fetched from the log)`);
    expect(existsSync(join(sb.proofsDir, `${id}.json`))).toBe(true);
    const missing = await sb.run(['ledger', 'proof', `led_999_${'0'.repeat(12)}`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^stele: entry led_999_0+ is not in the log/);
  });

  it('trust-config --advance moves the pin after proving consistency', async () => {
    await postAnchor(serve.url, createHash('sha256').update('one more').digest('hex'));
    const before = (parseToml(readFileSync(sb.configFile, 'utf8')) as Json).ledger.trust.tree_size as number;
    const j = await sb.json(['ledger', 'trust-config', '--advance']);
    expect(j.code).toBe(0);
    expect(j.out.advanced).toEqual({ from: before, to: before + 1 });
    expect(j.out.trust.treeSize).toBe(before + 1);
    const again = await sb.json(['ledger', 'trust-config', '--advance']);
    expect(again.out.changes).toEqual([`pinned checkpoint already current (size ${before + 1})`]);
  });

  it('verify --anchor verifies the file and records a document_verified entry', async () => {
    const j = await sb.json(['verify', 'release-1.2.3.tgz', '--anchor']);
    expect(j.code).toBe(0);
    expect(j.out.result).toBe('PASS');
    expect(j.out.entryId).toBe(ids[0]);
    expect(j.out.recorded.entry).toMatchObject({ type: 'document_verified', digest: j.out.digest });
    expect(j.out.recorded.result).toBe('PASS');
    expect(j.out.anchor).toBe('recorded');
    const t = await sb.run(['verify', 'release-1.2.3.tgz', '--anchor']);
    expect(t.code).toBe(0);
    expect(t.stdout).toMatch(/^verify --anchor: verified, recorded document_verified$/m);
    // One full report (the verification); the record it adds is one line.
    expect(t.stdout.match(/^Result: /gm)).toHaveLength(1);
    expect(t.stdout).toMatch(
      /^Recorded document_verified: entry led_\d+_[0-9a-f]{12}, leaf \d+ of tree size \d+, PASS/m,
    );
  });

  it('verify --anchor on a file the log does not hold anchors it and verifies the new entry, in one step', async () => {
    sb.file('new-package.bin', 'a package the pipeline just built\n');
    const t = await sb.run(['verify', 'new-package.bin', '--anchor']);
    expect(t.code, t.stdout).toBe(0);
    expect(t.stdout).toMatch(/^verify --anchor: anchored, and the new entry verified$/m);
    expect(t.stdout).toMatch(/^Result: PASS — verified$/m);
    // Now in the log: a second run verifies it and records document_verified.
    const j = await sb.json(['verify', 'new-package.bin', '--anchor']);
    expect(j.code).toBe(0);
    expect(j.out).toMatchObject({ result: 'PASS', anchor: 'recorded' });
    expect(j.out.recorded.entry).toMatchObject({ type: 'document_verified', digest: j.out.digest });
    expect(j.out.entry).toMatchObject({ type: 'ledger_anchor', digest: j.out.digest, artifact: 'new-package.bin' });
  });

  it('verify --anchor --json says "anchored" and returns the new ledger_anchor entry', async () => {
    sb.file('another-package.bin', 'another fresh build\n');
    const j = await sb.json(['verify', 'another-package.bin', '--anchor']);
    expect(j.code).toBe(0);
    expect(j.out).toMatchObject({ result: 'PASS', anchor: 'anchored' });
    expect(j.out.entry).toMatchObject({ type: 'ledger_anchor', digest: j.out.digest });
    expect(rule(j.out.verification, 3).status).toBe('FAIL');
    // The look-up before anchoring FAILs rules 3 and 4 (no entry yet), never SKIPs them.
    expect(rule(j.out.verification, 4).status).toBe('FAIL');
  });

  it("ledger checkpoint does not show the JSON checkpoint's unsigned timestamp and lifetimeEntries as verified", async () => {
    const FORGED_TIME = '2001-09-09T01:46:40.000Z';
    const proxy: TamperProxy = await startTamperProxy(serve.url, {
      json: (_route, b) => {
        const cp = b.checkpoint ?? b;
        if (typeof cp.treeSize === 'number') {
          cp.timestamp = FORGED_TIME;
          cp.lifetimeEntries = (cp.lifetimeEntries ?? 0) + 1_000_000;
        }
        return b;
      },
    });
    try {
      const env = { STELE_LEDGER_ENDPOINT: proxy.url };
      const [t, j] = await Promise.all([sb.run(['ledger', 'checkpoint'], env), sb.json(['ledger', 'checkpoint'], env)]);
      const forgedCount = j.out.checkpoint.unsigned.lifetimeEntries as number;
      expect(forgedCount).toBeGreaterThanOrEqual(1_000_000);
      // The signed facts: no forged value among them; the verified time is a witness's.
      expect(j.out.checkpoint.timestamp).toBeUndefined();
      expect(j.out.checkpoint.lifetimeEntries).toBeUndefined();
      expect(j.out.checkpoint.unsigned.timestamp).toBe(FORGED_TIME);
      expect(Math.abs(Date.parse(j.out.checkpoint.witnessedAt) - Date.now())).toBeLessThan(3_600_000);
      // In the text, the forged values appear only under the "unsigned … NOT verified" heading.
      expect(t.code).toBe(0);
      const [verified, unsigned] = t.stdout.split(/^ {2}unsigned .*NOT verified:$/m);
      expect(unsigned).toBeDefined();
      // Whole words only: the random key id's hex may hold the same digits ("…922001c9…").
      expect(verified).not.toMatch(/\b2001-09-09/);
      expect(verified).not.toMatch(new RegExp(`\\b${forgedCount}\\b`));
      expect(unsigned).toContain(FORGED_TIME);
      expect(t.stdout).toMatch(/^ {2}witnessed {3}20\d\d-.*\(signed by a witness\)$/m);
      expect(t.stdout).not.toMatch(/witnessed {3}2001/);
    } finally {
      await proxy.close();
    }
  });

  it('rule 5 FAILs when the view lacks the pinned witnesses cosignatures', async () => {
    const proxy: TamperProxy = await startTamperProxy(serve.url, {
      json: (_route, b) => {
        const cp = b.checkpoint ?? b;
        if (cp.note) cp.note = dropCosignatures(cp.note, ORIGIN);
        cp.witnesses = [];
        return b;
      },
    });
    try {
      const before = readFileSync(sb.configFile, 'utf8');
      const j = await sb.json(['ledger', 'verify', 'release-1.2.3.tgz'], { STELE_LEDGER_ENDPOINT: proxy.url });
      expect(j.code).toBe(1);
      expect(rule(j.out, 5)).toMatchObject({ status: 'FAIL' });
      expect(rule(j.out, 5).detail).toMatch(/0 valid cosignatures .*quorum not met: the policy requires all of/);
      expect(rule(j.out, 1).status).toBe('PASS');
      expect(readFileSync(sb.configFile, 'utf8')).toBe(before);
    } finally {
      await proxy.close();
    }
  });

  it('environment variables override the endpoint and tenant', async () => {
    const [j, r] = await Promise.all([
      sb.json(['ledger', 'trust-config'], { STELE_LEDGER_TENANT: 'other-tenant' }),
      sb.run(['ledger', 'checkpoint'], { STELE_LEDGER_ENDPOINT: 'http://127.0.0.1:9' }),
    ]);
    expect(j.out).toMatchObject({
      tenant: 'other-tenant',
      tenantFromEnv: true,
      endpoint: serve.url,
      endpointFromEnv: false,
    });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^stele: cannot reach http:\/\/127\.0\.0\.1:9.*\n$/);
  });

  it('mirror, then verify --tiles and audit with the server stopped', async () => {
    const mirror = './mirror'; // the README's commands, run in the work directory
    const m1 = await sb.json(['ledger', 'mirror', mirror]);
    expect(m1.code).toBe(0);
    expect(m1.out).toMatchObject({ result: 'PASS', status: 'updated', previousSize: null });
    // more entries, then an incremental mirror
    sb.file('later.bin', 'a later release\n');
    expect((await sb.run(['ledger', 'anchor', 'later.bin'])).code).toBe(0);
    const m2 = await sb.json(['ledger', 'mirror', mirror]);
    expect(m2.code).toBe(0);
    expect(m2.out.previousSize).toBe(m1.out.treeSize);
    expect(m2.out.treeSize).toBe(m1.out.treeSize + 1);

    await serve.stop();

    const [v, v2, a, aj, cp, cons, proof, down] = await Promise.all([
      sb.json(['ledger', 'verify', 'release-1.2.3.tgz', '--tiles', mirror]),
      sb.json(['ledger', 'verify', 'later.bin', '--tiles', mirror]),
      sb.run(['ledger', 'audit', mirror]),
      sb.json(['ledger', 'audit', mirror]),
      sb.run(['ledger', 'checkpoint', '--tiles', mirror]),
      sb.run(['ledger', 'consistency', '--tiles', mirror, '--from', '1']),
      sb.run(['ledger', 'proof', ids[0]!, '--offline']),
      sb.run(['ledger', 'verify', 'release-1.2.3.tgz']),
    ]);
    expect(v.code).toBe(0);
    expect(v.out).toMatchObject({ result: 'PASS', mode: 'tiles', leafIndex: 0 });
    expect(rule(v.out, 5).detail).toMatch(/^2 valid cosignatures/);
    expect(v2.code).toBe(0);
    expect(v2.out.leafIndex).toBe(m2.out.treeSize - 1);
    expect(a.code).toBe(0);
    expect(a.stdout).toContain('Result: PASS');
    expect(aj.out).toMatchObject({ ok: true, treeSize: m2.out.treeSize, entriesChecked: m2.out.treeSize });
    expect(cp.code).toBe(0);
    expect(cons.code).toBe(0);
    expect(proof.code, proof.stdout).toBe(0);
    // Offline, rule 2 did not run: the result names it and never reads "PASS — verified".
    expect(proof.stdout).toMatch(/^ {2}SKIP {2}2\. /m);
    expect(proof.stdout).not.toMatch(/^Result: PASS — verified$/m);
    expect(proof.stdout).toMatch(/^Result: PASS \(rule 2 not checked: offline\)/m);
    const pj = await sb.json(['ledger', 'proof', ids[0]!, '--offline']);
    expect(pj.out).toMatchObject({
      result: 'PASS',
      verdict: 'PASS (rule 2 not checked: offline)',
      complete: false,
      notChecked: [{ rule: 2, reason: 'offline' }],
    });

    expect(down.code).toBe(3);
    expect(down.stderr.trim().split('\n')).toHaveLength(1);
    expect(down.stderr).toMatch(/connection refused/);
  });

  it('trust-config removes witnesses and keeps the threshold within them', async () => {
    const j = await sb.json([
      'ledger',
      'trust-config',
      '--remove-witness',
      witnesses[0]!.name,
      '--witness-threshold',
      '1',
    ]);
    expect(j.code).toBe(0);
    expect(j.out.trust.witnesses.map((w: Json) => w.name)).toEqual([witnesses[1]!.name]);
    const r = await sb.run(['ledger', 'trust-config', '--witness-threshold', '2']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/witness threshold 2 exceeds the 1 pinned witness/);
  });
});

describe('stele ledger against stele serve in production mode', () => {
  it('anchors with STELE_LEDGER_TOKEN as a bearer token; without it, a one-line error (exit 2)', async () => {
    const sb = new Sandbox('stele-e2e-prod-');
    const serve = await startServe({
      dataDir: join(sb.root, 'data'),
      origin: 'prod.test/log',
      args: ['--mode', 'production', '--anchor-tokens', 'ci=0123456789abcdef0123@acme'],
    });
    try {
      sb.file('pkg.tgz', 'production package\n');
      expect((await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId])).code).toBe(0);
      const denied = await sb.run(['ledger', 'anchor', 'pkg.tgz']);
      expect(denied.code).toBe(2);
      expect(denied.stderr).toMatch(
        /^stele: \S+\/api\/ledger\/anchor: the log requires a bearer token to anchor: set STELE_LEDGER_TOKEN to a token its operator issued \(STELE_ANCHOR_TOKENS on the server\)\n$/,
      );
      const ok = await sb.json(['ledger', 'anchor', 'pkg.tgz'], { STELE_LEDGER_TOKEN: '0123456789abcdef0123' });
      expect(ok.code).toBe(0);
      expect(ok.out.entry).toMatchObject({ tenant: 'acme', type: 'ledger_anchor' });
    } finally {
      await serve.stop();
      sb.cleanup();
    }
  });
});
