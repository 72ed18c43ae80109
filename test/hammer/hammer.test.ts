// `stele hammer` as a subprocess against a real `stele serve`: a clean log verifies (entries
// proved included, checkpoints consistent, no errors); a log serving a tile whose bytes were
// changed on disk is reported (exit 1, verification failures named).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTamperProxy } from '../helpers/fake-log-server.js';
import { type RunningServe, Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'hammer.test/log';
const sandbox = new Sandbox('stele-hammer-');

interface Report {
  ok: boolean;
  tree: { startSize: number; endSize: number; growth: number };
  writes: {
    acknowledged: number;
    duplicates: number;
    errors: number;
    integrateMs: { p50: number; p99: number } | null;
    pushback: Record<string, number>;
  };
  reads: {
    checkpoints: number;
    consistencyProofs: number;
    inclusionProofs: number;
    spotChecks: number;
    errors: number;
    unverified: number;
  };
  verificationFailures: number;
  problems: string[];
}

beforeAll(async () => {
  await ensureBuilt();
}, 180_000);

afterAll(() => sandbox.cleanup());

describe('stele hammer', () => {
  let serve: RunningServe;

  afterAll(async () => {
    await serve?.stop();
  });

  it('against a local stele serve: anchors are acknowledged and proved included, checkpoints consistent, no errors', async () => {
    serve = await startServe({ dataDir: scratchDir('stele-hammer-log-'), origin: ORIGIN });
    // Bounds that hold on a loaded machine: a few rounds of 8 writers in 5 s, half of them re-sending a digest.
    const r = await sandbox.json<Report>([
      'hammer',
      serve.url,
      '--writers',
      '8',
      '--readers',
      '2',
      '--max-runtime',
      '5',
      '--duplicates',
      '0.5',
      '--vkey',
      serve.vkey,
    ]);
    expect(r.code, `${r.stderr}\n${JSON.stringify(r.out.problems)}`).toBe(0);
    expect(r.out.ok).toBe(true);
    expect(r.out.writes.acknowledged).toBeGreaterThanOrEqual(8);
    expect(r.out.writes.duplicates).toBeGreaterThan(0);
    expect(r.out.writes.errors).toBe(0);
    expect(r.out.writes.integrateMs!.p99).toBeGreaterThanOrEqual(r.out.writes.integrateMs!.p50);
    // Every acknowledged anchor proved included from the tiles; several checkpoints checked against each other.
    // A re-sent digest is answered with its existing leaf: one acknowledged while that leaf still
    // waits for a checkpoint is proved with it, so proofs lie between leaves and acknowledgements.
    expect(r.out.reads.inclusionProofs).toBeGreaterThanOrEqual(r.out.writes.acknowledged - r.out.writes.duplicates);
    expect(r.out.reads.inclusionProofs).toBeLessThanOrEqual(r.out.writes.acknowledged);
    expect(r.out.reads.unverified).toBe(0);
    expect(r.out.reads.checkpoints).toBeGreaterThanOrEqual(2);
    expect(r.out.reads.consistencyProofs).toBeGreaterThanOrEqual(1);
    expect(r.out.reads.spotChecks).toBeGreaterThan(0);
    expect(r.out.verificationFailures).toBe(0);
    // A re-sent digest appends nothing: the tree grew by the new anchors only.
    expect(r.out.tree.growth).toBe(r.out.writes.acknowledged - r.out.writes.duplicates);
  }, 120_000);

  it('a goal it misses fails the run (exit 1), as does a usage error (exit 2)', async () => {
    const r = await sandbox.json<Report & { goals: { writeGoal: { met: boolean } } }>([
      'hammer',
      serve.url,
      '--writers',
      '1',
      '--max-runtime',
      '1',
      '--write-goal',
      '1000000',
    ]);
    expect(r.code).toBe(1);
    expect(r.out.goals.writeGoal.met).toBe(false);
    expect(r.out.verificationFailures).toBe(0);
    const bad = await sandbox.run(['hammer', serve.url, '--duplicates', '2']);
    expect(bad.code).toBe(2);
    const help = await sandbox.run(['hammer', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/pushback/);
  }, 60_000);

  it('tiles tampered between the log and the hammer (a CDN, a proxy) are reported: exit 1 with verification failures', async () => {
    // The log itself serves only what verifies (a flipped byte on its disk is a 500
    // corrupt_storage, never the altered bytes): the altering is done by a proxy in front.
    // Fill the first level-0 tile (256 leaves), so it is a full tile the log never rewrites.
    const have = (await (await fetch(`${serve.url}/api/ledger/checkpoint`)).json()) as { treeSize: number };
    for (let i = have.treeSize; i < 300; i++) await postAnchor(serve.url, i.toString(16).padStart(64, 'f'));
    const proxy = await startTamperProxy(serve.url, {
      object: (key, data) => {
        if (key !== 'tile/0/000') return data;
        const bytes = Buffer.from(data);
        bytes[5 * 32 + 7]! ^= 0x01; // one bit of leaf 5's hash
        return bytes;
      },
    });
    try {
      const r = await sandbox.json<Report>([
        'hammer',
        proxy.url,
        '--writers',
        '2',
        '--readers',
        '2',
        '--max-runtime',
        '4',
        '--vkey',
        serve.vkey,
      ]);
      expect(proxy.seen).toContain('/tile/0/000');
      expect(r.code).toBe(1);
      expect(r.out.ok).toBe(false);
      expect(r.out.verificationFailures).toBeGreaterThan(0);
      expect(r.out.problems.join('\n')).toMatch(/not included|not consistent/);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});
