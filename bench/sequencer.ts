// Sequencer figures (issue 2), on the local filesystem store:
//   (a) integration throughput with fsync on and 1 s batches, anchors submitted as fast as
//       possible (bounded in-flight window), over 2,000,000 anchors (figures at 1,000,000 and
//       2,000,000), against the raw rate of 3 SHA-256 calls per entry on this machine;
//   (b) acknowledgement latency at 10,000 anchors/s offered for 10 s: p50, p99, max;
//   (c) peak RSS after 100,000 and after 2,000,000 anchors (sampled during run (a)).
// `--quick` / BENCH_QUICK=1: 200,000 anchors, RSS at 20,000 and 200,000, 3 s of latency.
// `--no-fsync`: run (a) and (c) with fsync off (reported in the output).
import { hash as nodeHash } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { type AnchorRequest, anchorRequest } from '../src/core/anchor.js';
import { sha256 } from '../src/core/hash.js';
import { openLocalLog } from '../src/serve/local-log.js';
import {
  MiB,
  QUICK,
  RssSampler,
  ScratchDirs,
  cpuSeconds,
  figure,
  note,
  now,
  percentile,
  sha256x3Rate,
  sleep,
} from './util.js';

const ORIGIN = 'bench.stele/sequencer';
const INTERVAL_MS = 1000;

/** A realistic request: 64-hex digest, an artifact label and a scope (~270-byte canonical entry). */
function request(i: number): AnchorRequest {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  return anchorRequest('ledger_anchor', 'Anchored', digest, {
    artifact: `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`,
    scope: 'acme/ci',
  });
}

/** The logs' directories, removed when every run is done (deleting the 2M-anchor log had slowed the latency run's file creates 20-fold). */
const scratch = new ScratchDirs();

async function withLog<T>(
  fsync: boolean,
  fn: (log: Awaited<ReturnType<typeof openLocalLog>>) => Promise<T>,
): Promise<T> {
  const dataDir = scratch.make('stele-bench-seq-');
  const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync, batchInterval: INTERVAL_MS, maxPending: 1_000_000 });
  try {
    return await fn(log);
  } finally {
    await log.sequencer.close();
  }
}

/** (a) + (c): submit `total` anchors as fast as the bounded window allows. */
async function throughput(
  total: number,
  marks: { at: number; label: string }[],
  fsync: boolean,
): Promise<{ wall: number; cpu: number }> {
  const rss = new RssSampler(25).start();
  return withLog(fsync, async ({ sequencer, store }) => {
    let batches = 0;
    let largest = 0;
    sequencer.onPublished((_c, b) => {
      batches++;
      if (b) largest = Math.max(largest, b.count);
    });
    const CHUNK = 8192;
    const WINDOW = 4 * 65_536; // in flight: enough for back-to-back full batches, bounded memory
    const inflight: Promise<void>[] = [];
    let acked = 0;
    const start = now();
    const cpu0 = process.cpuUsage();
    const at = new Map<number, { ms: number; peak: number }>();
    const onAcked = (n: number) => {
      acked += n;
      rss.sample();
      for (const m of marks) if (acked >= m.at && !at.has(m.at)) at.set(m.at, { ms: now() - start, peak: rss.peakMiB });
    };
    for (let from = 0; from < total; from += CHUNK) {
      const n = Math.min(CHUNK, total - from);
      const ps: Promise<unknown>[] = new Array(n);
      for (let i = 0; i < n; i++) ps[i] = sequencer.submit(request(from + i));
      inflight.push(Promise.all(ps).then(() => onAcked(n)));
      while (inflight.length * CHUNK > WINDOW) await inflight.shift();
    }
    await Promise.all(inflight);
    const ms = now() - start;
    const cpu = cpuSeconds(cpu0);
    rss.stop();

    note(
      `throughput run: ${total} anchors, fsync ${fsync ? 'on' : 'off'}, batch interval ${INTERVAL_MS} ms, max batch 65,536, ${WINDOW} in flight`,
    );
    for (const m of marks) {
      const r = at.get(m.at)!;
      if (m.label.startsWith('throughput'))
        figure(`sequencer_${m.label}`, Math.round(m.at / (r.ms / 1000)), 'anchors/s');
    }
    const rate = total / (ms / 1000);
    figure('sequencer_throughput', Math.round(rate), 'anchors/s');
    figure('sequencer_cpu_used', Number((cpu / (ms / 1000)).toFixed(2)), 'cores');
    figure('sequencer_throughput_per_cpu_second', Math.round(total / cpu), 'anchors/CPU-s');
    figure('sequencer_batches', batches, 'batches');
    figure('sequencer_mean_batch', Math.round(total / batches), 'anchors');
    figure('sequencer_largest_batch', largest, 'anchors');
    figure('sequencer_store_puts_per_anchor', Number((store.stats.puts / total).toFixed(4)), 'objects');
    for (const m of marks) {
      if (m.label.startsWith('rss'))
        figure(`sequencer_peak_${m.label}`, Math.round(at.get(m.at)!.peak), `MiB${fsync ? '' : ' (fsync off)'}`);
    }
    return { wall: rate, cpu: total / cpu };
  });
}

