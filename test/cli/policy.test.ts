// C2SP tlog-policy end to end, the CLI as a subprocess against real `stele serve` processes
// and real witness servers on loopback (a third witness is down: a closed port):
// - `serve --witness-policy` publishes only once the policy's quorum is met;
// - `ledger init` writes the policy the log advertises (shown first);
// - `ledger trust-config --policy`: quorum all / any / k-of-n / nested decide rule 5, and a
//   policy needing two witnesses FAILs when a proxy strips one cosignature;
// - with `quorum none` rule 5 says "not witnessed" and the result reads PASS (not witnessed).
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServeConfig } from '../../src/serve/config.js';
import { ConfigError } from '../../src/settings/errors.js';
import { localPaths } from '../../src/serve/local-log.js';
import { type NoteVerifier, SIG_ED25519, formatVkey, makeVerifier } from '../../src/core/note.js';
import { parsePolicy } from '../../src/core/tlog-policy.js';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';
import { type RunningWitness, startWitness } from '../../src/witness/host.js';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { type TamperProxy, startTamperProxy } from '../helpers/fake-log-server.js';
import type { JsonObject } from '../helpers/json.js';

type Json = JsonObject;
const rule = (out: Json, n: number) => (out.checks as Json[]).find((c) => c.rule === n)!;
const MET = 'policy.test/log';
const UNMET = 'policy-unmet.test/log';

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Creates a log's key before its first start, so the witnesses can know the log. */
async function logKey(dataDir: string, origin: string): Promise<NoteVerifier> {
  const { signer } = await loadOrCreateKey(localPaths(dataDir).keyFile, origin);
  return makeVerifier(origin, SIG_ED25519, signer.publicKey);
}

/** Removes one witness's cosignature line from a note. */
const stripLine = (note: string, name: string) =>
  note.replace(new RegExp(`^— ${name.replace(/\./g, '\\.')} .*\\n`, 'm'), '');

