// Follower lag under load (issue 22): a self-hosted log on Ceph's RADOS Gateway
// (test/helpers/rgw.ts: one-node loopback cluster, lock in the bucket, no DynamoDB) with
// `stele serve` as the sequencer and as one API replica that follows the published log into
// its own LMDB index, each a real process, while `stele hammer` (src/hammer) drives anchors
// at a target rate (BENCH_FOLLOWER_RATE, default 1,000/s) and verifies each from the tiles.
//   lag in entries: published size (the sequencer's checkpoint) minus the size the replica
//     serves, sampled every SAMPLE_MS;
//   lag in seconds: for each published size, from the sample that first saw it published to
//     the one that first saw the replica serve it (so ± SAMPLE_MS; the replica polls the
//     bucket once a second, which sets most of it);
//   follower CPU per 1,000 entries: the replica process's utime + stime from /proc over the
//     run (which includes answering this bench's polls: their idle cost is printed), and, with
//     nothing else asking, a second replica started from an empty directory after the run:
//     its CPU from spawn to ready (it serves only once caught up) less the first replica's,
//     which started on a one-entry log, per 1,000 entries.
// The sequencer runs with its production spacing (1 s between batches, the AWS default), so
// a published checkpoint grows by about a second's anchors at a time. The machine is shared:
// the anchors/s reached is reported, not assumed.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { runHammer } from '../src/hammer/hammer.js';
import { rgwLogEnv, startRgw } from '../test/helpers/rgw.js';
import { QUICK, ScratchDirs, figure, note, now, percentile, processCpuMs, sleep } from './util.js';

const ROOT = new URL('..', import.meta.url).pathname;
const ORIGIN = 'bench.stele/follower';
const TOKEN = 'tok_bench_follower_0123456789';
const RATE = Number(process.env.BENCH_FOLLOWER_RATE ?? 1000);
const SECONDS = QUICK ? 20 : 60;
const SAMPLE_MS = 100;
const WARM_MS = 3000;
const IDLE_MS = 5000;

interface Served {
  readonly child: ChildProcess;
  readonly url: string;
  readonly vkey: string;
}

async function serve(env: NodeJS.ProcessEnv, dataDir: string): Promise<Served> {
  const clean = { ...process.env };
  for (const k of Object.keys(clean)) if (k.startsWith('STELE_')) delete clean[k];
  const child = spawn(
    process.execPath,
    [join(ROOT, 'dist/cli/main.js'), 'serve', '--data-dir', dataDir, '--port', '0', '--json', '--log-level', 'warn'],
    { cwd: ROOT, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const started = once(child.stdout!, 'data').then(([line]) => JSON.parse(String(line).split('\n')[0]!) as Served);
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`stele serve exited ${code} before it was ready`);
  });
  const { url, vkey } = await Promise.race([started, exited]);
  return { child, url, vkey };
}

