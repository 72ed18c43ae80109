// The hot reads on node:http (src/api/fast-reads.ts) answer exactly as the Koa application
// does: one corpus of raw requests (valid, invalid, oversized, odd percent-encodings,
// repeated parameters, HEAD, other methods, variants of the paths) sent to a server whose
// listener has the fast path and to one that is the Koa app alone, over the same log, must
// get the same status line, headers (Date aside) and bytes, on a kept-alive connection and
// on one being closed, and while the server is shutting down (Connection: close); and
// /metrics must have counted every request of the corpus alike.
import { connect } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppOptions, createApp } from '../../src/api/app.js';
import { appListener } from '../../src/api/fast-reads.js';
import type { LedgerService } from '../../src/api/ledger.js';
import { Metrics } from '../../src/api/metrics.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { entryId } from '../../src/core/entry.js';
import { type HttpServer, listenHttp } from '../../src/http/server.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { LogReader } from '../../src/read/reader.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { digestOf } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'fast-reads.test/log';
/** One full level-0 tile and a partial one. */
const SIZE = 300;

/** Sends `request` twice on one connection (kept alive, then closed); the raw bytes answered, Date masked. */
function exchange(url: string, request: (connection: string) => string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error('no answer within 20 s')), 20_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(
        Buffer.concat(chunks)
          .toString('latin1')
          .replace(/\r\nDate: [^\r]*/g, '\r\nDate: -'),
      );
    });
    socket.write(request('keep-alive') + request('close'));
  });
}

const get =
  (target: string, headers = '', method = 'GET') =>
  (connection: string) =>
    `${method} ${target} HTTP/1.1\r\nHost: test\r\n${headers}Connection: ${connection}\r\n\r\n`;