/** (b): offer `rate` anchors/s for `seconds`; latency from submit to receipt. */
async function latency(rate: number, seconds: number): Promise<void> {
  await withLog(true, async ({ sequencer }) => {
    const lat: number[] = [];
    const pending: Promise<void>[] = [];
    const start = now();
    let sent = 0;
    for (let t = 0; t < seconds * 1000; t = now() - start) {
      const due = Math.floor((t / 1000) * rate);
      for (; sent < due; sent++) {
        const t0 = now();
        pending.push(
          sequencer.submit(request(10_000_000 + sent)).then(() => {
            lat.push(now() - t0);
          }),
        );
      }
      await sleep(2);
    }
    await Promise.all(pending);
    note(
      `latency run: ${sent} anchors offered at ${rate}/s for ${seconds} s, fsync on, batch interval ${INTERVAL_MS} ms`,
    );
    figure('ack_latency_p50', Math.round(percentile(lat, 50)), 'ms');
    figure('ack_latency_p99', Math.round(percentile(lat, 99)), 'ms');
    figure('ack_latency_max', Math.round(Math.max(...lat)), 'ms');
    figure('ack_latency_target_p99', INTERVAL_MS + 250, 'ms');
  });
}

export default async function main(args: string[] = []): Promise<void> {
  const fsync = !args.includes('--no-fsync') && !process.argv.includes('--no-fsync');
  const total = QUICK ? 200_000 : 2_000_000;
  const marks = QUICK
    ? [
        { at: 20_000, label: 'rss_after_20k' },
        { at: 100_000, label: 'throughput_100k' },
        { at: 200_000, label: 'rss_after_200k' },
      ]
    : [
        { at: 100_000, label: 'rss_after_100k' },
        { at: 1_000_000, label: 'throughput_1m' },
        { at: 2_000_000, label: 'rss_after_2m' },
      ];
  note(
    `node ${process.version}, ${cpus().length} CPUs, ${QUICK ? 'quick mode' : 'full run'}, load average at start ${loadavg()[0]!.toFixed(2)}`,
  );
  // Throughput and RSS first, in a fresh process, so the RSS peaks are the sequencer's.
  const rssBase = process.memoryUsage.rss() / MiB;
  figure('rss_at_start', Math.round(rssBase), 'MiB');
  try {
    const rate = await throughput(total, marks, fsync);
    const sha = sha256x3Rate(sha256);
    figure('sha256_x3_rate', Math.round(sha.wall), 'entries/s');
    figure('sha256_x3_rate_per_cpu_second', Math.round(sha.cpu), 'entries/CPU-s');
    figure('sequencer_vs_sha256_x3', Number((rate.wall / sha.wall).toFixed(3)), 'ratio');
    note('the same ratio per CPU second (steadier when other work shares the machine):');
    figure('sequencer_vs_sha256_x3_per_cpu', Number((rate.cpu / sha.cpu).toFixed(3)), 'ratio');
    note('for comparison: the same three hashes calling node:crypto hash() directly (src/core/hash.ts wraps it)');
    const native = sha256x3Rate((input) => nodeHash('sha256', input, 'buffer'));
    figure('sha256_x3_rate_node_crypto', Math.round(native.wall), 'entries/s');
    figure('sha256_x3_rate_node_crypto_per_cpu_second', Math.round(native.cpu), 'entries/CPU-s');
    await latency(10_000, QUICK ? 3 : 10);
  } finally {
    scratch.removeAll();
  }
  note(`load average at end ${loadavg()[0]!.toFixed(2)} (other work on the machine skews these figures)`);
}
