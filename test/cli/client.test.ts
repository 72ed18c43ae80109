// The client library in-process: trust configuration (paths, environment, validation, pin
// advance), streaming file hashing, checkpoint/witness checks, and mirror and audit of a
// three-level log (66,000 entries) built directly with openLocalLog: incremental and
// resumed mirroring, pinned-checkpoint checks, and pinpointing tampered upper-level tiles.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { formatCheckpointBody, signCheckpoint } from '../../src/core/checkpoint.js';
import { auditLog } from '../../src/read/audit.js';
import {
  advancePin,
  configPath,
  configToToml,
  loadConfig,
  proofsDir,
  readConfigFile,
  saveConfig,
  trustWitnesses,
  type LedgerConfig,
} from '../../src/client/config.js';
import { thresholdPolicy } from '../../src/core/tlog-policy.js';
import { ClientConfigError } from '../../src/client/errors.js';
import { indexCachePath } from '../../src/client/entry-index.js';
import { sha256File } from '../../src/client/hashfile.js';
import { TilesView } from '../../src/client/views.js';
import { verifyFile } from '../../src/client/verify-file.js';
import { mirrorLog } from '../../src/client/ledger-mirror.js';
import { DirObjectReader } from '../../src/client/objects.js';
import { ProofStore } from '../../src/client/proofs.js';
import { type Trust, checkCheckpoint, checkConsistency, checkInclusion } from '../../src/client/rules.js';
import { EMPTY_ROOT, toHex } from '../../src/core/hash.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../../src/core/merkle.js';
import {
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  SeedSigner,
  cosignBody,
  formatVkey,
  keyIdOf,
  makeVerifier,
} from '../../src/core/note.js';
import { leafHash, sha256 } from '../../src/core/hash.js';
import { LogReader } from '../../src/read/reader.js';

const made: string[] = [];
const tmp = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), p));
  made.push(d);
  return d;
};
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});
const hex = (s: string) => createHash('sha256').update(s).digest('hex');

function trustFor(
  signer: { name: string; publicKey: Uint8Array },
  pin = { size: 0, root: EMPTY_ROOT },
  witnesses: SeedSigner[] = [],
  threshold = 0,
): Trust {
  const log = makeVerifier(signer.name, SIG_ED25519, signer.publicKey);
  return {
    origin: signer.name,
    keyId: keyIdOf(signer.publicKey),
    log,
    ...trustWitnesses({
      keyId: keyIdOf(signer.publicKey),
      treeSize: 0,
      rootHash: '',
      policy: thresholdPolicy(
        [],
        witnesses.map((w) => ({
          name: w.name,
          vkey: formatVkey(makeVerifier(w.name, SIG_COSIGNATURE_V1, w.publicKey)),
        })),
        threshold,
      ),
    }),
    pin,
  };
}

