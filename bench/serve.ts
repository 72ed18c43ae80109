// What a new user gets: `stele serve` with its DEFAULT settings (batch interval, spacing,
// fsync), 256 closed-loop clients each POSTing an anchor and waiting for its answer.
// Figures: anchors/s, p50, p99, and the server's CPU per anchor (from /proc, fair on a busy
// machine), then the same through `stele hammer` (src/hammer/), which verifies every anchor from
// the tiles as it goes. BENCH_STELE_ROOT runs another checkout's dist/ (a base worktree, to compare in
// the same conditions): `BENCH_STELE_ROOT=/work/wt-base npm run bench -- serve`.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { runHammer } from '../src/hammer/hammer.js';
import { QUICK, ScratchDirs, figure, note, processCpuMs } from './util.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 256);
const DURATION = QUICK ? 8 : 20;
const WARMUP = QUICK ? 2 : 5;
const ROOT = process.env.BENCH_STELE_ROOT ?? new URL('..', import.meta.url).pathname;

async function startServe(dataDir: string): Promise<{ url: string; child: ChildProcess }> {
  const args = [
    join(ROOT, 'dist/cli/main.js'),
    'serve',
    '--data-dir',
    dataDir,
    '--port',
    '0',
    '--json',
    '--log-level',
    'warn',
  ];
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
    note(
      `stele serve from ${ROOT} with default settings, ${CONNECTIONS} closed-loop clients, ${DURATION} s after ${WARMUP} s of warm-up`,
    );
    await anchorLoad(url, WARMUP, 1 << 30);
    const cpu0 = processCpuMs(child.pid);
    const run = await anchorLoad(url, DURATION, 0);
    const cpu = processCpuMs(child.pid) - cpu0;
    figure('serve_default_anchor_throughput', Math.round(run.requests.average), 'anchors/s');
    figure('serve_default_anchor_p50', run.latency.p50, 'ms');
    figure('serve_default_anchor_p99', run.latency.p99, 'ms');
    figure('serve_default_server_cpu_per_anchor', Math.round((cpu / run.requests.total) * 1000), 'µs');
    figure('serve_default_errors', run.errors + run.non2xx, 'responses');

    // The same load through `stele hammer`, which also verifies every anchor from the tiles
    // (its verification costs this process more CPU than autocannon: a lower bound).
    const serverCpu0 = processCpuMs(child.pid);
    const hammerCpu0 = process.cpuUsage();
    const h = await runHammer({
      url,
      writers: CONNECTIONS,
      duplicateShare: 0.05,
      readers: 2,
      durationMs: DURATION * 1000,
    });
    const hammerCpuMs = (() => {
      const u = process.cpuUsage(hammerCpu0);
      return (u.user + u.system) / 1000;
    })();
    const serverCpu = processCpuMs(child.pid) - serverCpu0;
    figure('serve_default_hammer_throughput', h.writes.perSecond, 'anchors/s');
    figure('serve_default_hammer_server_cpu_per_anchor', Math.round((serverCpu / h.writes.acknowledged) * 1000), 'µs');
    figure('serve_default_hammer_cpu_per_anchor', Math.round((hammerCpuMs / h.writes.acknowledged) * 1000), 'µs');
    figure('serve_default_hammer_integrate_p50', h.writes.integrateMs?.p50 ?? NaN, 'ms');
    figure('serve_default_hammer_integrate_p99', h.writes.integrateMs?.p99 ?? NaN, 'ms');
    figure('serve_default_hammer_pushback', h.writes.pushback[429] + h.writes.pushback[503], 'responses');
    figure('serve_default_hammer_verified_inclusions', h.reads.inclusionProofs, 'anchors');
    figure(
      'serve_default_hammer_failures',
      h.verificationFailures + h.writes.errors + h.reads.errors + h.reads.unverified,
      '',
    );
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
    dirs.removeAll();
  }
}
