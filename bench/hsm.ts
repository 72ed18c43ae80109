// HSM signing figures (issue 17), through SoftHSM2 (PKCS#11, Debian's softhsm2):
//   (a) checkpoint signs per second with a token key (Pkcs11Signer: C_SignInit + C_SignAsync on
//       a pooled session, each signature verified), one at a time as the sequencer signs, and
//       the same for the local key file's signer for comparison;
//   (b) sequencer throughput with the HSM signer against the local key, same log settings
//       (fsync off, 100 ms batches): the sequencer signs once per batch, so the HSM's cost is
//       spread over the batch. Figures per CPU-second of this process are steadier than
//       wall-clock on a shared machine (SoftHSM2 signs inside this process, on libuv's pool,
//       so its CPU is counted).
// `--quick` / BENCH_QUICK=1: fewer signs and anchors.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AnchorRequest, anchorRequest } from '../src/core/anchor.js';
import { openLocalLog } from '../src/serve/local-log.js';
import { SeedSigner, type NoteSigner } from '../src/core/note.js';
import { QUICK, ScratchDirs, cpuSeconds, figure, note, now } from './util.js';

const ORIGIN = 'bench.stele/hsm';
const MODULE = '/usr/lib/softhsm/libsofthsm2.so';
const scratch = new ScratchDirs();

function request(i: number): AnchorRequest {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  return anchorRequest('ledger_anchor', 'Anchored', digest, {
    artifact: `release/v1.${i % 97}-build-${i}.tar.gz`,
    scope: 'acme/ci',
  });
}

/** A scratch SoftHSM2 token with an Ed25519 key generated in it; the signer's URI. */
async function tokenKey(): Promise<string> {
  const dir = scratch.make('stele-bench-hsm-');
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${dir}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  process.env.SOFTHSM2_CONF = conf;
  execFileSync(
    'softhsm2-util',
    ['--init-token', '--free', '--label', 'bench', '--so-pin', '87654321', '--pin', '24680'],
    { stdio: 'pipe' },
  );
  writeFileSync(join(dir, 'pin'), '24680\n', { mode: 0o600 });
  const uri = `pkcs11:token=bench;object=log?module-path=${MODULE}&pin-source=file:${join(dir, 'pin')}`;
  const { Token } = await import('../src/pkcs11/token.js');
  const { generateEd25519, keyUri } = await import('../src/pkcs11/signer.js');
  const token = Token.open({ uri: keyUri(uri) });
  try {
    await generateEd25519(token, keyUri(uri));
  } finally {
    token.close();
  }
  return uri;
}

async function signRate(signer: NoteSigner, n: number): Promise<{ wall: number; cpu: number }> {
  const body = new TextEncoder().encode(`${ORIGIN}\n123456789\nq1g8mD5gP0mXJvGmQmLhFhBwqv8Dk6nqGJ0a0pKZk8s=\n`);
  for (let i = 0; i < 50; i++) await signer.sign(body);
  const cpu0 = process.cpuUsage();
  const start = now();
  for (let i = 0; i < n; i++) await signer.sign(body);
  const s = (now() - start) / 1000;
  return { wall: n / s, cpu: n / cpuSeconds(cpu0) };
}

async function sequencerRate(
  signer: NoteSigner | undefined,
  total: number,
): Promise<{ wall: number; cpu: number; batches: number }> {
  const dataDir = scratch.make('stele-bench-hsm-log-');
  const log = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 100,
    maxPending: 1_000_000,
    ...(signer ? { signer } : {}),
  });
  let batches = 0;
  log.sequencer.onPublished(() => batches++);
  const CHUNK = 4096;
  const WINDOW = 65_536;
  const inflight: Promise<unknown>[] = [];
  const cpu0 = process.cpuUsage();
  const start = now();
  for (let from = 0; from < total; from += CHUNK) {
    const n = Math.min(CHUNK, total - from);
    const ps: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) ps.push(log.sequencer.submit(request(from + i)));
    inflight.push(Promise.all(ps));
    while (inflight.length * CHUNK > WINDOW) await inflight.shift();
  }
  await Promise.all(inflight);
  const s = (now() - start) / 1000;
  const cpu = cpuSeconds(cpu0);
  await log.sequencer.close();
  return { wall: total / s, cpu: total / cpu, batches };
}

export default async function run(): Promise<void> {
  const signs = QUICK ? 300 : 2000;
  const anchors = QUICK ? 60_000 : 300_000;
  const uri = await tokenKey();
  const { Pkcs11Signer } = await import('../src/pkcs11/signer.js');
  const hsm = await Pkcs11Signer.open({ uri, name: ORIGIN });
  const local = new SeedSigner(ORIGIN, new Uint8Array(32).fill(7));
  try {
    note(`SoftHSM2 (${MODULE}), Ed25519 CKM_EDDSA, ${signs} sequential signs, each verified`);
    const h = await signRate(hsm, signs);
    figure('hsm_checkpoint_signs_per_second', Math.round(h.wall), 'signs/s');
    figure('hsm_checkpoint_signs_per_cpu_second', Math.round(h.cpu), 'signs/CPU-s');
    const l = await signRate(local, signs);
    figure('local_checkpoint_signs_per_second', Math.round(l.wall), 'signs/s');

    note(
      `sequencer: ${anchors} anchors, fsync off, 100 ms batches, 65,536 in flight; local key first, then the HSM key`,
    );
    const base = await sequencerRate(undefined, anchors);
    const withHsm = await sequencerRate(hsm, anchors);
    figure('sequencer_local_key_throughput', Math.round(base.wall), 'anchors/s');
    figure('sequencer_hsm_key_throughput', Math.round(withHsm.wall), 'anchors/s');
    figure('sequencer_local_key_per_cpu_second', Math.round(base.cpu), 'anchors/CPU-s');
    figure('sequencer_hsm_key_per_cpu_second', Math.round(withHsm.cpu), 'anchors/CPU-s');
    figure('sequencer_hsm_vs_local_per_cpu_second', Number(((withHsm.cpu / base.cpu) * 100).toFixed(1)), '%');
    note(`batches: local ${base.batches}, hsm ${withHsm.batches} (one HSM sign each)`);
  } finally {
    hsm.close();
    scratch.removeAll();
  }
}
