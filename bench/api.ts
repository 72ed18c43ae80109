// Issue 36 figures: GET /api/ledger/entry (by id and by hash) and consistency proofs over a
// 1,000,000-entry log, uniform random queries, each route's server CPU per request (from
// /proc) against the Go reference bench/goref (x/mod's tlog over the same tiles, answers
// checked byte-identical by test/interop/goref.test.ts) in interleaved rounds, with bare Koa
// and bare node:http at the same answer size as context; then POST /api/ledger/anchor at 256
// connections. Servers run as child processes pinned to CPU 0, autocannon (64 connections)
// drives them from this process on CPU 1.
// BENCH_STELE_BASE=<checkout> also measures that checkout's server (its dist/) on the same
// log, route by route beside this one, its figures prefixed `base_`: a before/after in one run.
// BENCH_CONNECTIONS sets the read connections (default 64); BENCH_API_READS_ONLY=1 skips the anchors;
// BENCH_API_ROUTES=tile,tile_bundle (names below) measures only those read routes. The tile
// routes read /tile/… as a CDN in front of the origin would (each tile authenticated before
// it is served: their cost per request is that check's).
// BENCH_SERVER_NODE_ARGS passes Node flags to every server child, bare Koa's too (e.g.
// `--max-semi-space-size=64`: a young generation large enough for the read path's garbage).
// BENCH_API_LOG=<dir> keeps the log there and reuses it on the next run (building a
// 1,000,000-entry log takes most of a minute of both CPUs); without it the log is temporary.
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { LogReader } from '../src/read/reader.js';
import { entryId } from '../src/core/entry.js';
import { formatTileIndex } from '../src/core/tiles.js';
import { startGoref } from './goref/goref.js';
import { buildAnchorLog, digestOf } from './anchor-log.js';
import { QUICK, figure, note, percentile, pinLoadGenerator, processCpuMs } from './util.js';

const LOG_SIZE = QUICK ? 100_000 : 1_000_000;
const DURATION = QUICK ? 5 : 10;
const WARMUP = QUICK ? 3 : 10;
/** Rounds per read route, and the seconds of each slice in a round (see measureRoute). */
const ROUNDS = QUICK ? 2 : 5;
const SLICE = QUICK ? 2 : 3;
const ORIGIN = 'bench.stele/api';
const ROOT = new URL('..', import.meta.url).pathname;
const BASE = process.env.BENCH_STELE_BASE;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const READS_ONLY = process.env.BENCH_API_READS_ONLY === '1';
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
const ROUTES = process.env.BENCH_API_ROUTES?.split(',').filter(Boolean);
const KEPT_LOG = process.env.BENCH_API_LOG;
/** A full level-0 tile's index, at random. */
const fullTile = () => formatTileIndex(Math.floor(Math.random() * Math.floor(LOG_SIZE / 256)));

// Set once the log is built (which uses both CPUs), before any server starts.
let pinned: ReturnType<typeof pinLoadGenerator>;

/** A server under load: its URL and its process (whose CPU time /proc gives). */
interface Server {
  readonly url: string;
  readonly child: ChildProcess;
}

async function startChild(args: string[], cwd = ROOT): Promise<Server> {
  const node: [string, string[]] = [process.execPath, [...SERVER_NODE_ARGS, ...args]];
  const [command, commandArgs] = pinned ? pinned.wrap(...node) : node;
  const child = spawn(command, commandArgs, { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
  // A child that exits first (a locked data directory) would otherwise leave this waiting on nothing.
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`${args.join(' ')} exited with ${code} before listening`);
  });
  const [line] = (await Promise.race([once(child.stdout!, 'data'), exited])) as [Buffer];
  exited.catch(() => {});
  return { url: JSON.parse(line.toString().split('\n')[0]!).url as string, child };
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await once(child, 'exit');
}

