// Issue 19 figures: tlog-mirror ingestion through add-entries (a Stele log of N entries
// pushed from size 0 by the log-side client, 32 gzip-compressed packages per request, the
// mirror verifying each package's subtree consistency proof and writing bundles and tiles),
// in entries per wall-clock second and per CPU second. Mirror and client share this process
// (in-process HTTP over loopback), so the CPU figure covers both sides of the exchange; it
// is the steadier one on a busy machine. fsync is off on both sides.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { MirrorClient, logDataFromObjects } from '../src/mirror/client.js';
import { startMirror } from '../src/mirror/host.js';
import { SIG_ED25519, makeVerifier } from '../src/core/note.js';
import { FsObjectStore } from '../src/store/fs.js';
import { loadOrCreateKey } from '../src/keys/local-signer.js';
import { makeLog } from '../test/helpers/logs.js';
import { QUICK, cpuSeconds, figure, note, now } from './util.js';

const N = QUICK ? 10_000 : 50_000;
const ORIGIN = 'bench.mirror/log';

export default async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stele-bench-mirror-'));
  const logDir = join(dir, 'log');
  await makeLog(logDir, ORIGIN, [N]);
  const { signer } = await loadOrCreateKey(join(logDir, 'private', 'log.key'), ORIGIN);
  const objects = new FsObjectStore(join(logDir, 'log'), { fsync: false });
  const noteText = Buffer.from((await objects.get('checkpoint'))!).toString();
  const m = await startMirror({
    dataDir: join(dir, 'mirror'),
    name: 'bench.mirror/m1',
    logs: [{ verifier: makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey), records: objects }],
    host: '127.0.0.1',
    port: 0,
    logger: pino({ level: 'silent' }),
    fsync: false,
  });
  try {
    const client = new MirrorClient({ verifier: m.verifier, url: m.url });
    const t0 = now();
    const cpu0 = process.cpuUsage();
    await client.push(noteText, logDataFromObjects(objects, N));
    const secs = (now() - t0) / 1000;
    const cpu = cpuSeconds(cpu0);
    note(
      `${N} Stele entries (with their record bundles, fetched and checked by the mirror), ${(client.bytesSent / 1024 / 1024).toFixed(1)} MiB gzip sent`,
    );
    figure('mirror_ingest_entries_per_s', N / secs, 'entries/s');
    figure('mirror_ingest_entries_per_cpu_s', N / cpu, 'entries/cpu-s');
  } finally {
    await m.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