describe('trust configuration', () => {
  const logKey = new SeedSigner('cfg.test/log', new Uint8Array(32).fill(3));
  const w1 = new SeedSigner('w1.example', new Uint8Array(32).fill(4));
  const base: LedgerConfig = {
    endpoint: 'http://ledger.example',
    tenant: 'acme',
    scope: 'releases',
    trust: {
      keyId: keyIdOf(logKey.publicKey),
      origin: logKey.name,
      vkey: formatVkey(makeVerifier(logKey.name, SIG_ED25519, logKey.publicKey)),
      treeSize: 5,
      rootHash: hex('root5'),
      policy: thresholdPolicy(
        [],
        [{ name: w1.name, vkey: formatVkey(makeVerifier(w1.name, SIG_COSIGNATURE_V1, w1.publicKey)) }],
        1,
      ),
    },
  };

  it('resolves --config, then XDG_CONFIG_HOME, then ~/.config; proofs under XDG_DATA_HOME', () => {
    expect(configPath('rel/x.toml', {})).toBe(join(process.cwd(), 'rel/x.toml'));
    expect(configPath(undefined, { XDG_CONFIG_HOME: '/xdg' })).toBe('/xdg/stele/ledger.toml');
    expect(configPath(undefined, { XDG_CONFIG_HOME: 'relative-is-ignored' })).toMatch(
      /\/\.config\/stele\/ledger\.toml$/,
    );
    expect(proofsDir({ XDG_DATA_HOME: '/data' })).toBe('/data/stele/proofs');
    expect(proofsDir({})).toMatch(/\/\.local\/share\/stele\/proofs$/);
  });

  it('round-trips through TOML with the spec tables, and applies environment overrides', async () => {
    const dir = tmp('stele-cli-cfg-');
    const path = join(dir, 'nested', 'ledger.toml');
    await saveConfig(path, base);
    const text = readFileSync(path, 'utf8');
    expect(text).toMatch(/^\[ledger\]$/m);
    expect(text).toMatch(/^\[ledger\.trust\]$/m);
    expect(text).toMatch(/^key_id = "[0-9a-f]{64}"$/m);
    expect(text).toMatch(/^tree_size = 5$/m);
    expect(text).toMatch(/^\[\[ledger\.trust\.witnesses\]\]$/m);
    expect(await readConfigFile(path)).toEqual(base);
    const loaded = await loadConfig(path, {
      STELE_LEDGER_ENDPOINT: 'http://other.example',
      STELE_LEDGER_TENANT: 'beta',
    });
    expect(loaded.effective).toMatchObject({ endpoint: 'http://other.example', tenant: 'beta', scope: 'releases' });
    expect(loaded.file.endpoint).toBe('http://ledger.example');
    expect(loaded.overridden).toEqual({ endpoint: true, tenant: true });
  });

  it('refuses inconsistent trust material', async () => {
    const dir = tmp('stele-cli-cfg-');
    const path = join(dir, 'ledger.toml');
    const bad = async (mut: (c: LedgerConfig) => void, msg: RegExp) => {
      const c = structuredClone(base);
      mut(c);
      await saveConfig(path, c);
      await expect(readConfigFile(path)).rejects.toThrow(msg);
      await expect(readConfigFile(path)).rejects.toBeInstanceOf(ClientConfigError);
    };
    await bad((c) => (c.trust.keyId = hex('other key')), /vkey does not hash to the pinned key_id/);
    writeFileSync(path, configToToml(base).replace(/^witness_threshold = 1$/m, 'witness_threshold = 2'));
    await expect(readConfigFile(path)).rejects.toThrow(/exceeds the 1 pinned witnesses/);
    await bad(
      (c) =>
        (c.trust.policy = { ...c.trust.policy, witnesses: [{ ...c.trust.policy.witnesses[0]!, vkey: c.trust.vkey! }] }),
      /a witness key must be a cosignature vkey \(type 0x04 Ed25519 or 0x06 ML-DSA-44\)/,
    );
    await bad((c) => (c.trust.rootHash = 'XYZ'), /root_hash must be 64 lowercase hex/);
    await bad((c) => (c.trust.origin = 'another/origin'), /origin does not match/);
  });

  it('advances the pin only from the pin it proved consistency from', async () => {
    const dir = tmp('stele-cli-cfg-');
    const path = join(dir, 'ledger.toml');
    await saveConfig(path, base);
    const from = { treeSize: 5, rootHash: hex('root5') };
    expect(await advancePin(path, from, { treeSize: 3, rootHash: hex('root3') })).toBe(false);
    expect(
      await advancePin(path, { treeSize: 4, rootHash: hex('root4') }, { treeSize: 9, rootHash: hex('root9') }),
    ).toBe(false);
    expect(await advancePin(path, from, { treeSize: 9, rootHash: hex('root9') })).toBe(true);
    expect((await readConfigFile(path)).trust).toMatchObject({ treeSize: 9, rootHash: hex('root9') });
    // another process moved it meanwhile: leave it
    expect(await advancePin(path, from, { treeSize: 12, rootHash: hex('root12') })).toBe(false);
    expect((await readConfigFile(path)).trust.treeSize).toBe(9);
  });
});

