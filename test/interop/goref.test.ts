// The read path's Go reference (bench/goref, x/mod's tlog over the same tiles) answers what
// our server answers, byte for byte: GET /api/ledger/entry?id=… and ?hash=… and
// /api/ledger/consistency over many valid queries across tile boundaries, and the refusals
// Go validates as we do (status, code and message). `npm run bench -- api` measures our
// server's CPU per request against it: this keeps that comparison one of equal work.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entryId } from '../../src/core/entry.js';
import { LogReader } from '../../src/read/reader.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { buildAnchorLog, digestOf } from '../../bench/anchor-log.js';
import { type Goref, startGoref } from '../../bench/goref/goref.js';
import { scratchDir } from '../helpers/tmp.js';
import { startTestServer } from '../api/server.js';

const ORIGIN = 'goref.test/log';
/** A few thousand entries: 11 full level-0 tiles and a partial one under a partial level-1 tile. */
const SIZE = 3000;

/** A seeded generator, so a failure names queries that can be asked again. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

interface Answer {
  readonly status: number;
  readonly type: string | null;
  readonly body: string;
}

async function get(base: string, path: string): Promise<Answer> {
  const res = await fetch(base + path);
  return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
}

describe('goref, the Go reference of the read path', () => {
  let dataDir: string;
  let ours: RunningServer;
  let goref: Goref;
  const ids: string[] = [];

  beforeAll(async () => {
    dataDir = scratchDir('stele-goref-');
    // Waves of 700: the tiles are written by several batches, as a live log's are.
    await buildAnchorLog(dataDir, ORIGIN, SIZE, 700);
    const reader = new LogReader(new FsObjectStore(join(dataDir, 'log')), { unverified: true });
    for (let seq = 0; seq < SIZE; seq++) ids.push(entryId(seq, (await reader.entry(seq, SIZE)).entryHash));
    ours = await startTestServer({ dataDir, origin: ORIGIN });
    const cpFile = join(dataDir, 'checkpoint.json');
    writeFileSync(cpFile, await (await fetch(`${ours.url}/api/ledger/checkpoint`)).text());
    goref = await startGoref(join(dataDir, 'log'), cpFile);
  }, 120_000);

  afterAll(async () => {
    goref?.child.kill();
    await ours?.close();
  });

  /** Asks both servers each path; every answer must be the same status, type and bytes. */
  async function same(paths: readonly string[], status: number): Promise<void> {
    for (const path of paths) {
      const [a, b] = await Promise.all([get(ours.url, path), get(goref.url, path)]);
      expect(a.status, path).toBe(status);
      expect({ path, ...b }).toEqual({ path, ...a });
    }
  }

  const edges = [0, 1, 255, 256, 257, 511, 512, 2047, 2048, 2049, SIZE - 256, SIZE - 2, SIZE - 1];

  it('answers entry?id with the same bytes', async () => {
    const next = random(1);
    const seqs = [...edges, ...Array.from({ length: 300 }, () => Math.floor(next() * SIZE))];
    await same(
      seqs.map((s) => `/api/ledger/entry?id=${ids[s]}`),
      200,
    );
  });

  it('answers entry?hash with the same bytes, upper case too', async () => {
    const next = random(2);
    const seqs = [...edges, ...Array.from({ length: 300 }, () => Math.floor(next() * SIZE))];
    await same(
      seqs.map((s) => `/api/ledger/entry?hash=${digestOf(s)}`),
      200,
    );
    await same([`/api/ledger/entry?hash=${digestOf(2990).toUpperCase()}`], 200);
  });

  it('answers consistency with the same bytes', async () => {
    const next = random(3);
    const pairs: [number, number][] = [
      [1, 1],
      [1, SIZE],
      [SIZE, SIZE],
      [256, 512],
      [255, 257],
      [2048, SIZE],
      [1, 2],
    ];
    for (let k = 0; k < 300; k++) {
      const a = 1 + Math.floor(next() * SIZE);
      pairs.push([a, a + Math.floor(next() * (SIZE - a + 1))]);
    }
    await same(
      pairs.map(([a, b]) => `/api/ledger/consistency?first=${a}&second=${b}`),
      200,
    );
  });

  it('refuses what we refuse, with the same status, code and message', async () => {
    const e = '/api/ledger/entry?';
    const c = '/api/ledger/consistency?';
    await same(
      [
        `${e}id=led_5_zz`,
        `${e}id=led_05_${ids[5]!.slice(-12)}`,
        `${e}id=${ids[5]}&id=${ids[5]}`,
        `${e}id=${ids[5]}&hash=${digestOf(5)}`,
        `${e}id=${ids[5]}&color=red`,
        e,
        `${e}format=xml&id=${ids[5]}`,
        `${e}hash=${'g'.repeat(64)}`,
        `${e}hash=${'a'.repeat(63)}`,
        `${e}hash=${'a'.repeat(129)}`,
        `${c}first=0&second=5`,
        `${c}first=01&second=5`,
        `${c}first=-1&second=5`,
        `${c}first=abc&second=5`,
        `${c}second=5`,
        `${c}first=5`,
        `${c}first=6&second=5`,
        `${c}first=1&second=${SIZE + 1}`,
        `${c}first=1&second=99999999999999999`,
        `${c}first=1&second=2&third=3`,
        `${c}first=1&first=1&second=2`,
        `${c}first=%ZZ&second=2`,
        `${c}first=%C0%AF&second=2`,
      ],
      400,
    );
    await same(
      [
        `${e}id=led_${SIZE}_${ids[5]!.slice(-12)}`,
        `${e}id=led_5_${ids[6]!.slice(-12)}`,
        `${e}hash=${digestOf(SIZE + 7)}`,
      ],
      404,
    );
  });
});