async function treeSize(url: string): Promise<number> {
  const res = await fetch(`${url}/api/ledger/checkpoint`);
  if (!res.ok) throw new Error(`GET ${url}/api/ledger/checkpoint: HTTP ${res.status}`);
  return ((await res.json()) as { treeSize: number }).treeSize;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

export default async function main(): Promise<void> {
  const dirs = new ScratchDirs();
  const rgw = await startRgw({ memoryBytes: 4 * 1024 ** 3 });
  const procs: ChildProcess[] = [];
  try {
    const shared = { ...rgwLogEnv(rgw, ORIGIN), STELE_HEARTBEAT_MS: '0' };
    const seqDir = dirs.make('stele-bench-follow-seq-');
    const sequencer = await serve(
      {
        ...shared,
        STELE_ROLE: 'sequencer',
        STELE_MODE: 'production',
        STELE_ANCHOR_TOKENS: `bench=${TOKEN}`,
        STELE_ANCHOR_RATE: String(RATE * 10),
        STELE_KEY_FILE: join(seqDir, 'log.key'),
      },
      seqDir,
    );
    procs.push(sequencer.child);
    // The replica needs a published checkpoint to start from; it is given only the public key.
    const first = await fetch(`${sequencer.url}/api/ledger/anchor`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ digest: 'f'.repeat(64) }),
    });
    if (first.status !== 201) throw new Error(`first anchor: HTTP ${first.status}`);
    const replicaEnv = { ...shared, STELE_ROLE: 'api', STELE_VKEY: sequencer.vkey };
    const replica = await serve(replicaEnv, dirs.make('stele-bench-follow-api-'));
    procs.push(replica.child);
    const startupCpuMs = processCpuMs(replica.child.pid);

    // Sampling: published and served sizes every SAMPLE_MS.
    const lagEntries: number[] = [];
    const publishedAt = new Map<number, number>(); // size -> first sample that saw it published
    const lagSeconds: number[] = [];
    let sampling = true;
    let loadUntil = Number.POSITIVE_INFINITY; // lag in entries counts while anchors arrive (and during the idle baseline, discarded)
    let maxServed = 0;
    const sampler = (async () => {
      while (sampling) {
        const t = now();
        const [pub, served] = await Promise.all([treeSize(sequencer.url), treeSize(replica.url)]);
        if (!publishedAt.has(pub)) publishedAt.set(pub, t);
        if (t < loadUntil) lagEntries.push(Math.max(0, pub - served));
        if (served > maxServed) {
          maxServed = served;
          for (const [size, at] of publishedAt) {
            if (size > served) continue;
            lagSeconds.push((t - at) / 1000);
            publishedAt.delete(size);
          }
        }
        await sleep(Math.max(0, SAMPLE_MS - (now() - t)));
      }
    })();

    // What the replica spends answering the sampler alone, to take out of the figure below
    // (after a pause: its first requests after start cost more than the steady state).
    await sleep(WARM_MS);
    const idle0 = processCpuMs(replica.child.pid);
    await sleep(IDLE_MS);
    const idleMsPerS = (processCpuMs(replica.child.pid) - idle0) / (IDLE_MS / 1000);
    lagEntries.length = 0;
    lagSeconds.length = 0;

    const start = await treeSize(sequencer.url);
    const cpu0 = processCpuMs(replica.child.pid);
    const seqCpu0 = processCpuMs(sequencer.child.pid);
    const t0 = now();
    loadUntil = t0 + SECONDS * 1000;
    const report = await runHammer({
      url: sequencer.url,
      vkey: sequencer.vkey,
      token: TOKEN,
      writers: RATE * 2, // each waits for its batch: about 1–2 s at 1 s spacing
      rate: RATE,
      duplicateShare: 0,
      readers: 1,
      durationMs: SECONDS * 1000,
      settleMs: 10_000,
    });
    const end = await treeSize(sequencer.url);
    // Until the replica serves the last published size.
    const deadline = now() + 30_000;
    while ((await treeSize(replica.url)) < end && now() < deadline) await sleep(SAMPLE_MS);
    const wall = (now() - t0) / 1000;
    sampling = false;
    await sampler;
    const cpuMs = processCpuMs(replica.child.pid) - cpu0;
    const seqCpuMs = processCpuMs(sequencer.child.pid) - seqCpu0;
    const entries = end - start;

    // Catch-up alone: a second replica from an empty directory, ready once it has indexed everything.
    const fresh = await serve(replicaEnv, dirs.make('stele-bench-follow-api2-'));
    procs.push(fresh.child);
    const catchUpCpuMs = processCpuMs(fresh.child.pid) - startupCpuMs;
    const caughtUp = await treeSize(fresh.url);

    note(
      `Ceph RGW 16 (one-node loopback cluster, memstore OSD), bucket lock, stele serve as sequencer (1 s batch spacing) and as one replica (STELE_VKEY only)`,
    );
    note(
      `hammer: ${report.writes.acknowledged} anchors acknowledged in ${report.durationS.toFixed(1)} s, ${report.writes.errors} errors, ${report.verificationFailures} verification failures, pushback ${JSON.stringify(report.writes.pushback)}`,
    );
    note(
      `replica idle CPU answering ${1000 / SAMPLE_MS} polls/s: ${idleMsPerS.toFixed(1)} ms/s (${((idleMsPerS * wall) / 1000).toFixed(1)} s of the run's ${(cpuMs / 1000).toFixed(1)} s); the machine is shared (load ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores), so times are noisy`,
    );
    figure('target anchor rate', RATE, 'anchors/s');
    figure('anchors/s reached (acknowledged, hammer)', report.writes.perSecond, 'anchors/s');
    figure('entries followed', entries, 'entries');
    figure('follower lag p50', percentile(lagEntries, 50), 'entries');
    figure('follower lag p99', percentile(lagEntries, 99), 'entries');
    figure('follower lag max', Math.max(...lagEntries), 'entries');
    figure('follower lag p50', percentile(lagSeconds, 50), 's');
    figure('follower lag p99', percentile(lagSeconds, 99), 's');
    figure('follower lag max', Math.max(...lagSeconds), 's');
    figure('follower CPU per 1000 entries (replica process, /proc)', (cpuMs * 1000) / entries, 'ms');
    figure(
      'follower catch-up CPU per 1000 entries (replica from empty, /proc)',
      (catchUpCpuMs * 1000) / caughtUp,
      'ms',
    );
    figure('sequencer CPU per 1000 anchors (process, /proc)', (seqCpuMs * 1000) / entries, 'ms');
    if (!report.ok) note(`hammer problems: ${report.problems.slice(0, 5).join(' | ')}`);
  } finally {
    for (const p of procs) await stop(p);
    await rgw.close();
    dirs.removeAll();
  }
}
