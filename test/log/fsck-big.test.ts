// fsck through the library over a log with a full level-1 tile (65,536 entries and more,
// too slow to copy for every CLI test): a flipped byte in tile/1/000 is named, and the
// figure of the whole check (entries/s) is printed.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fsckLog } from '../../src/log/fsck.js';
import { localTarget } from '../../src/log/targets.js';
import { makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';

const N = 70_000;
let dataDir: string;

beforeAll(async () => {
  dataDir = join(scratchDir('stele-fsck-big-'), 'data');
  await makeLog(dataDir, 'fsck-big.test/log', [N]);
}, 120_000);

describe('fsck over a log with a full level-1 tile', () => {
  it('passes it clean, then names tile/1/000 once a byte of it is flipped', async () => {
    const started = performance.now();
    const clean = await fsckLog(await localTarget(dataDir));
    const seconds = (performance.now() - started) / 1000;
    console.log(`fsck: ${N} entries in ${seconds.toFixed(2)} s = ${Math.round(N / seconds)} entries/s`);
    expect(clean.ok).toBe(true);
    expect(clean.audit?.hashTilesChecked).toBe(Math.ceil(N / 256) + 3); // level 0; tile/1/000, tile/1/001.p/17; tile/2/000.p/1

    const file = join(dataDir, 'log/tile/1/000');
    const bytes = readFileSync(file);
    bytes[32 * 200 + 3]! ^= 0x80;
    writeFileSync(file, bytes);
    const r = await fsckLog(await localTarget(dataDir));
    expect(r.ok).toBe(false);
    expect(r.firstBad).toBe('tile/1/000');
    expect(r.audit?.failure?.message).toMatch(/tile\/1\/000 hash 200 \(leaves 51200–51455\) differs/);
  }, 120_000);
});
