// CLI benchmarks. Start-up (issue 33): CPU per call (user + sys of the child, from bash's
// `times`) of `node -e 0`, `stele --version`, `stele --help` and `stele ledger verify <file>`
// against a local mirror (a 1,000-entry log built here), each as a ratio to bare Node in
// the same run (targets: --version and --help ≤ 1.5×, verify ≤ 3×). `npm run bench -- cli
// startup` runs this part alone; `--cli <main.js>` measures another build (e.g. a checkout
// of an older commit). Then (issue 4):
//   • hashing a 1 GiB file as `anchor`/`verify` do, against `sha256sum` on the same file
//     in the same run (target ≥ 80 % of its speed);
//   • `stele ledger mirror` of a 1,000,000-entry log from `stele serve` on loopback:
//     entries/s and requests made;
//   • `stele ledger audit` of that 1,000,000-entry local mirror: time (≤ 30 s) and peak
//     RSS (≤ 256 MB) of the CLI process.
// The log is built once with openLocalLog (fsync off, 65,536-entry batches) and kept in
// $TMPDIR/stele-bench-cli-<n> for later runs. --quick: 100,000 entries and 256 MiB.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anchorRequest } from '../src/core/anchor.js';
import { sha256File } from '../src/client/hashfile.js';
import { openLocalLog } from '../src/serve/local-log.js';
import { SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../src/core/note.js';
import { MiB, QUICK, figure, note } from './util.js';
import { repoRoot } from '../test/helpers/vectors.js';

const cliArg = process.argv.indexOf('--cli');
const CLI =
  cliArg > 0 && process.argv[cliArg + 1] ? process.argv[cliArg + 1]! : join(repoRoot, 'dist', 'cli', 'main.js');
const ORIGIN = 'bench.cli/log';

function run(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string; ms: number; peakRssMiB: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let peak = 0;
    const poll = setInterval(() => {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) peak = Math.max(peak, Number(m[1]) / 1024);
      } catch {
        // exited
      }
    }, 20);
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(poll);
      resolve({ code: code ?? 1, stdout, stderr, ms: performance.now() - t0, peakRssMiB: peak });
    });
  });
}

async function hashBench(sizeBytes: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stele-bench-hash-'));
  const file = join(dir, 'big.bin');
  try {
    const chunk = randomBytes(16 * MiB);
    const fd = openSync(file, 'w');
    for (let off = 0; off < sizeBytes; off += chunk.length)
      writeSync(fd, chunk, 0, Math.min(chunk.length, sizeBytes - off));
    closeSync(fd);
    const mib = sizeBytes / MiB;
    let bestNode = Infinity;
    let bestSum = Infinity;
    let digest = '';
    for (let round = 0; round < 3; round++) {
      let t = performance.now();
      const expected = execFileSync('sha256sum', [file], { encoding: 'utf8' }).split(' ')[0]!;
      bestSum = Math.min(bestSum, performance.now() - t);
      t = performance.now();
      digest = (await sha256File(file)).digest;
      bestNode = Math.min(bestNode, performance.now() - t);
      if (digest !== expected) throw new Error('sha256File disagrees with sha256sum');
    }
    note(`hashing a ${mib} MiB file (page cache warm; best of 3 alternating runs)`);
    figure('hash_stele_throughput', mib / (bestNode / 1000), 'MiB/s');
    figure('hash_sha256sum_throughput', mib / (bestSum / 1000), 'MiB/s');
    figure('hash_stele_vs_sha256sum', (100 * bestSum) / bestNode, '%');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU seconds (user + sys) per call of `argv`, `calls` calls in one bash loop (its `times`). */
function cpuPerCall(argv: string[], env: NodeJS.ProcessEnv, calls: number): number {
  const quoted = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const script = `for ((i = 0; i < ${calls}; i++)); do ${quoted} >/dev/null 2>&1 || exit 9; done; times`;
  const out = execFileSync('bash', ['-c', script], { env, encoding: 'utf8' });
  // `times` prints the shell's own user/sys, then its children's: "0m0.412s 0m0.080s".
  const children = out.trim().split('\n')[1] ?? '';
  const secs = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
  if (secs.length !== 2) throw new Error(`cannot read bash times: ${out}`);
  return (secs[0]! + secs[1]!) / calls;
}

/** A log of 1,000 entries, one of them `file`'s digest, in `dir`; its vkey and key id. */
async function buildSmallLog(dir: string, fileDigest: string): Promise<{ vkey: string; keyId: string }> {
  const origin = 'bench.cli/startup';
  const log = await openLocalLog({ dataDir: dir, origin, fsync: false, batchInterval: 1, maxBatch: 1000 });
  const ps = [];
  for (let i = 0; i < 1000; i++) {
    const digest = i === 500 ? fileDigest : createHash('sha256').update(`startup entry ${i}`).digest('hex');
    const artifact = i === 500 ? 'release.tgz' : `pkg-${i}.tgz`;
    ps.push(log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digest, { artifact, scope: 'bench' })));
  }
  await Promise.all(ps);
  await log.sequencer.close();
  const pub = log.signer.publicKey;
  return { vkey: formatVkey(makeVerifier(origin, SIG_ED25519, pub)), keyId: keyIdOf(pub) };
}

