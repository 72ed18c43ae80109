// A log whose lookup index is missing (lost, or dropped by an upgrade) starts serving at once
// and rebuilds the index beside it (issue 35): the checkpoint, the tiles and lookups by id
// answer from the first request; a lookup by digest the index does not cover yet is a 503
// index_not_ready, never a 404; an anchor waits behind the same 503 rather than record a
// second entry for a published digest; once rebuilt, both answer as before.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { entryId } from '../../src/core/entry.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import type { AnchorReceipt } from '../../src/sequencer/contract.js';
import { type RunningServe, ensureBuilt, startServe } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'index-missing.example/log';
// Enough entries that rebuilding their index takes seconds, while the first requests take milliseconds.
const N = 60_000;
const digestOf = (i: number) => (0x9000000 + i).toString(16).padStart(64, '0');

let serve: RunningServe;
const receipts: AnchorReceipt[] = [];

/** A log of `n` entries whose index is gone; the receipts of its anchors. */
async function indexlessLog(n = N): Promise<{ dataDir: string; receipts: AnchorReceipt[] }> {
  const dataDir = scratchDir('stele-index-missing-');
  const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5 });
  const receipts: AnchorReceipt[] = [];
  for (let from = 0; from < n; from += 10_000) {
    const batch = Array.from({ length: 10_000 }, (_, k) =>
      log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + k))),
    );
    receipts.push(...(await Promise.all(batch)));
  }
  await log.sequencer.close();
  rmSync(join(dataDir, 'private', 'index'), { recursive: true, force: true });
  return { dataDir, receipts };
}

beforeAll(async () => {
  await ensureBuilt();
  const log = await indexlessLog();
  receipts.push(...log.receipts);
  serve = await startServe({ dataDir: log.dataDir, origin: ORIGIN });
}, 180_000);

afterAll(async () => {
  await serve?.stop();
});

const get = async (path: string) => {
  const res = await fetch(`${serve.url}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> & { error?: { code: string } } };
};

describe('a log started without its index', () => {
  it('serves the checkpoint and lookups by id at once; a digest not yet indexed is 503, never 404', async () => {
    const last = receipts[N - 1]!;
    const [byHash, checkpoint, byId] = await Promise.all([
      get(`/api/ledger/entry?hash=${digestOf(N - 1)}`),
      get('/api/ledger/checkpoint'),
      get(`/api/ledger/entry?id=${entryId(last.seq, last.entryHash)}`),
    ]);
    expect(byHash.status).toBe(503);
    expect(byHash.body.error?.code).toBe('index_not_ready');
    expect(checkpoint.status).toBe(200);
    expect(byId.status).toBe(200);
  });

  it('refuses an anchor with 503 while the index catches up (no second entry for a published digest)', async () => {
    const res = await fetch(`${serve.url}/api/ledger/anchor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ digest: digestOf(N - 1) }),
    });
    const body = (await res.json()) as { error?: { code: string }; leafIndex?: number };
    // Either refused (still rebuilding) or answered with the existing entry: never a new one.
    if (res.status === 503) expect(body.error?.code).toBe('index_not_ready');
    else expect([res.status, body.leafIndex]).toEqual([200, N - 1]);
  });

  it('once rebuilt, a digest is found and a re-sent digest answers its published entry', async () => {
    let found = await get(`/api/ledger/entry?hash=${digestOf(N - 1)}`);
    for (let i = 0; found.status === 503 && i < 600; i++) {
      await new Promise((r) => setTimeout(r, 100));
      found = await get(`/api/ledger/entry?hash=${digestOf(N - 1)}`);
    }
    expect(found.status).toBe(200);
    const res = await fetch(`${serve.url}/api/ledger/anchor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ digest: digestOf(7) }),
    });
    const body = (await res.json()) as { leafIndex?: number };
    expect([res.status, body.leafIndex]).toEqual([200, 7]);
    const fresh = await fetch(`${serve.url}/api/ledger/anchor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ digest: digestOf(N + 1) }),
    });
    expect(fresh.status).toBe(201);
  });
});

describe('a shutdown while the index catches up', () => {
  it('stops the catch-up where it is (exit 0, never waiting for the whole log); the next start goes on to cover it', async () => {
    // Four times the log above: its catch-up outlasts a loaded machine's start by far.
    const size = 4 * N;
    const { dataDir } = await indexlessLog(size);
    const first = await startServe({ dataDir, origin: ORIGIN });
    await first.stop();
    expect([first.proc.exitCode, first.proc.signalCode]).toEqual([0, null]);
    const index = new LmdbIndex(join(dataDir, 'private', 'index'));
    expect(await index.indexedSize()).toBeLessThan(size);
    await index.close();

    const again = await startServe({ dataDir, origin: ORIGIN });
    try {
      await expect
        .poll(async () => (await fetch(`${again.url}/api/ledger/entry?hash=${digestOf(size - 1)}`)).status, {
          timeout: 120_000,
          interval: 200,
        })
        .toBe(200);
    } finally {
      await again.stop();
    }
  }, 240_000);
});
