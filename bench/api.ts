// Issue 3 figures: GET /api/ledger/entry (by id and by hash) and consistency proofs over a
// 1,000,000-entry log against a bare Koa JSON route, POST /api/ledger/anchor at 256
// connections, and tiles read per proof. Servers run as child processes (one core each
// side on this 2-core machine); autocannon drives them from this process.
// BENCH_STELE_BASE=<checkout> also measures that checkout's server (its dist/) on the same
// log, route by route beside this one, its figures prefixed `base_`: a before/after in one run.
// BENCH_CONNECTIONS sets the read connections (default 100); BENCH_API_READS_ONLY=1 skips the anchors;
// BENCH_API_ROUTES=tile,tile_bundle (names below) measures only those read routes. The tile
// routes read /tile/… as a CDN in front of the origin would (each tile authenticated before
// it is served: their cost per request is that check's).
// BENCH_SERVER_NODE_ARGS passes Node flags to every server child, bare Koa's too (e.g.
// `--max-semi-space-size=64`: a young generation large enough for the read path's garbage).
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { anchorRequest } from '../src/core/anchor.js';
import { LmdbIndex } from '../src/index/lmdb.js';
import { openLocalLog } from '../src/serve/local-log.js';
import { LogReader } from '../src/read/reader.js';
import { entryId } from '../src/core/entry.js';
import { formatTileIndex } from '../src/core/tiles.js';
import { QUICK, figure, note, percentile, pinLoadGenerator, processCpuMs } from './util.js';

const LOG_SIZE = QUICK ? 100_000 : 1_000_000;
const DURATION = QUICK ? 5 : 10;
const WARMUP = QUICK ? 3 : 10;
/** Rounds per read route, and the seconds of each slice in a round (see measureRoute). */
const ROUNDS = QUICK ? 2 : 5;
const SLICE = QUICK ? 2 : 3;
const ORIGIN = 'bench.stele/api';
const digestOf = (i: number) => i.toString(16).padStart(64, '0');
const ROOT = new URL('..', import.meta.url).pathname;
const BASE = process.env.BENCH_STELE_BASE;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100);
const READS_ONLY = process.env.BENCH_API_READS_ONLY === '1';
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
const ROUTES = process.env.BENCH_API_ROUTES?.split(',').filter(Boolean);
/** A full level-0 tile's index, at random. */
const fullTile = () => formatTileIndex(Math.floor(Math.random() * Math.floor(LOG_SIZE / 256)));

async function buildLog(dataDir: string): Promise<void> {
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { sequencer } = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 1,
    maxBatch: 65_536,
    listeners: [index],
  });
  const wave = 65_536;
  for (let from = 0; from < LOG_SIZE; from += wave) {
    const n = Math.min(wave, LOG_SIZE - from);
    await Promise.all(
      Array.from({ length: n }, (_, k) =>
        sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + k), { artifact: `a${from + k}` })),
      ),
    );
  }
  await sequencer.close();
  await index.close();
}

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

/** Bare Koa, the baseline every route is compared with. */
interface Bare {
  readonly srv: Server;
  /** Its status line and headers: padding makes up the rest of a route's answer. */
  readonly headerBytes: number;
}

/**
 * One read route on one server: a cold run, then ROUNDS rounds, each a slice of the route
 * followed by slices of bare Koa flat out, at the route's rate, and at its rate with answers
 * of its size; figures named `name_…`. This machine's speed drifts by up to 2× over minutes
 * (a shared host), so each ratio is taken within a round, whose slices see the same machine,
 * and the median over the rounds is reported.
 */
