// Each rule of the verification report turns FAIL, with exit code 1 and the pin left
// alone, when the log (a real `stele serve` behind a tampering proxy, or another log)
// serves a forged signature, a rolled-back or forked checkpoint, a wrong audit path, a
// leaf that does not commit to the entry, or tampered tiles; audit names the first bad
// tile or record, and mirror refuses to keep a tampered object.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, copyLogKey, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import {
  type TamperProxy,
  flipByte,
  flipHex,
  forgeNote,
  forgeSig,
  startTamperProxy,
} from '../helpers/fake-log-server.js';
import type { JsonObject } from '../helpers/json.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'fail.test/log';
type Json = JsonObject;
const rule = (out: Json, n: number) => (out.checks as Json[]).find((c) => c.rule === n)!;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
/** The checkpoint object inside any API answer. */
const cpOf = (route: string, b: Json): Json => (route === 'checkpoint' ? b : b.checkpoint);

describe('FAIL cases', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let proxy: TamperProxy;
  let pinnedConfig: () => string;
  const extra: RunningServe[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-fail-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: ORIGIN });
    // 300 entries: one full level-0 tile and a partial one.
    await Promise.all(Array.from({ length: 298 }, (_, i) => postAnchor(serve.url, sha(`filler ${i}`))));
    proxy = await startTamperProxy(serve.url);
    sb.file('release.tar.gz', 'release bytes\n');
    sb.file('late.bin', 'late bytes\n');
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      proxy.url,
      '--tenant',
      't',
      '--scope',
      's',
      '--trust-key',
      serve.keyId,
    ]);
    expect(init.code).toBe(0);
    expect((await sb.run(['ledger', 'anchor', 'release.tar.gz'])).code).toBe(0); // leaf 298
    expect((await sb.run(['ledger', 'anchor', 'late.bin'])).code).toBe(0); // leaf 299
    pinnedConfig = () => readFileSync(sb.configFile, 'utf8');
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await Promise.all([serve, ...extra].map((s) => s?.stop()));
    sb?.cleanup();
  });

  /** Runs with JSON output; asserts exit 1 and an unchanged pin. */
  async function failing(args: string[], env: Record<string, string> = {}, { pinMayMove = false } = {}) {
    const before = pinnedConfig();
    const r = await sb.json(args, env);
    expect(r.code, r.stderr).toBe(1);
    expect(r.out.result).toBe('FAIL');
    if (!pinMayMove) expect(pinnedConfig()).toBe(before);
    return r.out;
  }

  /** Flips a bit in byte `at` of item `item` of a bundle (2-byte length framing). */
  function tamperItem(data: Buffer, item: number, at: number): Buffer {
    let off = 0;
    for (let i = 0; i < item; i++) off += 2 + data.readUInt16BE(off);
    return flipByte(data, off + 2 + at);
  }

  it('rule 1: a forged checkpoint signature (note and JSON)', async () => {
    proxy.tamper = {
      json: (route, b) => {
        const cp = cpOf(route, b);
        cp.signature = forgeSig(cp.signature);
        cp.note = forgeNote(cp.note, ORIGIN);
        return b;
      },
    };
    try {
      const [v, c, note] = await Promise.all([
        failing(['ledger', 'verify', 'release.tar.gz']),
        failing(['ledger', 'checkpoint']),
        sb.run(['ledger', 'checkpoint', '--note']),
      ]);
      expect(rule(v, 1)).toMatchObject({ status: 'FAIL' });
      expect(rule(v, 1).detail).toMatch(/does not verify under the pinned key/);
      expect(rule(v, 6).status).toBe('FAIL');
      expect(rule(c, 1).status).toBe('FAIL');
      expect(note.code).toBe(1);
      expect(note.stdout).not.toMatch(/^fail\.test\/log\n/);
    } finally {
      proxy.tamper = {};
    }
  });

  it('rule 1: a forged signature in a JSON-only checkpoint', async () => {
    proxy.tamper = {
      json: (route, b) => {
        const cp = cpOf(route, b);
        delete cp.note;
        cp.signature = forgeSig(cp.signature);
        return b;
      },
    };
    try {
      const v = await failing(['ledger', 'checkpoint']);
      expect(rule(v, 1).status).toBe('FAIL');
    } finally {
      proxy.tamper = {};
    }
  });

  it('rule 1: a log that signs with another key', async () => {
    const other = await startServe({ dataDir: join(sb.root, 'other'), origin: ORIGIN });
    extra.push(other);
    await postAnchor(other.url, sha('release bytes\n'));
    const v = await failing(['ledger', 'verify', 'release.tar.gz'], { STELE_LEDGER_ENDPOINT: other.url });
    expect(rule(v, 1).detail).toMatch(/names key id .* not the pinned|no signature by the pinned key/);
    // and init refuses to pin a key that does not hash to the trusted key id
    const scratch = new Sandbox('stele-fail-init-');
    const r = await scratch.run(['ledger', 'init', '--endpoint', other.url, '--trust-key', serve.keyId]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^stele: the log's public key hashes to key id [0-9a-f]{64}, not the trusted/);
    scratch.cleanup();
  });

  it('rule 2: a rolled-back checkpoint (older than the pin)', async () => {
    const old = (await (await fetch(`${serve.url}/api/ledger/checkpoint`)).json()) as Json;
    sb.file('newer.bin', 'newer\n');
    expect((await sb.run(['ledger', 'anchor', 'newer.bin'])).code).toBe(0); // the pin moves past `old`
    proxy.tamper = {
      json: (route, b) => {
        if (route === 'checkpoint') return old;
        if (route.startsWith('entry')) b.checkpoint = old;
        return b;
      },
    };
    try {
      const [c, v, k] = await Promise.all([
        failing(['ledger', 'checkpoint']),
        failing(['ledger', 'verify', 'release.tar.gz']),
        // From the pin to the log's size: the log is below the pin, a failed rule 2, not a usage error.
        failing(['ledger', 'consistency']),
      ]);
      expect(rule(k, 2)).toMatchObject({ status: 'FAIL' });
      expect(rule(k, 2).detail).toMatch(/smaller than the pinned size .* rolled back/);
      expect(rule(c, 1).status).toBe('PASS');
      expect(rule(c, 2)).toMatchObject({ status: 'FAIL' });
      expect(rule(c, 2).detail).toMatch(/smaller than the pinned size .* rolled back/);
      expect(rule(v, 2).status).toBe('FAIL');
    } finally {
      proxy.tamper = {};
    }
  });

  it('rule 2: a forked log signed by the same key', async () => {
    const forkDir = join(sb.root, 'fork');
    await copyLogKey(serve.dataDir, forkDir);
    const fork = await startServe({ dataDir: forkDir, origin: ORIGIN });
    extra.push(fork);
    const size = (await (await fetch(`${serve.url}/api/ledger/checkpoint`)).json()) as Json;
    await Promise.all(Array.from({ length: size.treeSize + 5 }, (_, i) => postAnchor(fork.url, sha(`fork ${i}`))));
    await postAnchor(fork.url, sha('release bytes\n'));
    const [c, v, m, a] = await Promise.all([
      failing(['ledger', 'checkpoint'], { STELE_LEDGER_ENDPOINT: fork.url }),
      failing(['ledger', 'verify', 'release.tar.gz'], { STELE_LEDGER_ENDPOINT: fork.url }),
      sb.run(['ledger', 'mirror', join(sb.root, 'fork-mirror'), '--from', fork.url]),
      sb.json(['ledger', 'audit', fork.url]),
    ]);
    expect(rule(c, 1).status).toBe('PASS'); // same key: only consistency catches it
    expect(rule(c, 2).status).toBe('FAIL');
    expect(rule(c, 2).detail).toMatch(/fork/);
    expect(rule(v, 2).status).toBe('FAIL');
    expect(rule(v, 4).status).toBe('PASS'); // the fork's own proof is fine; the fork is not
    // mirror refuses to copy it; audit of it fails the pin check
    expect(m.code).toBe(1);
    expect(m.stderr).toMatch(/not consistent with the pinned checkpoint .* forked/);
    expect(a.code).toBe(1);
    expect(a.out.pin.ok).toBe(false);
    expect(a.out.tree.ok).toBe(true);
  });

  it('trust-config: --advance refuses a fork; --replace-key needs the key id and a consistent or reset checkpoint', async () => {
    const fork = extra[1]!; // the forked log of the previous test
    const other = extra[0]!; // the log with another key
    const before = pinnedConfig();
    const adv = await sb.json(['ledger', 'trust-config', '--advance'], { STELE_LEDGER_ENDPOINT: fork.url });
    expect(adv.code).toBe(1);
    expect(adv.out.advance.result).toBe('FAIL');
    expect(pinnedConfig()).toBe(before);

    const scratch = new Sandbox('stele-fail-rekey-');
    try {
      expect((await scratch.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId])).code).toBe(0);
      const wrongId = await scratch.run(['ledger', 'trust-config', '--replace-key', serve.keyId], {
        STELE_LEDGER_ENDPOINT: other.url,
      });
      expect(wrongId.code).toBe(1);
      expect(wrongId.stderr).toMatch(/not the trusted/);
      const inconsistent = await scratch.run(['ledger', 'trust-config', '--replace-key', other.keyId], {
        STELE_LEDGER_ENDPOINT: other.url,
      });
      expect(inconsistent.code).toBe(1);
      expect(inconsistent.stderr).toMatch(/pass --reset-checkpoint/);
      const reset = await scratch.json(['ledger', 'trust-config', '--replace-key', other.keyId, '--reset-checkpoint'], {
        STELE_LEDGER_ENDPOINT: other.url,
      });
      expect(reset.code).toBe(0);
      expect(reset.out.trust.keyId).toBe(other.keyId);
      expect(reset.out.changes[0]).toMatch(/RESET/);
    } finally {
      scratch.cleanup();
    }
  });

  it('rule 4: a wrong audit path', async () => {
    proxy.tamper = {
      json: (route, b) => {
        if (route === 'entry') b.auditPath[0] = flipHex(b.auditPath[0]);
        return b;
      },
    };
    try {
      const v = await failing(['ledger', 'verify', 'release.tar.gz']);
      expect([1, 2, 3, 5].map((n) => rule(v, n).status)).toEqual(['PASS', 'PASS', 'PASS', 'SKIP']); // rule 5: no witnesses pinned, "not witnessed"
      expect(rule(v, 4)).toMatchObject({ status: 'FAIL' });
      expect(rule(v, 4).detail).toMatch(
        /leaf index 298, tree size \d+: the \d+-hash audit path rebuilds root .* not the checkpoint root/,
      );
      proxy.tamper = { json: (route, b) => (route === 'entry' ? { ...b, auditPath: b.auditPath.slice(1) } : b) };
      const short = await failing(['ledger', 'verify', 'release.tar.gz']);
      expect(rule(short, 4).detail).toMatch(/malformed audit path/);
    } finally {
      proxy.tamper = {};
    }
  });

  it('rule 3: a leaf that does not commit to the entry, or an entry for another digest', async () => {
    proxy.tamper = {
      json: (route, b) => {
        if (route === 'entry') b.entry.proof.entryHash = flipHex(b.entry.proof.entryHash);
        return b;
      },
    };
    try {
      const v = await failing(['ledger', 'verify', 'release.tar.gz']);
      expect(rule(v, 3).status).toBe('FAIL');
      // The entry hash claimed is not what the entry's fields hash to (the leaf the log sent is the genuine one).
      expect(rule(v, 3).detail).toMatch(/not the entry hash [0-9a-f]{16}…: the entry shown is not the one in the log/);
      proxy.tamper = {
        json: (route, b) => {
          if (route === 'entry') b.entry.digest = sha('something else');
          return b;
        },
      };
      const d = await failing(['ledger', 'verify', 'release.tar.gz']);
      expect(rule(d, 3).detail).toMatch(/records digest [0-9a-f]{16}…, not the file's/);
    } finally {
      proxy.tamper = {};
    }
  });

  it('rule 3: an entry whose fields were altered (the entry hash no longer binds them)', async () => {
    // Claim that a file nobody anchored is anchored, by answering its lookup with another
    // entry whose digest is rewritten: leaf, id and audit path are all genuine.
    sb.file('unanchored.bin', 'never anchored\n');
    const target = sha('never anchored\n');
    proxy.tamper = {
      rewrite: (url) => {
        if (url.pathname === '/api/ledger/entry' && url.searchParams.get('hash') === target)
          url.searchParams.set('hash', sha('release bytes\n'));
        return url;
      },
      json: (route, b) => {
        if (route === 'entry') b.entry.digest = target;
        return b;
      },
    };
    try {
      const v = await failing(['ledger', 'verify', 'unanchored.bin']);
      expect([1, 2, 4, 5].map((n) => rule(v, n).status)).toEqual(['PASS', 'PASS', 'PASS', 'SKIP']); // rule 5: "not witnessed"
      expect(rule(v, 3).status).toBe('FAIL');
      expect(rule(v, 3).detail).toMatch(
        /fields hash .* not the entry hash .*: the entry shown is not the one in the log/,
      );
      proxy.tamper = {
        json: (route, b) => {
          if (route === 'entry') b.entry.artifact = 'something-else.tgz';
          return b;
        },
      };
      const w = await failing(['ledger', 'verify', 'release.tar.gz']);
      expect(rule(w, 3).status).toBe('FAIL');
    } finally {
      proxy.tamper = {};
    }
  });

  it('anchor: a forged anchor answer is not stored and exits 1', async () => {
    proxy.tamper = {
      json: (route, b) => {
        if (route === 'anchor') b.inclusionProof[0] = flipHex(b.inclusionProof[0]);
        return b;
      },
    };
    try {
      sb.file('anchored-through-liar.bin', 'x\n');
      // the checkpoint itself is genuine (rules 1, 2, 5 pass), so the pin may follow it
      const a = await failing(['ledger', 'anchor', 'anchored-through-liar.bin'], {}, { pinMayMove: true });
      expect(rule(a, 4).status).toBe('FAIL');
      expect(a.proofFile).toBeNull();
    } finally {
      proxy.tamper = {};
    }
  });

  it('a tampered hash tile: verify --tiles FAILs, mirror refuses it, audit names it', async () => {
    proxy.tamper = { object: (key, data) => (key === 'tile/0/000' ? flipByte(data, 17 * 32 + 5) : data) };
    try {
      // leaf 17 (digest of "filler 17") lives in the tampered tile
      sb.file('filler-17', 'filler 17');
      const [v, ok, a, human, m] = await Promise.all([
        sb.json(['ledger', 'verify', 'filler-17', '--tiles', proxy.url, '--leaf-index', '17']),
        sb.run(['ledger', 'verify', 'release.tar.gz', '--tiles', proxy.url]),
        sb.json(['ledger', 'audit', proxy.url]),
        sb.run(['ledger', 'audit', proxy.url]),
        sb.run(['ledger', 'mirror', join(sb.root, 'm-tile'), '--from', proxy.url]),
      ]);
      expect(v.code).toBe(1);
      expect(rule(v.out, 3).status).toBe('FAIL');
      expect(rule(v.out, 3).detail).toMatch(/does not match its leaf hash/);
      // leaf 298 does not depend on tile/0/000 (its proof uses the level-1 hash of it): still PASS
      expect(ok.code).toBe(0);
      expect(a.code).toBe(1);
      expect(a.out.failure).toMatchObject({ object: 'tile/0/000', seq: 17 });
      expect(a.out.failure.message).toMatch(/tile\/0\/000 hash 17 \(leaf 17\) differs/);
      expect(human.stdout).toMatch(/first bad object: tile\/0\/000 \(entry 17\)/);
      expect(m.code).toBe(1);
      expect(m.stderr).toMatch(/^stele: tile\/0\/000 from .* does not match the checkpoint/);
    } finally {
      proxy.tamper = {};
    }
  });

  it('a tampered partial tile at the right edge', async () => {
    proxy.tamper = { object: (key, data) => (key.startsWith('tile/0/001.p/') ? flipByte(data, 32 * 2) : data) };
    try {
      const [v, a] = await Promise.all([
        sb.json(['ledger', 'verify', 'late.bin', '--tiles', proxy.url]),
        sb.json(['ledger', 'audit', proxy.url]),
      ]);
      expect(v.code).toBe(1);
      expect(v.out.result).toBe('FAIL');
      expect(a.out.failure.object).toMatch(/^tile\/0\/001\.p\/\d+$/);
      expect(a.out.failure.seq).toBe(258);
    } finally {
      proxy.tamper = {};
    }
  });

  it('a tampered record and a tampered entry bundle: audit names the entry, verify --tiles FAILs rule 3', async () => {
    // entry 299 (late.bin) is item 43 of the second record bundle: change one character
    proxy.tamper = { object: (key, data) => (key.startsWith('tile/records/001') ? tamperItem(data, 43, 20) : data) };
    try {
      const [a, v] = await Promise.all([
        sb.json(['ledger', 'audit', proxy.url]),
        sb.json(['ledger', 'verify', 'late.bin', '--tiles', proxy.url]),
      ]);
      expect(a.code).toBe(1);
      expect(a.out.failure.seq).toBe(299);
      expect(a.out.failure.message).toMatch(
        /^record 299 \(tile\/records\/001\.p\/\d+ item 43\) does not hash to its entry hash/,
      );
      expect(v.code).toBe(1);
      expect(rule(v.out, 3).status).toBe('FAIL');
    } finally {
      proxy.tamper = {};
    }
    proxy.tamper = { object: (key, data) => (key === 'tile/entries/000' ? flipByte(data, 2 + 40 * 34) : data) };
    try {
      const [a, m] = await Promise.all([
        sb.json(['ledger', 'audit', proxy.url]),
        sb.run(['ledger', 'mirror', join(sb.root, 'm-entries'), '--from', proxy.url]),
      ]);
      expect(a.out.failure).toMatchObject({ object: 'tile/entries/000', seq: 40 });
      expect(a.out.failure.message).toMatch(/item 40 \(entry 40\) is wrong/);
      expect(m.code).toBe(1);
      expect(m.stderr).toMatch(/tile\/entries\/000 item 40 \(entry 40\)/);
    } finally {
      proxy.tamper = {};
    }
  });

  it('a mirror altered on disk: audit names the altered file', async () => {
    const mirror = join(sb.root, 'mirror');
    expect((await sb.run(['ledger', 'mirror', mirror, '--from', serve.url])).code).toBe(0);
    expect((await sb.run(['ledger', 'audit', mirror])).code).toBe(0);
    const path = join(mirror, 'tile', 'records', '000');
    writeContent(path, flipByte(readContent(path), 2 + 15)); // a byte of the first record, not of its gzip stream
    const a = await sb.json(['ledger', 'audit', mirror]);
    expect(a.code).toBe(1);
    expect(a.out.failure).toMatchObject({ object: 'tile/records/000', seq: 0 });
    // re-mirroring with --reverify repairs it from the (honest) source
    const again = await sb.json(['ledger', 'mirror', mirror, '--from', serve.url, '--reverify']);
    expect(again.code).toBe(0);
    expect(again.out.fetched).toBeGreaterThan(0);
    expect((await sb.run(['ledger', 'audit', mirror])).code).toBe(0);
  });
});
