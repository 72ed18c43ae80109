// Issue 6 figures: witness add-checkpoint throughput with real consistency proofs, and the
// latency that collecting 3 cosignatures adds to an anchor at a 1 s batch interval.
// The witness runs as its own process (`stele witness serve`); 16 logs (one tree, 16
// origins and keys) each drive their own chain of checkpoints so requests can overlap.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anchorRequest } from '../src/core/anchor.js';
import { signCheckpoint } from '../src/core/checkpoint.js';
import { openLocalLog } from '../src/serve/local-log.js';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../src/core/note.js';
import { LogReader } from '../src/read/reader.js';
import { formatAddCheckpoint } from '../src/witness/protocol.js';
import { QUICK, figure, note, percentile } from './util.js';

const ROOT = new URL('..', import.meta.url).pathname;
const LOGS = 16;
const TREE = QUICK ? 16_384 : 65_536;
const STEPS = QUICK ? 200 : 1000;

async function child(args: string[]): Promise<{ proc: ChildProcess; info: { url: string } }> {
  const proc = spawn(process.execPath, ['dist/cli/main.js', ...args, '--json', '--log-level', 'warn'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(proc.stdout!, 'data')) as [Buffer];
  return { proc, info: JSON.parse(line.toString().split('\n')[0]!) as { url: string } };
}

async function stop(proc: ChildProcess): Promise<void> {
  proc.kill('SIGTERM');
  await once(proc, 'exit');
}

async function witnessThroughput(dir: string): Promise<void> {
  const logDir = join(dir, 'tree');
  const { sequencer, store } = await openLocalLog({
    dataDir: logDir,
    origin: 'bench.tree/log',
    fsync: false,
    batchInterval: 1,
  });
  await Promise.all(
    Array.from({ length: TREE }, (_, i) =>
      sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', i.toString(16).padStart(64, '0'))),
    ),
  );
  await sequencer.close();
  const reader = new LogReader(store, { unverified: true });
  const sizes = Array.from({ length: STEPS }, (_, k) => Math.floor(((k + 1) * TREE) / STEPS));
  const roots = await Promise.all(sizes.map((s) => reader.treeHash(s, TREE)));
  const proofs = await Promise.all(
    sizes.map((s, k) => (k === 0 ? [] : reader.consistencyProof(sizes[k - 1]!, s, TREE))),
  );
  note(
    `proofs of ${Math.round(proofs.reduce((a, p) => a + p.length, 0) / proofs.length)} hashes on average, tree of ${TREE}`,
  );

  const logs = Array.from(
    { length: LOGS },
    (_, j) => new SeedSigner(`bench${j}.witness/log`, new Uint8Array(32).fill(j + 1)),
  );
  const bodies = await Promise.all(
    logs.map(async (signer) =>
      Promise.all(
        sizes.map(async (size, k) => {
          const cp = await signCheckpoint({ origin: signer.name, size, root: roots[k]! }, signer);
          return formatAddCheckpoint({ oldSize: k === 0 ? 0 : sizes[k - 1]!, proof: proofs[k]!, checkpoint: cp.note });
        }),
      ),
    ),
  );
  const vkeys = logs.flatMap((s) => ['--log', formatVkey(makeVerifier(s.name, SIG_ED25519, s.publicKey))]);
  const w = await child([
    'witness',
    'serve',
    '--data-dir',
    join(dir, 'w'),
    '--name',
    'bench.witness',
    '--port',
    '0',
    ...vkeys,
  ]);
  try {
    const latencies: number[] = [];
    let failures = 0;
    const started = performance.now();
    await Promise.all(
      bodies.map(async (chain) => {
        for (const body of chain) {
          const t = performance.now();
          const res = await fetch(`${w.info.url}/add-checkpoint`, { method: 'POST', body });
          await res.text();
          latencies.push(performance.now() - t);
          if (res.status !== 200) failures++;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    figure('witness_add_checkpoint_throughput', Math.round((LOGS * STEPS) / seconds), 'req/s');
    figure('witness_add_checkpoint_p50', percentile(latencies, 50), 'ms');
    figure('witness_add_checkpoint_p99', percentile(latencies, 99), 'ms');
    figure('witness_add_checkpoint_failures', failures, 'requests');
  } finally {
    await stop(w.proc);
  }
}

async function anchorLatency(dir: string, witnesses: number): Promise<number[]> {
  const args = ['serve', '--data-dir', join(dir, `log${witnesses}`), '--port', '0', '--batch-interval', '1000'];
  if (witnesses > 0) args.push('--demo-witnesses', String(witnesses));
  const s = await child(args);
  try {
    const latencies: number[] = [];
    const end = performance.now() + (QUICK ? 5000 : 12_000);
    let n = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          const res = await fetch(`${s.info.url}/api/ledger/anchor`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ digest: (n++).toString(16).padStart(64, '0') }),
          });
          await res.text();
          if (res.status === 201) latencies.push(performance.now() - t);
        }
      }),
    );
    return latencies;
  } finally {
    await stop(s.proc);
  }
}

export default async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stele-bench-witness-'));
  try {
    await witnessThroughput(dir);
    const plain = await anchorLatency(dir, 0);
    const witnessed = await anchorLatency(dir, 3);
    figure('anchor_latency_p50_no_witnesses', percentile(plain, 50), 'ms');
    figure('anchor_latency_p50_3_witnesses', percentile(witnessed, 50), 'ms');
    figure('anchor_latency_p99_no_witnesses', percentile(plain, 99), 'ms');
    figure('anchor_latency_p99_3_witnesses', percentile(witnessed, 99), 'ms');
    figure('added_latency_of_3_cosignatures_p50', percentile(witnessed, 50) - percentile(plain, 50), 'ms');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