/** Start-up cost of the CLI, against bare Node in the same run. */
async function startupBench(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'stele-bench-startup-'));
  try {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: root,
      XDG_CONFIG_HOME: join(root, 'config'),
      XDG_DATA_HOME: join(root, 'data'),
      // A compile cache of this run's own, warmed by the first call like a user's.
      NODE_COMPILE_CACHE: join(root, 'compile-cache'),
    };
    delete env.STELE_LEDGER_ENDPOINT;
    delete env.STELE_LEDGER_TENANT;
    delete env.NODE_OPTIONS;
    const file = join(root, 'release.tgz');
    const body = randomBytes(64 * 1024);
    const fd = openSync(file, 'w');
    writeSync(fd, body);
    closeSync(fd);
    const { vkey, keyId } = await buildSmallLog(join(root, 'log'), createHash('sha256').update(body).digest('hex'));
    const mirror = join(root, 'log', 'log');
    const node = process.execPath;
    execFileSync(node, [CLI, 'ledger', 'init', '--vkey', vkey, '--trust-key', keyId, '--tiles', mirror], {
      env,
      stdio: 'ignore',
    });
    const cases: [string, string[]][] = [
      ['node_e0', [node, '-e', '0']],
      ['version', [node, CLI, '--version']],
      ['help', [node, CLI, '--help']],
      ['ledger_verify', [node, CLI, 'ledger', 'verify', file]],
    ];
    // One untimed call each: the verify's index cache, the compile cache and the kept
    // `--help` (cli/help-cache.ts, in $HOME/.cache) are made once, as a user's first run makes them.
    for (const [, argv] of cases) execFileSync(argv[0]!, argv.slice(1), { env, stdio: 'ignore' });
    const rounds = QUICK ? 3 : 7;
    const calls = QUICK ? 3 : 5;
    const per = new Map<string, number[]>(cases.map(([n]) => [n, []]));
    // Rounds interleave the cases, so a busy neighbour slows each about alike; the median round counts.
    for (let r = 0; r < rounds; r++) for (const [n, argv] of cases) per.get(n)!.push(cpuPerCall(argv, env, calls));
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    note(
      `CPU per call (user + sys of the child), median of ${rounds} rounds of ${calls} calls; ${node} ${process.version}`,
    );
    note(`CLI: ${CLI}; ledger verify of a 64 KiB file against a local mirror of a 1,000-entry log`);
    const bare = median(per.get('node_e0')!);
    figure('startup_node_e0_cpu', bare * 1000, 'ms');
    for (const [n] of cases.slice(1)) {
      const v = median(per.get(n)!);
      figure(`startup_${n}_cpu`, v * 1000, 'ms');
      figure(`startup_${n}_vs_node`, v / bare, 'x');
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Builds (or reuses) a log of `n` entries; returns its data directory. */
async function buildLog(n: number): Promise<string> {
  const dataDir = join(tmpdir(), `stele-bench-cli-${n}`);
  const cp = join(dataDir, 'log', 'checkpoint');
  if (existsSync(cp) && readFileSync(cp, 'utf8').split('\n')[1] === String(n)) {
    note(`reusing the ${n}-entry log in ${dataDir}`);
    return dataDir;
  }
  rmSync(dataDir, { recursive: true, force: true });
  const t0 = performance.now();
  const log = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 1,
    maxBatch: 65_536,
    maxPending: 2_000_000,
  });
  for (let done = 0; done < n; ) {
    const k = Math.min(65_536, n - done);
    const ps = [];
    for (let i = done; i < done + k; i++) {
      const digest = createHash('sha256').update(`bench entry ${i}`).digest('hex');
      ps.push(
        log.sequencer.submit(
          anchorRequest('ledger_anchor', 'Anchored', digest, { artifact: `pkg-${i}.tgz`, scope: 'bench' }),
        ),
      );
    }
    await Promise.all(ps);
    done += k;
  }
  await log.sequencer.close();
  note(`built a ${n}-entry log in ${((performance.now() - t0) / 1000).toFixed(1)} s (${dataDir})`);
  return dataDir;
}