describe('C2SP tlog-policy: serve --witness-policy, ledger init, trust-config --policy, rule 5', () => {
  const root = mkdtempSync(join(tmpdir(), 'stele-policy-'));
  let sb: Sandbox;
  let w1: RunningWitness;
  let w2: RunningWitness;
  let down: string;
  let w3vkey: string;
  let serve: RunningServe;
  let logVkey: string;
  let proxy: TamperProxy;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-policy-cli-');
    const met = await logKey(join(root, 'met'), MET);
    const unmet = await logKey(join(root, 'unmet'), UNMET);
    logVkey = formatVkey(met);
    const silent = pino({ level: 'silent' });
    const start = (name: string) =>
      startWitness({
        dataDir: join(root, name),
        name: `${name}.policy.test`,
        logs: [met, unmet],
        host: '127.0.0.1',
        port: 0,
        logger: silent,
      });
    [w1, w2] = await Promise.all([start('w1'), start('w2')]);
    // w3 is a witness whose server is down: its key exists, nothing answers at its URL.
    const w3 = await start('w3');
    w3vkey = w3.vkey;
    await w3.close();
    down = `http://127.0.0.1:${await closedPort()}`;
    sb.file('release.tgz', 'a release witnessed under a policy\n');
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await serve?.stop();
    await Promise.all([w1?.close(), w2?.close()]);
    sb?.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  /** w1 with its URL on the witness line (tlog-policy's submission prefix), w2 paired by --witness, w3 down. */
  const servePolicy = (group: string) =>
    `# the sequencer's witnesses\nwitness w1 ${w1.vkey} ${w1.url}\nwitness w2 ${w2.vkey}\nwitness w3 ${w3vkey} ${down}\ngroup q ${group} w1 w2 w3\nquorum q\n`;

  it('serve --witness-policy publishes only once the quorum is met', async () => {
    // A new log publishes its size-0 checkpoint before it serves: first under `any`, then
    // restarted under `all` of three with w3 down, an anchor is committed but never published.
    const unmetFile = join(root, 'unmet.policy');
    const args = ['--witness-policy', unmetFile, '--witness', `${w2.vkey}=${w2.url}`, '--anchor-timeout', '1500'];
    writeFileSync(unmetFile, servePolicy('any'));
    const first = await startServe({ dataDir: join(root, 'unmet'), origin: UNMET, args });
    await first.stop();
    writeFileSync(unmetFile, servePolicy('all'));
    // Changing a log's witness policy is deliberate: without --reconfigure the start is refused.
    await expect(startServe({ dataDir: join(root, 'unmet'), origin: UNMET, args })).rejects.toThrow(
      /exited with 2: .*witness policy.*--reconfigure/s,
    );
    const unmet = await startServe({ dataDir: join(root, 'unmet'), origin: UNMET, args: [...args, '--reconfigure'] });
    try {
      // w3 is down: the start goes on, and says which witness, where, and the setting naming it.
      const down3 = unmet
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"witness":"w3.policy.test"'));
      expect(down3).toHaveLength(1);
      expect(JSON.parse(down3[0]!)).toMatchObject({
        level: 40,
        url: down,
        setting: '--witness / STELE_WITNESSES (or the policy file)',
        msg: expect.stringMatching(
          /^witness w3\.policy\.test at http:\/\/127\.0\.0\.1:\d+ cannot be reached at start: /,
        ),
      });
      const key = (await (await fetch(`${unmet.url}/api/ledger/key`)).json()) as Json;
      expect(parsePolicy(key.witnessPolicy.policy).groups).toEqual([
        { name: 'q', k: 'all', members: ['w1', 'w2', 'w3'] },
      ]);
      expect(key.witnessPolicy.threshold).toBe(3);
      const res = await fetch(`${unmet.url}/api/ledger/anchor`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ digest: 'ab'.repeat(32) }),
      });
      expect(res.status).toBe(503);
      expect(((await res.json()) as Json).error.code).toBe('anchor_timeout');
      const note = await (await fetch(`${unmet.url}/checkpoint`)).text();
      expect(note.split('\n')[1]).toBe('0');
    } finally {
      unmet.proc.kill('SIGKILL');
    }

    // Two of three: w1 and w2 cosign, w3 is down, and the checkpoint is published.
    const metFile = join(root, 'met.policy');
    writeFileSync(metFile, servePolicy('2'));
    serve = await startServe({
      dataDir: join(root, 'met'),
      origin: MET,
      args: ['--witness-policy', metFile, '--witness', `${w2.vkey}=${w2.url}`],
    });
    const r = await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId]);
    expect(r.code).toBe(0);
    const anchored = await sb.json(['ledger', 'anchor', 'release.tgz']);
    expect(anchored.code).toBe(0);
    const note = await (await fetch(`${serve.url}/checkpoint`)).text();
    expect(note.split('\n')[1]).toBe('1');
    expect(note).toMatch(/^— w1\.policy\.test /m);
    expect(note).toMatch(/^— w2\.policy\.test /m);
    expect(note).not.toMatch(/^— w3\.policy\.test /m);
  }, 120_000);

  it('the witness policy setting: flag over STELE_WITNESS_POLICY over [server] witness_policy; not with a threshold', () => {
    const toml = join(root, 'serve.toml');
    writeFileSync(toml, '[server]\nwitness_policy = "from-file.policy"\n');
    expect(resolveServeConfig({ config: toml }, {}).witnessPolicy).toBe(join(process.cwd(), 'from-file.policy'));
    expect(resolveServeConfig({ config: toml }, { STELE_WITNESS_POLICY: '/etc/env.policy' }).witnessPolicy).toBe(
      '/etc/env.policy',
    );
    expect(
      resolveServeConfig({ config: toml, witnessPolicy: '/flag.policy' }, { STELE_WITNESS_POLICY: '/etc/env.policy' })
        .witnessPolicy,
    ).toBe('/flag.policy');
    expect(() => resolveServeConfig({ witnessPolicy: '/p', witnessThreshold: '1' }, {})).toThrow(ConfigError);
  });

  it('serve refuses a policy that does not parse, naming the line, and a witness with no URL', async () => {
    const bad = join(root, 'bad.policy');
    writeFileSync(bad, `witness w1 ${w1.vkey} ${w1.url}\ngroup q 2 w1\nquorum q\n`);
    const r = await sb.run([
      'serve',
      '--data-dir',
      join(root, 'bad'),
      '--origin',
      'bad.test/log',
      '--port',
      '0',
      '--witness-policy',
      bad,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.policy: line 2: group q: threshold 2 is not between 1 and its 1 members/);
    writeFileSync(bad, `witness w2 ${w2.vkey}\nquorum w2\n`);
    const noUrl = await sb.run(['serve', '--data-dir', join(root, 'bad'), '--origin', 'bad.test/log', '--port', '0'], {
      STELE_WITNESS_POLICY: bad,
    });
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toMatch(/witness w2 has no URL/);
    // A witness listed in two groups: w1 alone would meet `all a b` (tlog-policy forbids it).
    writeFileSync(
      bad,
      `witness w1 ${w1.vkey} ${w1.url}\nwitness w2 ${w2.vkey} ${w2.url}\nwitness w3 ${w3vkey} ${down}\ngroup a any w1 w2\ngroup b any w1 w3\ngroup c all a b\nquorum c\n`,
    );
    const shared = await sb.run(['serve', '--data-dir', join(root, 'bad'), '--origin', 'bad.test/log', '--port', '0'], {
      STELE_WITNESS_POLICY: bad,
    });
    expect(shared.code).toBe(2);
    expect(shared.stderr).toMatch(/bad\.policy: line 5: group b: w1 is already a member of group a \(line 4\)/);
  }, 60_000);

  it('ledger init wrote the policy the log advertises: its key, the witnesses and their quorum', async () => {
    const file = join(dirname(sb.configFile), 'ledger.policy');
    const p = parsePolicy(readFileSync(file, 'utf8'));
    expect(p.logs).toEqual([{ vkey: logVkey }]);
    expect(p.witnesses.map((w) => [w.name, w.vkey])).toEqual([
      ['w1', w1.vkey],
      ['w2', w2.vkey],
      ['w3', w3vkey],
    ]);
    // The log's witness URLs are its own business: not advertised, not written.
    expect(p.witnesses.every((w) => w.url === undefined)).toBe(true);
    expect(p.groups).toEqual([{ name: 'q', k: 2, members: ['w1', 'w2', 'w3'] }]);
    const v = await sb.json(['ledger', 'verify', 'release.tgz']);
    expect(v.code).toBe(0);
    expect(rule(v.out, 5)).toMatchObject({ status: 'PASS' });
    expect(rule(v.out, 5).detail).toMatch(
      /2 valid cosignatures by policy witnesses \(w1, w2\); quorum met: 2 of \(w1, w2, w3\)/,
    );
    expect(v.out).toMatchObject({ result: 'PASS', verdict: 'PASS', witnessed: true });
  });

  it('trust-config --policy: quorum all / any / k-of-n / nested decide rule 5; two required and one stripped FAILs', async () => {
    // A proxy that strips w2's cosignature from the note and the JSON witnesses[].
    proxy = await startTamperProxy(serve.url, {
      json: (_route, b) => {
        const cp = b.checkpoint ?? b;
        if (typeof cp.note === 'string') cp.note = stripLine(cp.note, 'w2.policy.test');
        if (Array.isArray(cp.witnesses)) cp.witnesses = cp.witnesses.filter((w: Json) => w.name !== 'w2.policy.test');
        return b;
      },
      object: (key, data) =>
        key === 'checkpoint' ? Buffer.from(stripLine(data.toString('utf8'), 'w2.policy.test')) : data,
    });
    const witnesses = `witness A ${w1.vkey}\nwitness B ${w2.vkey}\nwitness C ${w3vkey}\n`;
    const cases: { name: string; policy: string; direct: string; stripped: string }[] = [
      {
        name: 'all of two',
        policy: `log ${logVkey}\n${witnesses}group g all A B\nquorum g\n`,
        direct: 'PASS',
        stripped: 'FAIL',
      },
      { name: 'any of two', policy: `${witnesses}group g any A B\nquorum g\n`, direct: 'PASS', stripped: 'PASS' },
      { name: '2 of 3', policy: `${witnesses}group g 2 A B C\nquorum g\n`, direct: 'PASS', stripped: 'FAIL' },
      {
        name: 'all of 3 (one never cosigns)',
        policy: `${witnesses}group g all A B C\nquorum g\n`,
        direct: 'FAIL',
        stripped: 'FAIL',
      },
      { name: 'a single witness', policy: `${witnesses}quorum B\n`, direct: 'PASS', stripped: 'FAIL' },
      {
        name: 'nested',
        policy: `${witnesses}group AC any A C\ngroup g all AC B\nquorum g\n`,
        direct: 'PASS',
        stripped: 'FAIL',
      },
    ];
    for (const c of cases) {
      const file = sb.file('trust.policy', c.policy);
      const set = await sb.json(['ledger', 'trust-config', '--policy', file]);
      expect(set.code, `${c.name}: ${set.stderr}`).toBe(0);
      expect(set.out.trust.policy).toBe(join(dirname(sb.configFile), 'ledger.policy'));
      // The policy is copied verbatim: a later edit of the original changes nothing.
      expect(readFileSync(set.out.trust.policy, 'utf8')).toBe(c.policy);
      for (const [via, want] of [
        [serve.url, c.direct],
        [proxy.url, c.stripped],
      ] as const) {
        // The tiles path reads /checkpoint itself (the proxy strips it there too): once is enough.
        for (const extra of c === cases[0] ? [[], ['--tiles', via]] : [[]]) {
          const v = await sb.json(['ledger', 'verify', 'release.tgz', ...extra], { STELE_LEDGER_ENDPOINT: via });
          const what = `${c.name} via ${via === proxy.url ? 'the stripping proxy' : 'the log'}${extra.length ? ' (tiles)' : ''}`;
          expect(rule(v.out, 5).status, `${what}: ${rule(v.out, 5).detail}`).toBe(want);
          expect(v.code, what).toBe(want === 'PASS' ? 0 : 1);
          expect(rule(v.out, 1).status, what).toBe('PASS');
          if (want === 'FAIL') expect(rule(v.out, 5).detail, what).toMatch(/quorum not met: the policy requires/);
        }
      }
    }
    // The one the issue names: two witnesses required, one cosignature stripped.
    sb.file('two.policy', `witness A ${w1.vkey}\nwitness B ${w2.vkey}\ngroup both 2 A B\nquorum both\n`);
    expect((await sb.run(['ledger', 'trust-config', '--policy', 'two.policy'])).code).toBe(0);
    const r = await sb.run(['ledger', 'verify', 'release.tgz'], { STELE_LEDGER_ENDPOINT: proxy.url });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /FAIL {2}5\. Witness cosignatures: 1 valid cosignature by policy witnesses \(A\); quorum not met: the policy requires 2 of \(A, B\) \(no valid cosignature from B\)/,
    );
    expect(r.stdout).toMatch(/^Result: FAIL/m);
  }, 180_000);

  it('with no witnesses (quorum none) rule 5 says "not witnessed" and the result is PASS (not witnessed)', async () => {
    sb.file('none.policy', `log ${logVkey}\nquorum none\n`);
    const set = await sb.json(['ledger', 'trust-config', '--policy', 'none.policy']);
    expect(set.out.trust).toMatchObject({ quorum: 'none', witnessThreshold: 0, witnesses: [] });
    const j = await sb.json(['ledger', 'verify', 'release.tgz']);
    expect(j.code).toBe(0);
    expect(rule(j.out, 5).status).toBe('SKIP');
    expect(rule(j.out, 5).detail).toMatch(
      /^not witnessed: the trust policy requires no cosignatures \(quorum none; 2 cosignature lines not checked/,
    );
    expect(j.out).toMatchObject({ result: 'PASS', verdict: 'PASS (not witnessed)', witnessed: false });
    // Said once (rule 5 and the verdict), not repeated by rule 6 or the result line.
    expect(rule(j.out, 6).detail).not.toMatch(/witness/i);
    const t = await sb.run(['ledger', 'verify', 'release.tgz']);
    expect(t.stdout).toMatch(/SKIP {2}5\. Witness cosignatures: not witnessed/);
    expect(t.stdout).toMatch(/^Result: PASS \(not witnessed\)/m);
    expect(t.stdout).not.toMatch(/^Result: PASS — verified$/m);
  }, 60_000);

  it('trust-config refuses a policy that does not parse or does not name the pinned log, naming the line', async () => {
    sb.file('broken.policy', `witness A ${w1.vkey}\ngroup g any A Z\nquorum g\n`);
    const r = await sb.run(['ledger', 'trust-config', '--policy', 'broken.policy']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /broken\.policy: line 2: group g: Z is not a witness or group defined on a preceding line/,
    );
    sb.file(
      'shared.policy',
      `witness A ${w1.vkey}\nwitness B ${w2.vkey}\nwitness C ${w3vkey}\ngroup a any A B\ngroup b any A C\ngroup c all a b\nquorum c\n`,
    );
    const shared = await sb.run(['ledger', 'trust-config', '--policy', 'shared.policy']);
    expect(shared.code).toBe(2);
    expect(shared.stderr.trim()).toMatch(
      /shared\.policy: line 5: group b: A is already a member of group a \(line 4\)/,
    );
    sb.file(
      'other-log.policy',
      `log ${formatVkey(makeVerifier('other.test/log', SIG_ED25519, new Uint8Array(32).fill(7)))}\nquorum none\n`,
    );
    const o = await sb.run(['ledger', 'trust-config', '--policy', 'other-log.policy']);
    expect(o.code).toBe(2);
    expect(o.stderr).toMatch(/none of its 1 log line\(s\) is the pinned log key/);
  });
});