// '/' answers a tiny JSON body; '/pad/<n>' one padded to n bytes, the size of a proof route's
// answer, so the HTTP and socket cost of the bytes themselves is in the baseline too.
const BARE_KOA = `
import Koa from 'koa';
const app = new Koa();
const pads = new Map();
app.use((ctx) => {
  const n = ctx.path.startsWith('/pad/') ? Number(ctx.path.slice(5)) : 0;
  if (n > 0 && !pads.has(n)) pads.set(n, 'x'.repeat(Math.max(0, n - 40)));
  ctx.body = n > 0 ? { ok: true, n: Math.random(), pad: pads.get(n) } : { ok: true, n: Math.random() };
});
const s = app.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: 'http://127.0.0.1:' + s.address().port })));
process.on('SIGTERM', () => s.close(() => process.exit(0)));
`;

// The same answers on bare node:http: the floor under any framework.
const BARE_NODE = `
import { createServer } from 'node:http';
const pads = new Map();
const s = createServer((req, res) => {
  const n = req.url.startsWith('/pad/') ? Number(req.url.slice(5)) : 0;
  if (n > 0 && !pads.has(n)) pads.set(n, 'x'.repeat(Math.max(0, n - 40)));
  const body = JSON.stringify(n > 0 ? { ok: true, n: Math.random(), pad: pads.get(n) } : { ok: true, n: Math.random() });
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
});
s.keepAliveTimeout = 65000;
s.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: 'http://127.0.0.1:' + s.address().port })));
process.on('SIGTERM', () => s.close(() => process.exit(0)));
`;

interface Run {
  rps: number;
  /** Mean bytes received per answer, headers included. */
  bytesPerAnswer: number;
  p50: number;
  p99: number;
  requests: number;
  errors: number;
}

async function load(
  url: string,
  connections: number,
  paths: () => string,
  init: Partial<autocannon.Options> = {},
): Promise<Run> {
  const result = await autocannon({
    url,
    connections,
    duration: DURATION,
    timeout: 30,
    requests: [{ setupRequest: (req) => ({ ...req, path: paths() }) }],
    // As a CDN asks an origin: record bundles come gzip (the others are never compressed).
    headers: { 'accept-encoding': 'gzip' },
    ...init,
  });
  return {
    rps: result.requests.average,
    bytesPerAnswer: result.requests.total > 0 ? result.throughput.total / result.requests.total : 0,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    errors: result.errors + result.non2xx,
  };
}