describe('reading a local copy of a log', () => {
  it('with blocking calls as on the pool: regular files inside the root only, record bundles decompressed', async () => {
    const root = tmp('stele-cli-dir-');
    const outside = tmp('stele-cli-outside-');
    mkdirSync(join(root, 'tile', '0'), { recursive: true });
    mkdirSync(join(root, 'tile', 'records'));
    writeFileSync(join(root, 'tile', '0', '000'), 'tile');
    writeFileSync(join(root, 'tile', 'records', '000'), gzipSync('records'));
    writeFileSync(join(outside, 'secret'), 'SECRET');
    symlinkSync(join(outside, 'secret'), join(root, 'tile', '0', '001'));
    symlinkSync(outside, join(root, 'tile', '1'));
    spawnSync('mkfifo', [join(root, 'tile', '0', '002')]);
    mkdirSync(join(root, 'tile', '0', '003'));
    const text = (b: Uint8Array | null) => (b ? Buffer.from(b).toString() : b);
    for (const blocking of [false, true]) {
      const r = new DirObjectReader(root, { blocking });
      expect(text(await r.get('tile/0/000'))).toBe('tile');
      expect(text(await r.get('tile/records/000'))).toBe('records');
      for (const key of ['tile/0/001', 'tile/1/secret', 'tile/0/002', 'tile/0/003', 'tile/0/004'])
        expect(await r.get(key), `${key}, blocking ${blocking}`).toBeNull();
    }
  });
});

describe('streaming SHA-256', () => {
  it('matches sha256sum on a multi-chunk file, a file of one read and an empty file', async () => {
    const dir = tmp('stele-cli-hash-');
    const big = join(dir, 'big.bin');
    writeFileSync(big, randomBytes(3 * 1024 * 1024 + 17));
    const small = join(dir, 'small.bin');
    writeFileSync(small, randomBytes(1024 * 1024));
    const empty = join(dir, 'empty.bin');
    writeFileSync(empty, '');
    for (const f of [big, small, empty]) {
      const expected = execFileSync('sha256sum', [f], { encoding: 'utf8' }).split(' ')[0];
      const seen: number[] = [];
      const r = await sha256File(f, (b) => seen.push(b));
      expect(r.digest).toBe(expected);
      expect(r.bytes).toBe(readFileSync(f).length);
    }
    await expect(sha256File(join(dir, 'nope'))).rejects.toMatchObject({
      kind: 'io',
      message: expect.stringMatching(/no such file/),
    });
    await expect(sha256File(dir)).rejects.toMatchObject({ kind: 'usage' });
  });
});

