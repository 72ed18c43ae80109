// `stele index rebuild` as a subprocess: the rebuild on worker threads indexes every entry
// as the sequencer's batches do (each entry found by its digest, the rows and counts by
// type), its file stays under issue 35's byte target, and a rebuild killed (SIGKILL) after
// it has committed part of the index continues from there when run again, ending with the
// same answers, counts and rows as a rebuild never interrupted.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';
import { copyLog, digestOf, makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'rebuild.test/log';
const N = 40_000;
const sandbox = new Sandbox('stele-rebuild-');
let dataDir: string;

beforeAll(async () => {
  dataDir = join(scratchDir('stele-rebuild-'), 'data');
  await Promise.all([makeLog(dataDir, ORIGIN, [N]), ensureBuilt()]);
}, 240_000);
afterAll(() => sandbox.cleanup());

const indexDir = (dir: string) => join(dir, 'private', 'index');

/** Every entry's answer by digest (the first candidate), the counts and row counts. */
async function answers(dir: string) {
  const index = new LmdbIndex(indexDir(dir));
  try {
    const byDigest: (number | undefined)[] = [];
    for (let i = 0; i < N; i++) byDigest.push(await index.findByDigest(digestOf(ORIGIN, i), async () => true));
    const { rows, fileBytes } = index.footprint();
    return {
      size: await index.indexedSize(),
      counts: await index.countsByType(),
      rows,
      byDigest,
      fileBytesPerEntry: fileBytes / N,
    };
  } finally {
    await index.close();
  }
}

function rebuild(dir: string): ChildProcess {
  const args = ['index', 'rebuild', '--data-dir', dir, '--origin', ORIGIN, '--chunk', '256', '--log-level', 'info'];
  return spawn(process.execPath, [CLI, ...args, '--json'], { env: sandbox.env(), stdio: ['ignore', 'pipe', 'pipe'] });
}

async function finish(
  child: ChildProcess,
): Promise<{ code: number | null; out: { indexed: number; resumedFrom: number } }> {
  let stdout = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, out: JSON.parse(stdout || '{}') as { indexed: number; resumedFrom: number } };
}

describe('stele index rebuild', () => {
  it('rebuilds every entry, and a rebuild killed mid-way continues to the same index', async () => {
    const whole = copyLog(dataDir, join(scratchDir('stele-rebuild-whole-'), 'data'));
    const cut = copyLog(dataDir, join(scratchDir('stele-rebuild-cut-'), 'data'));

    const straight = await finish(rebuild(whole));
    expect(straight.code).toBe(0);
    expect(straight.out).toMatchObject({ indexed: N, resumedFrom: 0 });
    const expected = await answers(whole);
    expect(expected.size).toBe(N);
    expect(expected.counts).toEqual({ ledger_anchor: N });
    // As batches of a bundle each: a digest row per entry, a row per artifact per bundle (seven
    // artifacts, in each of the 157 bundles), one label row per artifact.
    expect(expected.rows).toEqual({ digest: N, artifact: 7 * Math.ceil(N / 256), label: 7 });
    // Each entry is found at its own leaf (its digest is its own).
    expect(expected.byDigest).toEqual(Array.from({ length: N }, (_, i) => i));
    expect(expected.fileBytesPerEntry).toBeLessThanOrEqual(120);

    // Killed once it says part of the index is committed (a JSON log line on stderr each time).
    const child = rebuild(cut);
    const exited = once(child, 'exit');
    let partial = 0;
    child.stderr!.on('data', (d: Buffer) => {
      const committed = /"indexed":(\d+)/.exec(d.toString());
      if (committed && partial === 0) {
        partial = Number(committed[1]);
        child.kill('SIGKILL');
      }
    });
    const [, signal] = await exited;
    expect(signal).toBe('SIGKILL');
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(N);

    const resumed = await finish(rebuild(cut));
    expect(resumed.code).toBe(0);
    expect(resumed.out.indexed).toBe(N);
    expect(resumed.out.resumedFrom).toBeGreaterThanOrEqual(partial);
    expect(await answers(cut)).toEqual({ ...expected, fileBytesPerEntry: expect.any(Number) });

    // Run again on a whole index, it starts over (and ends the same).
    const again = await finish(rebuild(cut));
    expect(again.out).toMatchObject({ indexed: N, resumedFrom: 0 });
  }, 300_000);
});
