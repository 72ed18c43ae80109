// Issue 3 figures: GET /api/ledger/entry (by id and by hash) and consistency proofs over a
// 1,000,000-entry log against a bare Koa JSON route, POST /api/ledger/anchor at 256
// connections, and tiles read per proof. Servers run as child processes (one core each
// side on this 2-core machine); autocannon drives them from this process.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { anchorRequest } from '../src/core/anchor.js';
import { LmdbIndex } from '../src/index/lmdb.js';
import { openLocalLog } from '../src/log/local.js';
import { LogReader } from '../src/reader.js';
import { entryId } from '../src/core/entry.js';
import { QUICK, figure, processCpuMs } from './util.js';

const LOG_SIZE = QUICK ? 100_000 : 1_000_000;
const DURATION = QUICK ? 5 : 10;
const WARMUP = QUICK ? 3 : 10;
const ORIGIN = 'bench.stele/api';
const digestOf = (i: number) => i.toString(16).padStart(64, '0');
const ROOT = new URL('..', import.meta.url).pathname;

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

async function startChild(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { url: JSON.parse(line.toString().split('\n')[0]!).url as string, child };
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await once(child, 'exit');
}

const BARE_KOA = `
import Koa from 'koa';
const app = new Koa();
app.use((ctx) => { ctx.body = { ok: true, n: Math.random() }; });
const s = app.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: 'http://127.0.0.1:' + s.address().port })));
process.on('SIGTERM', () => s.close(() => process.exit(0)));
`;

interface Run {
  rps: number;
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
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    errors: result.errors + result.non2xx,
  };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?)`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
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
    const sampleIds: string[] = [];
    for (let k = 0; k < 2000; k++) {
      const seq = Math.floor(Math.random() * LOG_SIZE);
      sampleIds.push(entryId(seq, (await reader.entry(seq, LOG_SIZE)).entryHash));
    }
    const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)]!;

    // Efficiency is compared in server CPU per request (both processes' CPU from /proc, the
    // same load generator): on a shared machine req/s says as much about the neighbours.
    const bare = await startChild(['--import', 'tsx', '--input-type=module', '-e', BARE_KOA]);
    await load(bare.url, 100, () => '/', { duration: WARMUP });
    const bareCpu0 = processCpuMs(bare.child.pid);
    const bareRun = await load(bare.url, 100, () => '/');
    const bareCpuPerRequest = (processCpuMs(bare.child.pid) - bareCpu0) / bareRun.requests;
    await stop(bare.child);
    figure('bare_koa_json', Math.round(bareRun.rps), 'req/s');
    figure('bare_koa_json_p99', bareRun.p99, 'ms');
    figure('bare_koa_server_cpu_per_request', Math.round(bareCpuPerRequest * 1000), 'µs');

    const srv = await startChild([
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
    ]);
    try {
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
      ] as const) {
        // A freshly started server reads its tiles from storage as it goes: the first run shows
        // that cold start, the second the steady state of a warm replica (the target).
        const cold = await load(srv.url, 100, paths, { duration: WARMUP });
        figure(`${name}_cold_throughput`, Math.round(cold.rps), `req/s (first ${WARMUP} s after start)`);
        const f0 = await metric(srv.url, 'stele_tile_fetches');
        const h0 = await metric(srv.url, 'stele_tile_cache_hits');
        const t0 = await metric(srv.url, 'stele_hash_tile_reads');
        const cpu0 = processCpuMs(srv.child.pid);
        const run = await load(srv.url, 100, paths);
        // The server's own CPU time per answer: unlike req/s, not set by what else the shared machine runs.
        const cpuPerRequest = (processCpuMs(srv.child.pid) - cpu0) / run.requests;
        const fetched = (await metric(srv.url, 'stele_tile_fetches')) - f0;
        const hits = (await metric(srv.url, 'stele_tile_cache_hits')) - h0;
        const hashTiles = (await metric(srv.url, 'stele_hash_tile_reads')) - t0;
        figure(`${name}_throughput`, Math.round(run.rps), 'req/s');
        figure(`${name}_vs_bare_koa`, Math.round((run.rps / bareRun.rps) * 100), '%');
        figure(`${name}_server_cpu_per_request`, Math.round(cpuPerRequest * 1000), 'µs');
        // Goal ≥ 0.50: this route costs at most twice a bare Koa JSON route's CPU per request.
        figure(`${name}_cpu_efficiency_vs_bare_koa`, Number((bareCpuPerRequest / cpuPerRequest).toFixed(2)), '');
        figure(`${name}_p50`, run.p50, 'ms');
        figure(`${name}_p99`, run.p99, 'ms');
        figure(`${name}_errors`, run.errors, 'responses');
        figure(`${name}_tiles_read_per_request`, Number(((fetched + hits) / run.requests).toFixed(2)), 'tiles');
        figure(`${name}_tiles_fetched_per_request`, Number((fetched / run.requests).toFixed(3)), 'tiles');
        // Hash tiles only (bundles aside): about one per tree level per proof path.
        figure(`${name}_hash_tiles_read_per_request`, Number((hashTiles / run.requests).toFixed(2)), 'tiles');
      }
    } finally {
      await stop(srv.child);
    }

    // Anchors: 256 connections, each waiting for its answer, so throughput is bounded by
    // 256 / latency; a short batch interval (group commit) is what lets it scale.
    const anchorInterval = 10;
    const anchorSrv = await startChild([
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
      '--batch-interval',
      String(anchorInterval),
    ]);
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
  }
}