describe('checkpoint, witness, consistency and inclusion checks', () => {
  const logKey = new SeedSigner('chk.test/log', new Uint8Array(32).fill(9));
  const w1 = new SeedSigner('w1.test', new Uint8Array(32).fill(10));
  const w2 = new SeedSigner('w2.test', new Uint8Array(32).fill(11));
  const stranger = new SeedSigner('w3.test', new Uint8Array(32).fill(12));
  const leaves = Array.from({ length: 20 }, (_, i) => leafHash(sha256(new Uint8Array([i]))));
  const mem = new MemoryHashReader(leaves);

  async function cosigned(size: number, signers: SeedSigner[]) {
    const root = await treeHash(size, mem);
    const cp = await signCheckpoint({ origin: logKey.name, size, root }, logKey);
    const body = formatCheckpointBody(cp);
    let note = cp.note;
    for (const s of signers) note += await cosignBody(body, s, 1_700_000_000);
    return { cp, note, root };
  }

  it('counts valid cosignatures by pinned witnesses against the threshold', async () => {
    const { note } = await cosigned(20, [w1, w2, stranger]);
    const two = checkCheckpoint({ note }, trustFor(logKey, undefined, [w1, w2], 2));
    expect(two.signature.ok).toBe(true);
    expect(two.witnesses).toMatchObject({ ok: true, status: 'PASS', valid: 2, quorum: 'all of (w1.test, w2.test)' });
    const { note: oneOnly } = await cosigned(20, [w1]);
    expect(checkCheckpoint({ note: oneOnly }, trustFor(logKey, undefined, [w1, w2], 2)).witnesses).toMatchObject({
      ok: false,
      valid: 1,
    });
    expect(checkCheckpoint({ note: oneOnly }, trustFor(logKey)).witnesses).toMatchObject({
      ok: true,
      status: 'SKIP',
      valid: 0,
      quorum: 'none',
    });
    // A forged cosignature under a pinned witness's key rejects the whole note (signed-note:
    // "If a signature from a known key fails to verify, clients SHOULD reject the whole note"),
    // also when the policy would need only the other witness.
    const lines = note.split('\n');
    const i = lines.findIndex((l) => l.startsWith('— w2.test '));
    const b = Buffer.from(lines[i]!.split(' ')[2]!, 'base64');
    b[20] = b[20]! ^ 1;
    lines[i] = `— w2.test ${b.toString('base64')}`;
    for (const k of [2, 1]) {
      const forged = checkCheckpoint({ note: lines.join('\n') }, trustFor(logKey, undefined, [w1, w2], k));
      expect(forged.signature.ok).toBe(false);
      expect(forged.signature.detail).toMatch(/cosignature by w2\.test .*does not verify: the whole note is rejected/);
      expect(forged.witnesses).toMatchObject({ ok: false, valid: 0 });
      expect(forged.cosigners.find((c) => c.name === 'w2.test')?.status).toBe('invalid');
    }
    // A key the trust does not know is never a reason to refuse.
    expect(checkCheckpoint({ note: lines.join('\n') }, trustFor(logKey, undefined, [w1], 1)).signature.ok).toBe(true);
  });

  it('verifies JSON-only checkpoints and their witness entries', async () => {
    const { cp, note, root } = await cosigned(20, [w1]);
    const sigLine = note.split('\n').find((l) => l.startsWith('— w1.test '))!;
    const raw = Buffer.from(sigLine.split(' ')[2]!, 'base64');
    const json = {
      logId: logKey.name,
      treeSize: 20,
      rootHash: toHex(root),
      timestamp: new Date().toISOString(),
      keyId: keyIdOf(logKey.publicKey),
      signature: `ed25519:${Buffer.from(cp.signature).toString('base64')}`,
      witnesses: [
        {
          name: 'w1.test',
          signature: `ed25519:${raw.subarray(12).toString('base64')}`,
          timestamp: new Date(1_700_000_000_000).toISOString(),
        },
      ],
    };
    expect(checkCheckpoint({ json }, trustFor(logKey, undefined, [w1], 1))).toMatchObject({
      signature: { ok: true },
      witnesses: { ok: true, valid: 1 },
    });
    expect(checkCheckpoint({ json: { ...json, treeSize: 19 } }, trustFor(logKey)).signature.ok).toBe(false);
    expect(checkCheckpoint({ json: { ...json, keyId: hex('x') } }, trustFor(logKey)).signature.detail).toMatch(
      /not the pinned/,
    );
    expect(checkCheckpoint({ json: { ...json, note } }, trustFor(logKey)).signature.ok).toBe(true);
    expect(
      checkCheckpoint({ json: { ...json, rootHash: hex('other'), note } }, trustFor(logKey)).signature.detail,
    ).toMatch(/differ from the signed note/);
    const other = new SeedSigner(logKey.name, new Uint8Array(32).fill(99));
    expect(checkCheckpoint({ note }, trustFor(other)).signature.ok).toBe(false);
  });

  it('consistency: rollback, same-size fork, malformed and valid proofs', async () => {
    const r = (n: number) => treeHash(n, mem);
    const prove = async (a: number, b: number) => ({ proof: await proveConsistency(a, b, mem) });
    expect(await checkConsistency({ size: 7, root: await r(7) }, { size: 20, root: await r(20) }, prove)).toMatchObject(
      { ok: true },
    );
    expect((await checkConsistency({ size: 8, root: await r(8) }, { size: 20, root: await r(20) }, prove)).ok).toBe(
      true,
    );
    expect(
      (await checkConsistency({ size: 7, root: await r(7) }, { size: 5, root: await r(5) }, prove)).detail,
    ).toMatch(/rolled back/);
    expect(
      (await checkConsistency({ size: 7, root: await r(7) }, { size: 7, root: await r(6) }, prove)).detail,
    ).toMatch(/forked/);
    expect((await checkConsistency({ size: 7, root: await r(6) }, { size: 20, root: await r(20) }, prove)).ok).toBe(
      false,
    );
    const truncated = async (a: number, b: number) => ({ proof: (await proveConsistency(a, b, mem)).slice(1) });
    expect((await checkConsistency({ size: 7, root: await r(7) }, { size: 20, root: await r(20) }, truncated)).ok).toBe(
      false,
    );
    expect(await checkConsistency({ size: 0, root: EMPTY_ROOT }, { size: 20, root: await r(20) }, null)).toMatchObject({
      ok: true,
    });
    expect(checkInclusion(3, 20, leaves[3]!, [], { size: 20, root: await r(20) }).detail).toMatch(
      /malformed audit path/,
    );
    expect(checkInclusion(3, 19, leaves[3]!, [], { size: 20, root: await r(20) }).detail).toMatch(
      /the proof is for tree size 19/,
    );
  });
});