async function startServe(dataDir: string): Promise<{ url: string; keyId: string; proc: ChildProcess }> {
  const proc = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--data-dir',
      dataDir,
      '--origin',
      ORIGIN,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--log-level',
      'warn',
      '--json',
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
    });
    proc.once('exit', (c) => reject(new Error(`stele serve exited with ${c}`)));
  });
  const info = JSON.parse(line) as { url: string; keyId: string };
  return { ...info, proc };
}

export default async function main(args: string[] = process.argv.slice(2)): Promise<void> {
  if (!existsSync(CLI)) throw new Error('build first: npm run build');
  await startupBench();
  if (args.includes('startup')) return;
  const n = QUICK ? 100_000 : 1_000_000;

  await hashBench(QUICK ? 256 * MiB : 1024 * MiB);

  const dataDir = await buildLog(n);
  const t0 = performance.now();
  const serve = await startServe(dataDir);
  note(`stele serve ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (index catch-up included)`);
  const home = mkdtempSync(join(tmpdir(), 'stele-bench-home-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_DATA_HOME: join(home, 'data'),
  };
  delete env.STELE_LEDGER_ENDPOINT;
  delete env.STELE_LEDGER_TENANT;
  const mirror = join(home, 'mirror');
  try {
    const init = await run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId], env);
    if (init.code !== 0) throw new Error(`init failed: ${init.stderr}`);
    const m = await run(['ledger', 'mirror', mirror, '--json'], env);
    if (m.code !== 0) throw new Error(`mirror failed: ${m.stderr}`);
    const mj = JSON.parse(m.stdout) as {
      treeSize: number;
      requests: number;
      fetched: number;
      bytes: number;
      elapsedMs: number;
    };
    note(`mirror of ${mj.treeSize} entries from stele serve on loopback (CLI process, 16 parallel requests)`);
    figure('mirror_entries_per_second', mj.treeSize / (m.ms / 1000), 'entries/s');
    figure('mirror_seconds', m.ms / 1000, 's');
    figure('mirror_requests', mj.requests, 'requests');
    figure('mirror_objects_fetched', mj.fetched, 'objects');
    figure('mirror_bytes', mj.bytes / MiB, 'MiB');
    figure('mirror_peak_rss', m.peakRssMiB, 'MiB');
  } finally {
    serve.proc.kill('SIGTERM');
    await new Promise((r) => serve.proc.once('exit', r));
  }
  const a = await run(['ledger', 'audit', mirror, '--json'], env);
  if (a.code !== 0) throw new Error(`audit failed (exit ${a.code}): ${a.stdout.slice(0, 400)} ${a.stderr}`);
  const aj = JSON.parse(a.stdout) as { entriesChecked: number; hashTilesChecked: number; elapsedMs: number };
  note(
    `audit of the ${aj.entriesChecked}-entry mirror (whole CLI process: start, audit, exit; ${aj.hashTilesChecked} hash tiles)`,
  );
  figure('audit_seconds', a.ms / 1000, 's');
  figure('audit_entries_per_second', aj.entriesChecked / (a.ms / 1000), 'entries/s');
  figure('audit_peak_rss', a.peakRssMiB, 'MiB');
  rmSync(home, { recursive: true, force: true });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
