// Issue 19 figures. (1) Monitor catch-up: a monitor follows a N-entry log from size 0 (its
// checkpoint, then every record against its entry hash and leaf, bundle by bundle), once
// from the log's directory and once from a URL (`stele serve` answering /checkpoint and
// /tile/* from the same directory). (2) The log's throughput under `stele hammer` (which
// verifies every anchor from the tiles) with no mirror and with one mirror required
// (`--mirror-quorum 1`, a `stele mirror serve` beside it), in the same run. Wall-clock
// figures swing on a busy machine; the CPU ones (this process from process.cpuUsage, the
// servers from /proc) are the steadier.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { HttpObjectReader } from '../src/client/objects.js';
import { SIG_ED25519, formatVkey, makeVerifier } from '../src/core/note.js';
import { runHammer } from '../src/hammer/hammer.js';
import { Monitor, type MonitorSource } from '../src/monitor/monitor.js';
import { loadOrCreateKey } from '../src/keys/local-signer.js';
import { FsObjectStore } from '../src/store/fs.js';
import { makeLog } from '../test/helpers/logs.js';
import { QUICK, ScratchDirs, cpuSeconds, figure, note, now, processCpuMs } from './util.js';
import { freePort } from '../test/helpers/ports.js';

const N = QUICK ? 20_000 : 100_000;
const HAMMER_S = QUICK ? 6 : 15;
const WRITERS = 256;
const ROOT = new URL('..', import.meta.url).pathname;

/** `stele <args> --json` as a subprocess; resolves with its first JSON line once it is listening. */
async function startCli(args: string[]): Promise<{ info: { url: string; vkey: string }; child: ChildProcess }> {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
  const child = spawn(process.execPath, [join(ROOT, 'dist/cli/main.js'), ...args, '--json', '--log-level', 'warn'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { info: JSON.parse(line.toString().split('\n')[0]!) as { url: string; vkey: string }, child };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

async function catchUp(label: string, origin: string, publicKey: Uint8Array, log: MonitorSource, state: string) {
  const monitor = new Monitor({
    log,
    verifier: makeVerifier(origin, SIG_ED25519, publicKey),
    watch: { scopes: ['nothing-matches'] },
    stateFile: state,
    sinks: [],
  });
  const t0 = now();
  const cpu0 = process.cpuUsage();
  const outcome = await monitor.step();
  const secs = (now() - t0) / 1000;
  const cpu = cpuSeconds(cpu0);
  const scanned = (await monitor.load()).scanned;
  if (outcome !== 'moved' || scanned !== N) throw new Error(`${label}: monitor ended ${outcome} at ${scanned}/${N}`);
  figure(`monitor_catchup_${label}_entries_per_s`, N / secs, 'entries/s');
  figure(`monitor_catchup_${label}_entries_per_cpu_s`, N / cpu, 'entries/cpu-s');
}

async function hammer(label: string, url: string, pids: Record<string, number | undefined>): Promise<void> {
  const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid)]));
  const h = await runHammer({ url, writers: WRITERS, duplicateShare: 0, readers: 1, durationMs: HAMMER_S * 1000 });
  const anchors = h.writes.perSecond * HAMMER_S;
  figure(`hammer_${label}_throughput`, h.writes.perSecond, 'anchors/s');
  figure(`hammer_${label}_integrate_p50`, h.writes.integrateMs?.p50 ?? NaN, 'ms');
  for (const [k, pid] of Object.entries(pids))
    figure(`hammer_${label}_${k}_cpu_per_anchor`, Math.round(((processCpuMs(pid) - cpu0[k]!) / anchors) * 1000), 'µs');
  figure(`hammer_${label}_failures`, h.verificationFailures + h.writes.errors + h.reads.errors, '');
}

export default async function run(): Promise<void> {
  const dirs = new ScratchDirs();
  const children: ChildProcess[] = [];
  try {
    // (1) Catch-up from a directory and from a URL.
    const origin = 'bench.monitor/log';
    const logDir = dirs.make('stele-bench-monitor-');
    const t0 = now();
    await makeLog(logDir, origin, [N]);
    note(`${N}-entry log written by the sequencer in ${((now() - t0) / 1000).toFixed(1)} s`);
    const { signer } = await loadOrCreateKey(join(logDir, 'private', 'log.key'), origin);
    await catchUp(
      'dir',
      origin,
      signer.publicKey,
      { name: 'dir', objects: new FsObjectStore(join(logDir, 'log')) },
      join(logDir, 'dir.state'),
    );
    const served = await startCli(['serve', '--data-dir', logDir, '--origin', origin, '--port', '0']);
    children.push(served.child);
    const http = new HttpObjectReader(served.info.url);
    const serverCpu0 = processCpuMs(served.child.pid);
    await catchUp('url', origin, signer.publicKey, { name: 'url', objects: http }, join(logDir, 'url.state'));
    figure(
      'monitor_catchup_url_server_cpu_per_1k_entries',
      ((processCpuMs(served.child.pid) - serverCpu0) / N) * 1000,
      'ms',
    );
    note(`from the URL: ${http.stats.requests} requests, ${(http.stats.bytes / 1024 / 1024).toFixed(1)} MiB`);
    await stop(served.child);

    // (2) Throughput: no mirror, then one mirror required, same machine, same run.
    note(`stele hammer: ${WRITERS} writers for ${HAMMER_S} s against each log (default batching)`);
    const plainDir = dirs.make('stele-bench-monitor-plain-');
    const plain = await startCli(['serve', '--data-dir', plainDir, '--origin', 'bench.plain/log', '--port', '0']);
    children.push(plain.child);
    await hammer('no_mirror', plain.info.url, { log: plain.child.pid });
    await stop(plain.child);

    const mOrigin = 'bench.mirrored/log';
    const mLogDir = dirs.make('stele-bench-monitor-mirrored-');
    const mKey = await loadOrCreateKey(join(mLogDir, 'private', 'log.key'), mOrigin);
    const logVkey = formatVkey(makeVerifier(mOrigin, SIG_ED25519, mKey.signer.publicKey));
    const logPort = await freePort();
    const mirror = await startCli([
      'mirror',
      'serve',
      '--data-dir',
      dirs.make('stele-bench-monitor-mirror-'),
      '--name',
      'bench.mirror/m1',
      '--log',
      `${logVkey}=http://127.0.0.1:${logPort}`,
      '--port',
      '0',
    ]);
    children.push(mirror.child);
    const mirrored = await startCli([
      'serve',
      '--data-dir',
      mLogDir,
      '--origin',
      mOrigin,
      '--port',
      String(logPort),
      '--mirror',
      `${mirror.info.vkey}=${mirror.info.url}`,
      '--mirror-quorum',
      '1',
    ]);
    children.push(mirrored.child);
    await hammer('one_mirror', mirrored.info.url, { log: mirrored.child.pid, mirror: mirror.child.pid });
  } finally {
    for (const c of children) await stop(c);
    dirs.removeAll();
  }
}