describe('mirror and audit of a three-level log', () => {
  const ORIGIN = 'mirror.test/log';
  const N1 = 300;
  const N2 = 66_000; // > 65,536: level-2 tiles exist
  let dataDir: string;
  let publicDir: string;
  let trust: Trust;
  let signer: SeedSigner;
  let mirror: string;
  let close: () => Promise<void>;
  let sizeRoot: (n: number) => Promise<Uint8Array>;
  let grow: (to: number) => Promise<void>;
  let done = 0;

  beforeAll(async () => {
    dataDir = tmp('stele-cli-mirror-log-');
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 1, maxBatch: 65_536 });
    publicDir = log.paths.publicDir;
    signer = log.signer;
    trust = trustFor(signer);
    close = () => log.sequencer.close();
    grow = async (to: number) => {
      for (; done < to; ) {
        const n = Math.min(to - done, 10_000);
        const ps = [];
        for (let j = done; j < done + n; j++)
          ps.push(
            log.sequencer.submit(
              anchorRequest('ledger_anchor', 'Anchored', hex(`entry ${j}`), { artifact: `a-${j}`, scope: 'test' }),
            ),
          );
        await Promise.all(ps);
        done += n;
      }
    };
    sizeRoot = (n) =>
      new LogReader(new DirObjectReader(publicDir), { unverified: true }).treeHash(n, log.sequencer.checkpoint.size);
    await grow(N1);
    mirror = tmp('stele-cli-mirror-dst-');
  }, 120_000);

  afterAll(async () => {
    await close?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('mirrors, then mirrors incrementally after the log grew three levels tall', async () => {
    const src = new DirObjectReader(publicDir);
    const first = await mirrorLog({ source: src, sourceName: 'src', dest: mirror, trust });
    expect(first).toMatchObject({ status: 'updated', treeSize: N1, previousSize: null, reused: 0 });
    expect((await auditLog({ source: new DirObjectReader(mirror), trust })).ok).toBe(true);

    await grow(N2);
    const second = await mirrorLog({
      source: src,
      sourceName: 'src',
      dest: mirror,
      trust: { ...trust, pin: { size: N1, root: await sizeRoot(N1) } },
    });
    expect(second).toMatchObject({ status: 'updated', treeSize: N2, previousSize: N1 });
    expect(second.consistency.detail).toMatch(/previous mirror size 300 → 66000/);
    // Only the first full bundle (below the old size) is skipped; everything after is new.
    const bundles = Math.ceil(N2 / 256);
    expect(second.fetched).toBeGreaterThanOrEqual(3 * (bundles - 1));
    // No partial tiles left behind for tiles that are now full.
    expect(existsSync(join(mirror, 'tile', '0', '001.p'))).toBe(false);
    expect(existsSync(join(mirror, 'tile', 'records', '001.p'))).toBe(false);
    expect(readdirSync(join(mirror, 'tile', '2'))).toEqual(['000.p']);

    const third = await mirrorLog({ source: src, sourceName: 'src', dest: mirror, trust });
    expect(third.status).toBe('up-to-date');
    expect(third.fetched).toBeLessThanOrEqual(3);

    const pinMid = 65_537 + 100;
    const audit = await auditLog({
      source: new DirObjectReader(mirror),
      trust: { ...trust, pin: { size: pinMid, root: await sizeRoot(pinMid) } },
    });
    expect(audit).toMatchObject({ ok: true, treeSize: N2, entriesChecked: N2 });
    expect(audit.pin.detail).toMatch(/equals the pinned root/);
    const wrongPin = await auditLog({
      source: new DirObjectReader(mirror),
      trust: { ...trust, pin: { size: pinMid, root: await sizeRoot(pinMid - 1) } },
    });
    expect(wrongPin.ok).toBe(false);
    expect(wrongPin.pin.detail).toMatch(/forked/);
  });

  it('resumes an interrupted mirror from the verified tiles it already has', async () => {
    const copy = tmp('stele-cli-mirror-resume-');
    cpSync(mirror, copy, { recursive: true });
    rmSync(join(copy, 'checkpoint')); // as if interrupted before the checkpoint was written
    const r = await mirrorLog({ source: new DirObjectReader(publicDir), sourceName: 'src', dest: copy, trust });
    expect(r.status).toBe('updated');
    expect(r.reused).toBeGreaterThan(3 * 250);
    expect(r.fetched).toBeLessThanOrEqual(6);
    expect((await auditLog({ source: new DirObjectReader(copy), trust })).ok).toBe(true);
    rmSync(copy, { recursive: true, force: true });
  });

  it('audit pinpoints a tampered upper-level tile and mirror refuses it', async () => {
    const copy = tmp('stele-cli-mirror-tamper-');
    cpSync(mirror, copy, { recursive: true });
    const path = join(copy, 'tile', '1', '000');
    const data = readFileSync(path);
    data[100 * 32] = data[100 * 32]! ^ 0xff;
    writeFileSync(path, data);
    const a = await auditLog({ source: new DirObjectReader(copy), trust });
    expect(a.ok).toBe(false);
    expect(a.failure).toMatchObject({ object: 'tile/1/000', seq: 100 * 256 });
    expect(a.failure!.message).toMatch(/hash 100 \(leaves 25600–25855\)/);
    const dest = tmp('stele-cli-mirror-from-tampered-');
    await expect(mirrorLog({ source: new DirObjectReader(copy), sourceName: 'tampered', dest, trust })).rejects.toThrow(
      /tile\/0\/100 from tampered does not match|tile\/1\/000/,
    );
    expect(existsSync(join(dest, 'checkpoint'))).toBe(false);
    rmSync(copy, { recursive: true, force: true });
  });

  it('verifies a file from the tiles of the mirror at any leaf', async () => {
    const dir = tmp('stele-cli-mirror-verify-');
    const file = join(dir, 'doc');
    const seq = 40_000;
    writeFileSync(file, `entry ${seq}`);
    const store = new ProofStore(join(dir, 'proofs'));
    const cfgPath = join(dir, 'ledger.toml');
    const session = { config: { path: cfgPath } as never, trust, proofs: store, keepPin: true };
    const ok = await verifyFile(session, new TilesView(new DirObjectReader(mirror), mirror), file, { leafIndex: seq });
    expect(ok.report.result).toBe('PASS');
    expect(ok.entry?.artifact).toBe(`a-${seq}`);
    const wrongLeaf = await verifyFile(session, new TilesView(new DirObjectReader(mirror), mirror), file, {
      leafIndex: seq + 1,
    });
    expect(wrongLeaf.report.get('leaf')?.status).toBe('FAIL');
    // No leaf given and no stored proof: found by the digest in the record bundles, and the
    // mirror's index cached beside the configuration for the next lookup.
    const found = await verifyFile(session, new TilesView(new DirObjectReader(mirror), mirror), file);
    expect(found).toMatchObject({ leafIndex: seq });
    expect(found.report.result).toBe('PASS');
    const cached = JSON.parse(readFileSync(indexCachePath(cfgPath, mirror), 'utf8')) as {
      treeSize: number;
      digests: Record<string, number>;
    };
    expect(cached.treeSize).toBe(66_000);
    expect(cached.digests[found.digest]).toBe(seq);
  });
});