async function measureRoute(name: string, srv: Server, paths: () => string, bare: Bare): Promise<void> {
  // A freshly started server reads its tiles from storage as it goes: the first run shows
  // that cold start, the rounds the steady state of a warm replica (the target).
  const cold = await load(srv.url, CONNECTIONS, paths, { duration: WARMUP });
  figure(`${name}_cold_throughput`, Math.round(cold.rps), `req/s (first ${WARMUP} s after start)`);
  const before = await metrics(srv.url);
  const rounds: { route: Slice; flat: Slice; sameRate: Slice; sameSize: Slice }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const route = await slice(srv, paths);
    const rate = { overallRate: Math.max(1, Math.round(route.rps)) };
    // Bare Koa flat out answers several times this route's rate, and CPU per request depends
    // on the rate (requests per turn of the event loop): at the route's rate the two compare
    // at one operating point; padded to its size, what is left is the route's own work.
    const pad = `/pad/${Math.max(1, Math.round(route.bytesPerAnswer - bare.headerBytes))}`;
    rounds.push({
      route,
      flat: await slice(bare.srv, () => '/'),
      sameRate: await slice(bare.srv, () => '/', rate),
      sameSize: await slice(bare.srv, () => pad, rate),
    });
  }
  const after = await metrics(srv.url);
  const requests = rounds.reduce((n, r) => n + r.route.requests, 0);
  const delta = (metric: string) => after(metric) - before(metric);
  const ratio = (baseline: 'flat' | 'sameRate' | 'sameSize') =>
    median(rounds.map((r) => r[baseline].cpuPerRequest / r.route.cpuPerRequest));
  const us = (ms: number) => Math.round(ms * 1000);
  note(
    `${name}, per round (route | bare flat | same rate | same size, µs): ${rounds
      .map((r) => [r.route, r.flat, r.sameRate, r.sameSize].map((x) => us(x.cpuPerRequest)).join('|'))
      .join('  ')}`,
  );
  figure(`${name}_throughput`, Math.round(median(rounds.map((r) => r.route.rps))), 'req/s');
  figure(`${name}_vs_bare_koa`, Math.round(median(rounds.map((r) => r.route.rps / r.flat.rps)) * 100), '%');
  figure(`${name}_server_cpu_per_request`, us(median(rounds.map((r) => r.route.cpuPerRequest))), 'µs');
  // Goal ≥ 0.50: this route costs at most twice a bare Koa JSON route's CPU per request.
  figure(`${name}_cpu_efficiency_vs_bare_koa`, Number(ratio('flat').toFixed(2)), '');
  figure(
    `${name}_bare_koa_at_same_rate_cpu_per_request`,
    us(median(rounds.map((r) => r.sameRate.cpuPerRequest))),
    'µs',
  );
  figure(`${name}_cpu_efficiency_vs_bare_koa_at_same_rate`, Number(ratio('sameRate').toFixed(2)), '');
  figure(`${name}_bytes_per_answer`, Math.round(rounds[0]!.route.bytesPerAnswer), 'bytes');
  figure(
    `${name}_bare_koa_same_size_same_rate_cpu_per_request`,
    us(median(rounds.map((r) => r.sameSize.cpuPerRequest))),
    'µs',
  );
  figure(`${name}_cpu_efficiency_vs_bare_koa_same_size_same_rate`, Number(ratio('sameSize').toFixed(2)), '');
  figure(`${name}_p50`, median(rounds.map((r) => r.route.p50)), 'ms');
  figure(`${name}_p99`, median(rounds.map((r) => r.route.p99)), 'ms');
  figure(`${name}_p99_worst_round`, Math.max(...rounds.map((r) => r.route.p99)), 'ms');
  figure(`${name}_bare_koa_p99`, median(rounds.map((r) => r.flat.p99)), 'ms');
  figure(
    `${name}_errors`,
    rounds.reduce((n, r) => n + r.route.errors, 0),
    'responses',
  );
  // What stalls the event loop (p99 causes): its delay over the rounds (prom-client resets it per scrape), and GC time.
  figure(`${name}_event_loop_delay_p99`, Number((after('nodejs_eventloop_lag_p99_seconds') * 1000).toFixed(1)), 'ms');
  figure(`${name}_event_loop_delay_max`, Number((after('nodejs_eventloop_lag_max_seconds') * 1000).toFixed(1)), 'ms');
  const gcMs = (sums: (m: string) => number) =>
    ['minor', 'major', 'incremental', 'weakcb'].reduce(
      (t, k) => t + (sums(`nodejs_gc_duration_seconds_sum{kind="${k}"}`) || 0),
      0,
    ) * 1000;
  figure(`${name}_gc_per_request`, Number((((gcMs(after) - gcMs(before)) / requests) * 1000).toFixed(1)), 'µs');
  const fetched = delta('stele_tile_fetches');
  figure(
    `${name}_tiles_read_per_request`,
    Number(((fetched + delta('stele_tile_cache_hits')) / requests).toFixed(2)),
    'tiles',
  );
  figure(`${name}_tiles_fetched_per_request`, Number((fetched / requests).toFixed(3)), 'tiles');
  // Hash tiles only (bundles aside): about one per tree level per proof path.
  figure(
    `${name}_hash_tiles_read_per_request`,
    Number((delta('stele_hash_tile_reads') / requests).toFixed(2)),
    'tiles',
  );
}