describe('the hot reads on node:http ahead of Koa', () => {
  let fast: HttpServer;
  let koa: HttpServer;
  let closing = false;
  const options: AppOptions[] = [];
  let ids: string[] = [];
  let log: Awaited<ReturnType<typeof openLocalLog>>;
  let index: LmdbIndex;

  beforeAll(async () => {
    const dataDir = scratchDir('stele-fast-reads-');
    index = new LmdbIndex(join(dataDir, 'index'));
    log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 2, listeners: [index] });
    await Promise.all(
      Array.from({ length: SIZE }, (_, i) =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(i), { artifact: `a${i}` })),
      ),
    );
    const reader = new LogReader(log.store);
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
    for (let i = 0; i < 2; i++)
      options.push({
        ledger,
        objects: log.store,
        logger: pino({ level: 'silent' }),
        metrics: new Metrics(),
        closing: () => closing,
      });
    fast = await listenHttp(appListener(createApp(options[0]!), options[0]!), '127.0.0.1', 0);
    koa = await listenHttp(createApp(options[1]!).callback(), '127.0.0.1', 0);
    const cp = log.sequencer.checkpoint;
    ids = await Promise.all([0, 7, 255, 256, 299].map(async (s) => entryId(s, (await reader.entry(s, cp)).entryHash)));
  }, 60_000);

  afterAll(async () => {
    await fast?.close();
    await koa?.close();
    await log?.sequencer.close();
    await index?.close();
  });

  const e = '/api/ledger/entry';
  const c = '/api/ledger/consistency';
  const corpus = () => [
    // Valid, each key and format.
    ...ids.map((id) => get(`${e}?id=${id}`)),
    get(`${e}?hash=${digestOf(7)}`),
    get(`${e}?hash=${digestOf(299).toUpperCase()}`),
    get(`${e}?leaf=256`),
    get(`${e}?artifact=${'art_'}${'0'.repeat(24)}`),
    get(`${e}?id=${ids[1]}&format=json`),
    get(`${e}?id=${ids[1]}&format=tlog-proof`),
    get(`${e}?leaf=3`, 'Accept: text/x.tlog-proof\r\n'),
    get(`${e}?leaf=3`, 'Accept: application/json, text/x.tlog-proof;q=0.5\r\n'),
    get(`${c}?first=1&second=${SIZE}`),
    get(`${c}?first=200&second=257`),
    get(`${c}?second=257&first=200`),
    get(`${c}?first=${SIZE}&second=${SIZE}`),
    // Invalid, and not found.
    get(`${e}?id=led_7_zz`),
    get(`${e}?id=led_07_${ids[1]!.slice(-12)}`),
    get(`${e}?id=led_${SIZE}_${ids[1]!.slice(-12)}`),
    get(`${e}?id=led_8_${ids[1]!.slice(-12)}`),
    // The right leaf, its id's hash prefix wrong in the last digit only.
    get(`${e}?id=${ids[1]!.slice(0, -1)}${ids[1]!.endsWith('0') ? '1' : '0'}`),
    get(`${e}?hash=${digestOf(SIZE + 1)}`),
    get(`${e}?hash=xyz`),
    get(`${e}?leaf=${SIZE}`),
    get(`${e}?leaf=-1`),
    get(`${e}?format=xml&leaf=1`),
    get(e),
    get(`${e}?`),
    get(`${e}?leaf=1&hash=${digestOf(1)}`),
    get(`${e}?leaf=1&colour=red`),
    get(`${c}?first=0&second=5`),
    get(`${c}?first=6&second=5`),
    get(`${c}?first=1&second=${SIZE + 1}`),
    get(`${c}?first=1`),
    get(`${c}?first=1&second=2&x=1`),
    get(`${c}?first=1e2&second=200`),
    get(`${c}?first=9007199254740993&second=1`),
    // Oversized values and a query past the header limit.
    get(`${e}?hash=${'a'.repeat(129)}`),
    get(`${c}?first=${'1'.repeat(200)}&second=2`),
    get(`${e}?leaf=1&pad=${'x'.repeat(20_000)}`),
    // Odd percent-encodings: escaped names and digits, '+', malformed, overlong, surrogate, NUL.
    get(`${e}?%6Ceaf=1`),
    get(`${c}?first=%31&second=%32`),
    get(`${c}?first=1+&second=2`),
    get(`${c}?first=%2B1&second=2`),
    get(`${e}?leaf=%ZZ`),
    get(`${e}?leaf=%C0%AF`),
    get(`${e}?leaf=%ED%A0%80`),
    get(`${e}?leaf=1%00`),
    get(`${e}?leaf=1%26hash=2`),
    get(`${e}?leaf=1&&`),
    get(`${e}?=1&leaf=1`),
    get(`${e}?leaf`),
    // Repeated parameters.
    get(`${e}?leaf=1&leaf=1`),
    get(`${e}?leaf=1&format=json&format=json`),
    get(`${c}?first=1&first=2&second=3`),
    // Other methods and variants of the paths (the Koa app answers these on both).
    get(`${e}?leaf=1`, '', 'HEAD'),
    get(`${c}?first=1&second=2`, '', 'HEAD'),
    get(`${e}?leaf=1`, 'Content-Length: 0\r\n', 'POST'),
    get(`${c}?first=1&second=2`, 'Content-Length: 0\r\n', 'DELETE'),
    get(`${e}?leaf=1`, '', 'OPTIONS'),
    get(`${e}?leaf=1`, '', 'PROPFIND'),
    get(`${e}/?leaf=1`),
    get(`${e}?leaf=1#frag`),
    get(`http://test${e}?leaf=1`),
    get(`${c.toUpperCase()}?first=1&second=2`),
    get(`${e}%3Fleaf=1`),
    get('/api/ledger/checkpoint'),
  ];

  async function sameAnswers(): Promise<void> {
    for (const request of corpus()) {
      const [a, b] = await Promise.all([exchange(fast.url, request), exchange(koa.url, request)]);
      expect(a, request('keep-alive')).toBe(b);
      expect(a).toMatch(/^HTTP\/1\.1 \d{3} /);
    }
  }

  it('answers every request of the corpus with the same bytes as the Koa app', async () => {
    await sameAnswers();
  });

  it('asks clients to close alike while the server is shutting down', async () => {
    closing = true;
    try {
      await sameAnswers();
      for (const srv of [fast, koa])
        expect(await exchange(srv.url, get(`${e}?leaf=1`))).toContain('\r\nConnection: close\r\n');
    } finally {
      closing = false;
    }
  });

  it('counts every request in /metrics as the Koa app does', async () => {
    const counts = async (o: AppOptions) =>
      (await o.metrics.registry.getSingleMetricAsString('stele_http_requests_total'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .sort();
    const [a, b] = [await counts(options[0]!), await counts(options[1]!)];
    expect(a).toEqual(b);
    // Both runs of the corpus, two requests per exchange: the valid /entry answers among them.
    expect(a.join('\n')).toMatch(/route="\/api\/ledger\/entry",method="GET",status="200"} [1-9]/);
  });
});
