// The API over an index that is being rebuilt (an upgrade, a lost index): what the index
// already covers is answered, and correctly; what it does not yet cover is a 503
// `index_not_ready`, never a 404 that would say the entry is not in the log. Lookups that
// need no index (by id) answer throughout. A real log (sequencer, store, reader) and a real
// LMDB index filled from its record bundles, as a start fills it.
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/api/app.js';
import type { LedgerService } from '../../src/api/ledger.js';
import { Metrics } from '../../src/api/metrics.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { catchUpIndex } from '../../src/index/catchup.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { LogReader } from '../../src/read/reader.js';
import type { AnchorReceipt } from '../../src/sequencer/contract.js';
import { getJson } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'rebuilding.example/log';
const N = 300;
const digestOf = (i: number) => (0x7000 + i).toString(16).padStart(64, '0');

let log: Awaited<ReturnType<typeof openLocalLog>>;
let index: LmdbIndex;
let server: Server;
let api: string;
const receipts: AnchorReceipt[] = [];

beforeAll(async () => {
  const dataDir = scratchDir('stele-rebuilding-');
  log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5 });
  receipts.push(
    ...(await Promise.all(
      Array.from({ length: N }, (_, i) =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(i), { artifact: `app-${i}.bin` })),
      ),
    )),
  );
  const reader = new LogReader(log.store);
  // The index being rebuilt: the first tile's record bundle indexed, not yet the rest.
  index = new LmdbIndex(join(dataDir, 'rebuilding-index'));
  await catchUpIndex(index, reader, 256, log.sequencer.checkpoint);
  const ledger: LedgerService = {
    origin: ORIGIN,
    publicKey: log.signer.publicKey,
    reader,
    index,
    checkpoint: () => log.sequencer.checkpoint,
    lifetimeEntries: () => log.sequencer.lifetimeEntries,
    witnesses: [],
    witnessThreshold: 0,
  };
  const app = createApp({ ledger, objects: log.store, logger: pino({ level: 'silent' }), metrics: new Metrics() });
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await index?.close();
  await log?.sequencer.close();
});

describe('the API while its index is rebuilt', () => {
  it('answers what the index covers, 503 for what it does not yet, and 404 only once it covers the tree', async () => {
    expect(log.sequencer.checkpoint.size).toBe(N);
    // Covered: found, the right entry.
    const early = await getJson(`${api}/api/ledger/entry?hash=${digestOf(7)}`);
    expect(early.status).toBe(200);
    expect(early.body.leafIndex).toBe(7);
    // Not covered yet: 503 with Retry-After, for a digest, an artifact id, a search and an absent digest.
    for (const path of [
      `entry?hash=${digestOf(290)}`,
      `entry?artifact=${receipts[290]!.entry.artifactId}`,
      'search?artifact=app-290.bin',
      `entry?hash=${digestOf(N + 1)}`,
    ]) {
      const res = await fetch(`${api}/api/ledger/${path}`);
      expect(res.status, path).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('index_not_ready');
    }
    // By id the index is not needed.
    const byId = await getJson(`${api}/api/ledger/entry?id=${idOf(290)}`);
    expect(byId.status).toBe(200);
    expect(byId.body.leafIndex).toBe(290);

    // Rebuilt: everything found, and an absent digest is a 404.
    await catchUpIndex(index, new LogReader(log.store), N, log.sequencer.checkpoint);
    expect((await getJson(`${api}/api/ledger/entry?hash=${digestOf(290)}`)).body.leafIndex).toBe(290);
    const search = await getJson(`${api}/api/ledger/search?artifact=app-290.bin`);
    expect(search.body.matches.map((m: { leafIndex: number }) => m.leafIndex)).toEqual([290]);
    const absent = await getJson(`${api}/api/ledger/entry?hash=${digestOf(N + 1)}`);
    expect(absent.status).toBe(404);
    expect(absent.body.error.code).toBe('entry_not_found');
  });
});

/** An entry's id (led_<leaf>_<12 hex of its hash>), from its receipt. */
function idOf(seq: number): string {
  return `led_${seq}_${Buffer.from(receipts[seq]!.entryHash).toString('hex').slice(0, 12)}`;
}