async function metrics(url: string): Promise<(name: string) => number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return (name) => {
    const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?(?:e[-+]?\\d+)?)`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  };
}

function serveArgs(dataDir: string): string[] {
  return [
    'dist/cli/main.js',
    'serve',
    '--data-dir',
    dataDir,
    '--origin',
    ORIGIN,
    '--port',
    '0',
    '--json',
    '--log-level',
    'warn',
  ];
}

/** A load run, with the server's CPU per answer over it. */
interface Slice extends Run {
  cpuPerRequest: number;
}

async function slice(srv: Server, paths: () => string, init: Partial<autocannon.Options> = {}): Promise<Slice> {
  const cpu0 = processCpuMs(srv.child.pid);
  const run = await load(srv.url, CONNECTIONS, paths, { duration: SLICE, ...init });
  return { ...run, cpuPerRequest: (processCpuMs(srv.child.pid) - cpu0) / run.requests };
}

const median = (xs: readonly number[]): number => percentile(xs, 50);

/** The floors every route is seen beside: bare Koa and bare node:http answering padded JSON. */
interface Floors {
  readonly koa: Server;
  readonly node: Server;
  /** Their status line and headers: padding makes up the rest of a route's answer. */
  readonly headerBytes: number;
}

/**
 * One read route on one server against the Go reference (when it has one): a cold run of
 * each, then ROUNDS rounds, each a slice of the route on our server, one on Go's, and one
 * each of bare Koa and bare node:http answering bodies of the route's size; figures named
 * `name_…`. This machine's speed drifts by up to 2× over minutes (a shared host), so each
 * ratio is taken within a round, whose slices see the same machine, and the median over the
 * rounds is reported.
 */
async function measureRoute(
  name: string,
  srv: Server,
  go: Server | undefined,
  paths: () => string,
  floors: Floors,
): Promise<void> {
  // A freshly started server reads its tiles from storage as it goes: the first run shows
  // that cold start, the rounds the steady state of a warm replica (the target).
  const cold = await load(srv.url, CONNECTIONS, paths, { duration: WARMUP });
  figure(`${name}_cold_throughput`, Math.round(cold.rps), `req/s (first ${WARMUP} s after start)`);
  if (go) await load(go.url, CONNECTIONS, paths, { duration: WARMUP });
  const before = await metrics(srv.url);
  const rounds: { route: Slice; go?: Slice; koa: Slice; node: Slice }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const route = await slice(srv, paths);
    const goSlice = go ? await slice(go, paths) : undefined;
    const pad = `/pad/${Math.max(1, Math.round(route.bytesPerAnswer - floors.headerBytes))}`;
    rounds.push({
      route,
      ...(goSlice ? { go: goSlice } : {}),
      koa: await slice(floors.koa, () => pad),
      node: await slice(floors.node, () => pad),
    });
  }
  const after = await metrics(srv.url);
  const requests = rounds.reduce((n, r) => n + r.route.requests, 0);
  const us = (ms: number) => Math.round(ms * 1000);
  const med = (f: (r: (typeof rounds)[number]) => number) => median(rounds.map(f));
  note(
    `${name}, per round (ours | go | bare koa | bare node:http, µs per request): ${rounds
      .map((r) => [r.route, r.go, r.koa, r.node].map((x) => (x ? us(x.cpuPerRequest) : '-')).join('|'))
      .join('  ')}`,
  );
  figure(`${name}_cpu_us`, us(med((r) => r.route.cpuPerRequest)), 'µs');
  if (go) {
    figure(`${name}_go_cpu_us`, us(med((r) => r.go!.cpuPerRequest)), 'µs');
    // Goal ≤ 2.0 (moonshot 1.5): our CPU per request over Go's, taken within each round.
    figure(`${name}_vs_go`, Number(med((r) => r.route.cpuPerRequest / r.go!.cpuPerRequest).toFixed(2)), '');
  }
  figure(
    `${name}_p50_ms`,
    med((r) => r.route.p50),
    'ms',
  );
  figure(
    `${name}_p99_ms`,
    med((r) => r.route.p99),
    'ms',
  );
  figure(`${name}_p99_worst_round_ms`, Math.max(...rounds.map((r) => r.route.p99)), 'ms');
  if (go) {
    figure(
      `${name}_go_p50_ms`,
      med((r) => r.go!.p50),
      'ms',
    );
    figure(
      `${name}_go_p99_ms`,
      med((r) => r.go!.p99),
      'ms',
    );
  }
  figure(`${name}_throughput`, Math.round(med((r) => r.route.rps)), 'req/s');
  if (go) figure(`${name}_go_throughput`, Math.round(med((r) => r.go!.rps)), 'req/s');
  figure(`${name}_bytes_per_answer`, Math.round(rounds[0]!.route.bytesPerAnswer), 'bytes');
  // Context: bare Koa and bare node:http at the route's answer size, flat out.
  figure(`${name}_bare_koa_cpu_us`, us(med((r) => r.koa.cpuPerRequest)), 'µs');
  figure(`${name}_bare_node_http_cpu_us`, us(med((r) => r.node.cpuPerRequest)), 'µs');
  figure(
    `${name}_errors`,
    rounds.reduce((n, r) => n + r.route.errors + (r.go?.errors ?? 0), 0),
    'responses',
  );
  // What stalls the event loop (p99 causes): its delay over the rounds (prom-client resets it per scrape), and GC time.
  figure(`${name}_event_loop_delay_p99`, Number((after('nodejs_eventloop_lag_p99_seconds') * 1000).toFixed(1)), 'ms');
  const gcMs = (sums: (m: string) => number) =>
    ['minor', 'major', 'incremental', 'weakcb'].reduce(
      (t, k) => t + (sums(`nodejs_gc_duration_seconds_sum{kind="${k}"}`) || 0),
      0,
    ) * 1000;
  figure(`${name}_gc_per_request`, Number((((gcMs(after) - gcMs(before)) / requests) * 1000).toFixed(1)), 'µs');
  const delta = (metric: string) => after(metric) - before(metric);
  figure(
    `${name}_tiles_read_per_request`,
    Number(((delta('stele_tile_fetches') + delta('stele_tile_cache_hits')) / requests).toFixed(2)),
    'tiles',
  );
  // Hash tiles only (bundles aside): about one per tree level per proof path.
  figure(
    `${name}_hash_tiles_read_per_request`,
    Number((delta('stele_hash_tile_reads') / requests).toFixed(2)),
    'tiles',
  );
}

/** The log's data directory: BENCH_API_LOG's (built there once, marked complete), else a temporary one. */
async function logDir(): Promise<string> {
  const dataDir = KEPT_LOG ? join(KEPT_LOG, String(LOG_SIZE)) : mkdtempSync(join(tmpdir(), 'stele-bench-api-'));
  const built = join(dataDir, 'built');
  if (KEPT_LOG && existsSync(built)) {
    note(`log of ${LOG_SIZE} entries reused from ${dataDir}`);
    return dataDir;
  }
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const t = performance.now();
  await buildAnchorLog(dataDir, ORIGIN, LOG_SIZE);
  figure('api_log_build_rate', Math.round(LOG_SIZE / ((performance.now() - t) / 1000)), 'anchors/s');
  writeFileSync(built, '');
  return dataDir;
}

export default async function main(): Promise<void> {
  const dataDir = await logDir();
  try {
    const reader = new LogReader(new (await import('../src/store/fs.js')).FsObjectStore(join(dataDir, 'log')), {
      unverified: true,
    });
    pinned = pinLoadGenerator();
    note(pinned ? 'servers pinned to CPU 0, this load generator to CPU 1 (BENCH_PIN=0: unpinned)' : 'unpinned');
    // Every leaf's id, so entry?id queries are uniform over the whole log as the others are.
    const ids: string[] = [];
    for (let n = 0; n * 256 < LOG_SIZE; n++)
      for (const [i, eh] of (await reader.bundle('entries', n, Math.min(256, LOG_SIZE - n * 256))).entries())
        ids.push(entryId(n * 256 + i, eh));
    const anyLeaf = () => Math.floor(Math.random() * LOG_SIZE);

    // Efficiency is compared in server CPU per request (each process's CPU from /proc, the
    // same load generator): on a shared machine req/s says as much about the neighbours.
    const floors: Floors = {
      koa: await startChild(['--import', 'tsx', '--input-type=module', '-e', BARE_KOA]),
      node: await startChild(['--input-type=module', '-e', BARE_NODE]),
      headerBytes: 0,
    };
    await load(floors.koa.url, CONNECTIONS, () => '/', { duration: WARMUP });
    await load(floors.node.url, CONNECTIONS, () => '/', { duration: WARMUP });
    const bareRun = await slice(floors.koa, () => '/', { duration: DURATION });
    const headerBytes = bareRun.bytesPerAnswer - Buffer.byteLength(JSON.stringify({ ok: true, n: Math.random() }));
    figure('bare_koa_server_cpu_per_request', Math.round(bareRun.cpuPerRequest * 1000), 'µs');
    figure(
      'bare_node_http_server_cpu_per_request',
      Math.round((await slice(floors.node, () => '/')).cpuPerRequest * 1000),
      'µs',
    );
    if (SERVER_NODE_ARGS.length > 0) note(`servers run with node ${SERVER_NODE_ARGS.join(' ')}`);
    note(
      `reads at ${CONNECTIONS} connections: ${WARMUP} s of warm-up, then ${ROUNDS} rounds of ${SLICE} s slices; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );

    // The servers under test: this checkout's and, with BENCH_STELE_BASE, the base's, each
    // route measured on one then the other so both see the same machine; and the Go reference.
    const servers: (Server & { prefix: string })[] = [];
    let go: Server | undefined;
    try {
      for (const [prefix, cwd] of BASE ? [['base_', BASE] as const, ['', ROOT] as const] : [['', ROOT] as const]) {
        note(`${prefix || 'this '}server: ${cwd}`);
        // One server per data directory (each holds its lock): the base reads a copy of the log.
        const dir = prefix ? `${dataDir}-${prefix}copy` : dataDir;
        if (prefix) cpSync(dataDir, dir, { recursive: true });
        servers.push({ prefix, ...(await startChild(serveArgs(dir), cwd)) });
      }
      const cpFile = join(dataDir, 'checkpoint.json');
      writeFileSync(cpFile, await (await fetch(`${servers[0]!.url}/api/ledger/checkpoint`)).text());
      go = await startGoref(join(dataDir, 'log'), cpFile, pinned?.wrap);
      note('go reference: bench/goref (x/mod tlog), its answers checked by test/interop/goref.test.ts');
      for (const [name, paths, hasGo] of [
        ['entry_by_id', () => `/api/ledger/entry?id=${ids[anyLeaf()]}`, true],
        ['entry_by_hash', () => `/api/ledger/entry?hash=${digestOf(anyLeaf())}`, true],
        [
          'consistency',
          () => {
            const a = 1 + Math.floor(Math.random() * (LOG_SIZE - 1));
            const b = a + Math.floor(Math.random() * (LOG_SIZE - a + 1));
            return `/api/ledger/consistency?first=${a}&second=${b}`;
          },
          true,
        ],
        // Full level-0 tiles, then entry bundles, spread over the log (the read a mirror or auditor makes).
        ['tile', () => `/tile/0/${fullTile()}`, false],
        ['tile_bundle', () => `/tile/entries/${fullTile()}`, false],
        ['tile_records', () => `/tile/records/${fullTile()}`, false],
      ] as const) {
        if (ROUTES && !ROUTES.includes(name)) continue;
        for (const srv of servers)
          await measureRoute(`${srv.prefix}${name}`, srv, hasGo ? go : undefined, paths, { ...floors, headerBytes });
      }
    } finally {
      for (const srv of servers) await stop(srv.child);
      if (go) await stop(go.child);
      await stop(floors.koa.child);
      await stop(floors.node.child);
    }

    if (READS_ONLY) return;
    // Anchors would grow a kept log (and repeat their digests on the next run).
    if (KEPT_LOG) return note('anchors not measured on a kept log (BENCH_API_LOG)');
    // Anchors: 256 connections, each waiting for its answer, so throughput is bounded by
    // 256 / latency; a short batch interval (group commit) is what lets it scale.
    const anchorInterval = 10;
    // The anchor path uses the store's writer threads: the server gets every CPU again.
    pinned?.release();
    pinned = undefined;
    const anchorSrv = await startChild([...serveArgs(dataDir), '--batch-interval', String(anchorInterval)]);
    try {
      let n = LOG_SIZE * 4;
      const anchorRun = await load(anchorSrv.url, 256, () => '/api/ledger/anchor', {
        requests: [
          {
            setupRequest: (req) => ({
              ...req,
              method: 'POST',
              path: '/api/ledger/anchor',
              headers: { ...req.headers, 'content-type': 'application/json' },
              body: JSON.stringify({ digest: digestOf(n++) }),
            }),
          },
        ],
      });
      figure('anchor_throughput', Math.round(anchorRun.rps), 'anchors/s');
      figure('anchor_p50', anchorRun.p50, 'ms');
      figure('anchor_p99', anchorRun.p99, 'ms');
      figure('anchor_batch_interval', anchorInterval, 'ms');
      figure('anchor_errors', anchorRun.errors, 'responses');
    } finally {
      await stop(anchorSrv.child);
    }
  } finally {
    if (!KEPT_LOG) rmSync(dataDir, { recursive: true, force: true });
    rmSync(`${dataDir}-base_copy`, { recursive: true, force: true });
  }
}