export default async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stele-bench-api-'));
  try {
    let t = performance.now();
    await buildLog(dataDir);
    figure('api_log_build_rate', Math.round(LOG_SIZE / ((performance.now() - t) / 1000)), 'anchors/s');

    const reader = new LogReader(new (await import('../src/store/fs.js')).FsObjectStore(join(dataDir, 'log')), {
      unverified: true,
    });
    pinned = pinLoadGenerator();
    note(pinned ? 'servers pinned to CPU 0, this load generator to CPU 1 (BENCH_PIN=0: unpinned)' : 'unpinned');
    const sampleIds: string[] = [];
    for (let k = 0; k < 2000; k++) {
      const seq = Math.floor(Math.random() * LOG_SIZE);
      sampleIds.push(entryId(seq, (await reader.entry(seq, LOG_SIZE)).entryHash));
    }
    const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)]!;

    // Efficiency is compared in server CPU per request (both processes' CPU from /proc, the
    // same load generator): on a shared machine req/s says as much about the neighbours.
    const bare = await startChild(['--import', 'tsx', '--input-type=module', '-e', BARE_KOA]);
    await load(bare.url, CONNECTIONS, () => '/', { duration: WARMUP });
    const bareRun = await slice(bare, () => '/', { duration: DURATION });
    figure('bare_koa_json', Math.round(bareRun.rps), 'req/s');
    figure('bare_koa_json_p99', bareRun.p99, 'ms');
    figure('bare_koa_bytes_per_answer', Math.round(bareRun.bytesPerAnswer), 'bytes');
    const baseline: Bare = {
      srv: bare,
      headerBytes: bareRun.bytesPerAnswer - Buffer.byteLength(JSON.stringify({ ok: true, n: Math.random() })),
    };
    figure('bare_koa_server_cpu_per_request', Math.round(bareRun.cpuPerRequest * 1000), 'µs');
    if (SERVER_NODE_ARGS.length > 0) note(`servers run with node ${SERVER_NODE_ARGS.join(' ')}`);
    note(
      `reads at ${CONNECTIONS} connections: ${WARMUP} s of warm-up, then ${ROUNDS} rounds of ${SLICE} s slices; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );

    // The servers under test: this checkout's and, with BENCH_STELE_BASE, the base's, each
    // route measured on one then the other so both see the same machine.
    const servers: (Server & { prefix: string })[] = [];
    try {
      for (const [prefix, cwd] of BASE ? [['base_', BASE] as const, ['', ROOT] as const] : [['', ROOT] as const]) {
        note(`${prefix || 'this '}server: ${cwd}`);
        // One server per data directory (each holds its lock): the base reads a copy of the log.
        const dir = prefix ? `${dataDir}-${prefix}copy` : dataDir;
        if (prefix) cpSync(dataDir, dir, { recursive: true });
        servers.push({ prefix, ...(await startChild(serveArgs(dir), cwd)) });
      }
      for (const [name, paths] of [
        ['entry_by_id', () => `/api/ledger/entry?id=${pick(sampleIds)}`],
        ['entry_by_hash', () => `/api/ledger/entry?hash=${digestOf(Math.floor(Math.random() * LOG_SIZE))}`],
        [
          'consistency',
          () => {
            const a = 1 + Math.floor(Math.random() * (LOG_SIZE - 1));
            const b = a + Math.floor(Math.random() * (LOG_SIZE - a + 1));
            return `/api/ledger/consistency?first=${a}&second=${b}`;
          },
        ],
        // Full level-0 tiles, then entry bundles, spread over the log (the read a mirror or auditor makes).
        ['tile', () => `/tile/0/${fullTile()}`],
        ['tile_bundle', () => `/tile/entries/${fullTile()}`],
      ] as const) {
        if (ROUTES && !ROUTES.includes(name)) continue;
        for (const srv of servers) await measureRoute(`${srv.prefix}${name}`, srv, paths, baseline);
      }
    } finally {
      for (const srv of servers) await stop(srv.child);
      await stop(bare.child);
    }

    if (READS_ONLY) return;
    // Anchors: 256 connections, each waiting for its answer, so throughput is bounded by
    // 256 / latency; a short batch interval (group commit) is what lets it scale.
    const anchorInterval = 10;
    // The anchor path uses the store's writer threads: the server gets every CPU again.
    pinned?.release();
    pinned = undefined;
    const anchorSrv = await startChild([...serveArgs(dataDir), '--batch-interval', String(anchorInterval)]);
    try {
      let n = LOG_SIZE * 4;
      t = performance.now();
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
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(`${dataDir}-base_copy`, { recursive: true, force: true });
  }
}
