// Interoperability: a log written by the sequencer passes ../shared/tlogcheck, which reads
// it the way any C2SP tlog-tiles client would (Go's golang.org/x/mod/sumdb/tlog and note),
// with zero failures: checkpoint signature, full recomputation of every tile, 300 sampled
// inclusion proofs, and consistency with earlier checkpoints saved along the way. It is an
// outside check: a clone without ../shared skips it, saying so (test/interop is the
// repository's own Go interoperability check and never skips). With ../shared (or
// $TLOGCHECK_BIN) and no Go, it fails (the helper builds the checker, installing Go if needed).
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { SIG_ED25519, formatVkey, makeVerifier } from '../../src/core/note.js';
import type { AnchorReceipt, PublishedCheckpoint } from '../../src/sequencer/contract.js';
import { auditLogDir, tileFile, writeTestKey } from '../helpers/audit.js';
import { runTlogcheck, sharedDir, tlogcheckBinary } from '../helpers/tlogcheck.js';

const ORIGIN = 'test.example/tlogcheck';
// Batch ends at tile boundaries of level 0 (256) and level 1 (65,536 is too far for "a few
// thousand", so 4,096 = 16 full tiles stands in, with its neighbours), single-entry batches,
// and one larger batch.
const TARGETS = [1, 2, 255, 256, 257, 511, 512, 513, 1000, 1024, 2047, 2048, 2049, 3500, 4095, 4096, 4097, 4500];
const OLD_SIZES = [257, 2048, 4096];

const checkerAt = process.env.TLOGCHECK_BIN ?? path.join(sharedDir, 'tlogcheck', 'build.sh');
const haveChecker = existsSync(checkerAt);
if (!haveChecker) {
  const why = process.env.TLOGCHECK_BIN
    ? `TLOGCHECK_BIN=${checkerAt} does not exist`
    : `${checkerAt} is absent (no ../shared beside this clone)`;
  console.warn(`SKIP tlogcheck, the outside check: ${why}; test/interop/ checks interoperability on its own`);
}

describe.skipIf(!haveChecker)('tlogcheck (Go reference tlog/note) on a sequencer-written log', () => {
  let dataDir: string;
  let vkey: string;
  let publicKey: Uint8Array;
  const published: PublishedCheckpoint[] = [];
  const oldFiles: string[] = [];

  beforeAll(async () => {
    // Fails the suite if Go is unavailable and the checker cannot be built.
    await tlogcheckBinary();

    dataDir = await mkdtemp(path.join(tmpdir(), 'stele-tlogcheck-'));
    // Seed 19: this origin's vkey then has '+' in its base64, which Go's note package must accept.
    await writeTestKey(dataDir, ORIGIN, 19);
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 20, maxBatch: 100_000 });
    publicKey = log.signer.publicKey;
    vkey = formatVkey(makeVerifier(ORIGIN, SIG_ED25519, log.signer.publicKey));
    expect(vkey.split('+').length).toBeGreaterThan(3);
    log.sequencer.onPublished((c) => published.push(c));
    const requests = Array.from({ length: TARGETS[TARGETS.length - 1]! }, (_, i) =>
      anchorRequest(
        'ledger_anchor',
        'Anchored',
        createHash('sha256').update(`tlogcheck/${i}`).digest('hex'),
        i % 2 ? { artifact: `a${i}` } : {},
      ),
    );
    let next = 0;
    for (const target of TARGETS) {
      const wave: Promise<AnchorReceipt>[] = [];
      for (; next < target; next++) wave.push(log.sequencer.submit(requests[next]!));
      await Promise.all(wave);
    }
    await log.sequencer.close();
    // One batch per wave: the published sizes are exactly the targets.
    expect(published.map((c) => c.size)).toEqual(TARGETS);
    for (const size of OLD_SIZES) {
      const file = path.join(dataDir, `old-${size}.checkpoint`);
      await writeFile(file, published.find((c) => c.size === size)!.note);
      oldFiles.push(file);
    }
  }, 600_000);

  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const args = () => [
    '-src',
    path.join(dataDir, 'log'),
    '-vkey',
    vkey,
    '-origin',
    ORIGIN,
    '-samples',
    '300',
    '-full=true',
    '-old-size',
    '1,256,513',
    ...oldFiles.flatMap((f) => ['-old-checkpoint', f]),
  ];

  it('passes with zero failures', async () => {
    const r = await runTlogcheck(args());
    if (process.env.TLOGCHECK_SHOW) console.log(r.stdout);
    const detail = `${r.stdout}\n${r.stderr}`;
    expect(r.failures, detail).toEqual([]);
    expect(r.code, detail).toBe(0);
    const last = r.stdout.trim().split('\n').pop();
    expect(last, detail).toMatch(/^tlogcheck: \d+ passed, 0 failed$/);
    expect(r.failed).toBe(0);
    // 300 sampled inclusion proofs plus signature, root, full scan and consistency checks.
    expect(r.passed, detail).toBeGreaterThanOrEqual(300 + 6);
    expect(r.stdout).toContain('PASS checkpoint signature');
    expect(r.stdout).toMatch(/PASS entries root: .* 4500 leaves/);
    for (const size of OLD_SIZES)
      expect(r.stdout).toMatch(new RegExp(`PASS consistency ${size}->4500 \\(old checkpoint`));
    // Our own from-scratch audit agrees.
    const audit = await auditLogDir(path.join(dataDir, 'log'), ORIGIN, publicKey);
    expect(audit.checkpoint.size).toBe(4500);
  });

  it('fails when a tile is corrupted (the check is live)', async () => {
    const file = path.join(dataDir, 'log', tileFile(0, 3, 256)); // a full level-0 tile
    const original = await readFile(file);
    const bad = Buffer.from(original);
    bad[32 * 17 + 3]! ^= 0x80;
    await writeFile(file, bad);
    try {
      const r = await runTlogcheck(args());
      expect(r.code).not.toBe(0);
      expect(r.failed).toBeGreaterThan(0);
      expect(r.failures.length).toBeGreaterThan(0);
    } finally {
      await writeFile(file, original);
    }
  });
});
