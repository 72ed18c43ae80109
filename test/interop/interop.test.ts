// Interoperability, the project's own check: a running `stele serve` is read by
// test/interop (Go, nothing but golang.org/x/mod/sumdb/note and sumdb/tlog) as any C2SP
// tlog-tiles client would read it: the checkpoint's signature with the log's vkey, every
// entry bundle and hash tile against Go's recomputation, inclusion and consistency proofs
// through tlog's TileHashReader, and the JSON API's proofs hash for hash against Go's.
// Then the same check, on copies of the log broken on purpose, must fail.
import { createHash, randomBytes } from 'node:crypto';
import { cp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, postAnchor, type RunningServe, startServe } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';
import { runSteleinterop, steleinteropBinary } from './build.js';

const ORIGIN = 'interop.example/go';
// Waves end below, at and beyond a level-0 tile boundary (256), then leave a partial
// level-0 tile (520 = 2 full tiles + 8) under a partial level-1 tile.
const WAVES = [1, 255, 256, 257, 520];
const OLD_AT = [1, 256, 257];

/** A vkey with the log's name but another Ed25519 key (its key hash computed per signed-note). */
function strangerVkey(name: string): string {
  const key = Buffer.concat([Buffer.from([0x01]), randomBytes(32)]);
  const keyHash = createHash('sha256').update(`${name}\n`).update(key).digest().subarray(0, 4);
  return `${name}+${keyHash.toString('hex')}+${key.toString('base64')}`;
}

describe('steleinterop (Go reference tlog/note) against a running stele serve', () => {
  let root: string;
  let serve: RunningServe;
  const oldFiles: string[] = [];

  beforeAll(async () => {
    // Fails (never skips) without Go: the error names the command that installs it.
    await Promise.all([steleinteropBinary(), ensureBuilt()]);
    root = scratchDir('stele-interop-');
    serve = await startServe({ dataDir: path.join(root, 'data'), origin: ORIGIN });
    const limit = pLimit(32);
    let next = 0;
    for (const target of WAVES) {
      const wave: Promise<unknown>[] = [];
      for (; next < target; next++) {
        const digest = createHash('sha256').update(`interop/${next}`).digest('hex');
        const artifact: Record<string, string> = next % 3 === 0 ? { artifact: `release-${next}.tgz` } : {};
        wave.push(limit(() => postAnchor(serve.url, digest, artifact)));
      }
      await Promise.all(wave);
      if (OLD_AT.includes(target)) {
        const note = await (await fetch(`${serve.url}/checkpoint`)).text();
        const file = path.join(root, `old-${target}.checkpoint`);
        await writeFile(file, note);
        oldFiles.push(file);
      }
    }
    const cpNow = await (await fetch(`${serve.url}/checkpoint`)).text();
    expect(cpNow.split('\n')[1]).toBe(String(WAVES[WAVES.length - 1]));
  }, 600_000);

  afterAll(async () => {
    await serve?.stop();
  });

  const args = (log: string, vkey = serve.vkey) => [
    '-log',
    log,
    '-vkey',
    vkey,
    '-origin',
    ORIGIN,
    '-samples',
    '120',
    '-old-size',
    '1,2,255,256,257,511,519',
    ...oldFiles.flatMap((f) => ['-old', f]),
  ];

  it('passes every check over HTTP, and the API proofs equal Go’s', async () => {
    const r = await runSteleinterop([...args(serve.url), '-api', serve.url]);
    const detail = `${r.stdout}\n${r.stderr}`;
    expect(r.failures, detail).toEqual([]);
    expect(r.code, detail).toBe(0);
    expect(r.failed, detail).toBe(0);
    expect(r.stdout).toMatch(/^PASS checkpoint signature \(note\.Open with interop\.example\/go\): size 520, root /m);
    expect(r.stdout).toContain('PASS root of the entry bundles (tlog.TreeHash over 520 leaves) equals the signed root');
    // Level 0: tiles 0, 1 and partial 2 (width 8); level 1: partial tile 0 (width 2).
    expect(r.stdout).toContain('PASS hash tiles: all 4 equal tlog.ReadTileData of the recomputed tree');
    expect(r.stdout).toContain('PASS root through tlog.TileHashReader equals the signed root');
    expect(r.stdout).toContain(
      "PASS inclusion: 120 leaves proved with tlog.ProveRecord/CheckRecord through the tiles, and the API's auditPath equals Go's proof",
    );
    for (const size of OLD_AT) expect(r.stdout).toContain(`PASS consistency ${size}->520 (old checkpoint `);
    for (const size of [1, 2, 255, 256, 257, 511, 519])
      expect(r.stdout).toContain(`PASS consistency ${size}->520 (size ${size})`);
    expect(r.passed).toBe(5 + OLD_AT.length + 7);
  });

  it('fails the signature check with another key under the log’s name', async () => {
    const r = await runSteleinterop(args(serve.url, strangerVkey(ORIGIN)));
    expect(r.code).toBe(1);
    expect(r.failures.join('\n')).toMatch(/^FAIL checkpoint signature and body: note\.Open: /);
    expect(r.passed).toBe(0);
  });

  it('fails when a hash tile is corrupted (a copy of the log read as a directory)', async () => {
    const copy = path.join(root, 'tile-broken');
    await cp(path.join(serve.dataDir, 'log'), copy, { recursive: true });
    const good = await runSteleinterop(args(copy));
    expect(good.failures, good.stdout).toEqual([]);
    const file = path.join(copy, 'tile', '0', '001');
    const bytes = await readFile(file);
    bytes[32 * 40 + 5]! ^= 0x01;
    await writeFile(file, bytes);
    const r = await runSteleinterop(args(copy));
    expect(r.code).toBe(1);
    const fails = r.failures.join('\n');
    expect(fails).toContain('FAIL tile tile/0/001: differs from the hashes recomputed from the entries');
    expect(fails).toContain('FAIL hash tiles: 1 of 4 differ');
    // TileHashReader authenticates the tile against the signed root, so proofs through it fail.
    expect(fails).toMatch(/FAIL (inclusion|consistency) .*tlog\.Prove(Record|Tree)/);
  });

  it('fails when an entry bundle is corrupted', async () => {
    const copy = path.join(root, 'bundle-broken');
    await cp(path.join(serve.dataDir, 'log'), copy, { recursive: true });
    const file = path.join(copy, 'tile', 'entries', '000');
    const bytes = await readFile(file);
    bytes[34 * 100 + 2 + 7]! ^= 0x80; // inside entry 100's entry_hash
    await writeFile(file, bytes);
    const r = await runSteleinterop(args(copy));
    expect(r.code).toBe(1);
    expect(r.failures.join('\n')).toMatch(
      /^FAIL root of the entry bundles: [0-9a-f]{64} from 520 entries, checkpoint says /m,
    );
  });
});
