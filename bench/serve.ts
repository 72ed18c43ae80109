// What a new user gets: `stele serve` with its DEFAULT settings (batch interval, spacing,
// fsync), 256 closed-loop clients each POSTing an anchor and waiting for its answer.
// Figures: anchors/s, p50, p99, and the server's CPU per anchor (from /proc, fair on a busy
// machine). BENCH_STELE_ROOT runs another checkout's dist/ (a base worktree, to compare in
// the same conditions): `BENCH_STELE_ROOT=/work/wt-base npm run bench -- serve`.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { QUICK, ScratchDirs, figure, note, processCpuMs } from './util.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 256);
const DURATION = QUICK ? 8 : 20;
const WARMUP = QUICK ? 2 : 5;
const ROOT = process.env.BENCH_STELE_ROOT ?? new URL('..', import.meta.url).pathname;

async function startServe(dataDir: string): Promise<{ url: string; child: ChildProcess }> {
  const args = [join(ROOT, 'dist/cli/main.js'), 'serve', '--data-dir', dataDir, '--port', '0', '--json', '--log-level', 'warn'];
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { url: JSON.parse(line.toString().split('\n')[0]!).url as string, child };
}

async function anchorLoad(url: string, seconds: number, from: number) {
  let n = from;
  return autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 30,
    requests: [
      {
        setupRequest: (req) => ({
          ...req,
          method: 'POST',
          path: '/api/ledger/anchor',
          headers: { ...req.headers, 'content-type': 'application/json' },
          body: JSON.stringify({ digest: (n++).toString(16).padStart(64, '0') }),
        }),
      },
    ],
  });
}

export default async function main(): Promise<void> {
  const dirs = new ScratchDirs();
  const dataDir = dirs.make('stele-bench-serve-');
  const { url, child } = await startServe(dataDir);
  try {
    note(`stele serve from ${ROOT} with default settings, ${CONNECTIONS} closed-loop clients, ${DURATION} s after ${WARMUP} s of warm-up`);
    await anchorLoad(url, WARMUP, 1 << 30);
    const cpu0 = processCpuMs(child.pid);
    const run = await anchorLoad(url, DURATION, 0);
    const cpu = processCpuMs(child.pid) - cpu0;
    figure('serve_default_anchor_throughput', Math.round(run.requests.average), 'anchors/s');
    figure('serve_default_anchor_p50', run.latency.p50, 'ms');
    figure('serve_default_anchor_p99', run.latency.p99, 'ms');
    figure('serve_default_server_cpu_per_anchor', Math.round((cpu / run.requests.total) * 1000), 'µs');
    figure('serve_default_errors', run.errors + run.non2xx, 'responses');
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
    dirs.removeAll();
  }
}
