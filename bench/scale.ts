// What a log costs per entry as it grows (issue 35): `npm run bench -- scale --entries N`
// fills N anchors through the sequencer, lock and LMDB index that `serve` uses (the index
// fed as serve feeds it, batch by batch), then prints, one figure a line:
//   tile_bytes_per_entry           hash tiles (every level, partials included) in the store
//   entry_bundle_bytes_per_entry   entry bundles
//   record_bundle_bytes_per_entry  record bundles, as stored
//   index_live_bytes_per_entry     the index's rows (LmdbIndex.footprint)
//   index_file_bytes_per_entry     the index's file, grown batch by batch as serve grows it
//   index_file_bytes_per_entry_rebuilt  the file `stele index rebuild` writes
//   rebuild_entries_per_s_start    `stele index rebuild`'s rate over the first tenth of the log…
//   rebuild_entries_per_s_end      …and over the last tenth
//   fsck_entries_per_s_start       `stele log fsck`'s rate over the first tenth of the log…
//   fsck_entries_per_s_end         …and over the last tenth
//   rebuild_entries_per_cpu_s      the whole rebuild's entries per CPU second (all threads): the
//   fsck_entries_per_cpu_s         figures of a machine shared with other work, where wall rates
//                                  say more about the neighbours than about the code
//   start_seconds                  opening the log and reconciling its index, as `serve` starts,
//                                  in a process of its own
//   rss_mib                        RSS of a process that has just started so (after a GC when exposed)
// Default N: 200,000 (`--quick`: 20,000). `--data-dir <dir>` keeps the filled log there (and
// measures one already filled to N there, without filling it again); `--checks-only` then
// measures only the stored bytes, the rebuild and fsck. Anchors as bench/sequencer.ts makes them: each
// with its own digest and a new artifact label (the index's largest case).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { type AnchorRequest, anchorRequest } from '../src/core/anchor.js';
import { parseTilePath } from '../src/core/tiles.js';
import { indexFeeder, reconcileIndex } from '../src/index/catchup.js';
import { rebuildIndex } from '../src/index/rebuild.js';
import { LmdbIndex } from '../src/index/lmdb.js';
import { fsckLog } from '../src/log/fsck.js';
import { localTarget } from '../src/log/targets.js';
import { localPaths, openLocalLog } from '../src/serve/local-log.js';
import { LogReader } from '../src/read/reader.js';
import { FsObjectStore } from '../src/store/fs.js';
import { MiB, QUICK, ScratchDirs, cpuSeconds, figure, note, now } from './util.js';

const ORIGIN = 'bench.stele/scale';

function request(i: number): AnchorRequest {
  const digest = (i * 2654435761).toString(16).padStart(16, '0').repeat(4).slice(0, 64);
  return anchorRequest('ledger_anchor', 'Anchored', digest, {
    artifact: `release/stele-v1.${i % 97}.${i % 13}-build-${i}.tar.gz`,
    scope: 'acme/ci',
  });
}

function entriesOption(args: readonly string[]): number {
  const at = args.indexOf('--entries');
  const given = at >= 0 ? Number(args[at + 1]?.replace(/_/g, '')) : QUICK ? 20_000 : 200_000;
  if (!Number.isInteger(given) || given < 1) throw new Error('--entries must be a positive integer');
  return given;
}

/** Bytes of the published objects by kind: hash tiles, entry bundles, record bundles. */
function storedBytes(publicDir: string): { tiles: number; entries: number; records: number } {
  const out = { tiles: 0, entries: 0, records: 0 };
  const walk = (dir: string) => {
    for (const d of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, d.name);
      if (d.isDirectory()) walk(path);
      else {
        const tile = parseTilePath(relative(publicDir, path));
        if (!tile) continue;
        const kind = tile.kind === 'entries' ? 'entries' : tile.kind === 'records' ? 'records' : 'tiles';
        out[kind] += statSync(path).size;
      }
    }
  };
  walk(publicDir);
  return out;
}

/**
 * Grows the log in `dataDir` to `total` anchors (a kept log already that long is left as it
 * is; a shorter one, say a run that was stopped, is continued from its size, its index first
 * caught up as `serve` catches it up at start).
 */
async function fill(dataDir: string, total: number): Promise<void> {
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { publicDir } = localPaths(dataDir);
  const reader = new LogReader(new FsObjectStore(publicDir));
  const { sequencer } = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    batchInterval: 250,
    maxPending: 1_000_000,
    listeners: [indexFeeder(index, reader)],
  });
  const start = sequencer.checkpoint.size;
  if (start > 0) {
    await reconcileIndex(index, reader, sequencer.checkpoint);
    if (start < total) note(`continuing a log of ${start} anchors`);
  }
  const CHUNK = 8192;
  const WINDOW = 4 * 65_536;
  const inflight: Promise<unknown>[] = [];
  const t0 = now();
  for (let from = start; from < total; from += CHUNK) {
    const n = Math.min(CHUNK, total - from);
    inflight.push(Promise.all(Array.from({ length: n }, (_, i) => sequencer.submit(request(from + i)))));
    while (inflight.length * CHUNK > WINDOW) await inflight.shift();
  }
  await Promise.all(inflight);
  if (total > start)
    note(`filled ${total - start} anchors in ${((now() - t0) / 1000).toFixed(1)} s (fsync on, 250 ms batches)`);
  await sequencer.close();
  await index.close();
}

/** Progress marks at each tenth of `size`; the rates over the first and the last tenth. */
class TenthRates {
  private readonly marks: { at: number; ms: number }[] = [{ at: 0, ms: now() }];
  private readonly tenth: number;

  constructor(private readonly size: number) {
    this.tenth = Math.max(1, Math.floor(size / 10));
  }

  readonly progress = (done: number): void => {
    const { marks } = this;
    if (done >= marks.length * this.tenth && marks.length < 10) marks.push({ at: done, ms: now() });
    if (done === this.size) marks.push({ at: done, ms: now() });
  };

  rates(): { start: number; end: number } {
    const { marks } = this;
    const rate = (a: { at: number; ms: number }, b: { at: number; ms: number }) =>
      (b.at - a.at) / Math.max(1e-3, (b.ms - a.ms) / 1000);
    const last = marks[marks.length - 1]!;
    return {
      start: rate(marks[0]!, marks[1] ?? last),
      end: rate(marks[Math.max(0, marks.length - 2)]!, last),
    };
  }
}

/** `stele log fsck` of the whole log; its rates over the first and last tenth. */
async function fsck(dataDir: string, total: number): Promise<{ start: number; end: number; perCpuSecond: number }> {
  const rates = new TenthRates(total);
  const cpu = process.cpuUsage();
  const r = await fsckLog(await localTarget(dataDir), { onProgress: rates.progress });
  if (!r.ok) throw new Error(`fsck of the bench log failed: ${r.firstBad}`);
  return { ...rates.rates(), perCpuSecond: total / cpuSeconds(cpu) };
}

/** Rebuilds the index into a new directory, as `stele index rebuild` does; the rates over the first and last tenth. */
async function rebuild(
  dataDir: string,
  scratch: ScratchDirs,
): Promise<{ start: number; end: number; fileBytes: number; perCpuSecond: number }> {
  const { sequencer } = await openLocalLog({ dataDir, origin: ORIGIN });
  const index = new LmdbIndex(join(scratch.make('stele-bench-scale-rebuild-'), 'index'));
  const size = sequencer.checkpoint.size;
  const rates = new TenthRates(size);
  const cpu = process.cpuUsage();
  await rebuildIndex(index, localPaths(dataDir).publicDir, sequencer.checkpoint, { onProgress: rates.progress });
  const { fileBytes } = index.footprint();
  await index.close();
  await sequencer.close();
  return { ...rates.rates(), fileBytes, perCpuSecond: size / cpuSeconds(cpu) };
}

/** Opens the log and its index as `serve` does at start; the seconds it took and the RSS once open. */
async function start(dataDir: string): Promise<{ seconds: number; rssMiB: number }> {
  const t0 = now();
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { publicDir } = localPaths(dataDir);
  const reader = new LogReader(new FsObjectStore(publicDir));
  const { sequencer } = await openLocalLog({ dataDir, origin: ORIGIN, listeners: [indexFeeder(index, reader)] });
  await reconcileIndex(index, reader, sequencer.checkpoint);
  const seconds = (now() - t0) / 1000;
  (globalThis as { gc?: () => void }).gc?.();
  const rssMiB = process.memoryUsage().rss / MiB;
  await sequencer.close();
  await index.close();
  return { seconds, rssMiB };
}

/** `start` in a process of its own, so its RSS is a started server's and not this run's. */
function startApart(dataDir: string): { seconds: number; rssMiB: number } {
  const out = execFileSync(
    process.execPath,
    [...process.execArgv, process.argv[1]!, 'scale', '--start-only', dataDir],
    {
      encoding: 'utf8',
    },
  );
  return JSON.parse(out.trim().split('\n').pop()!) as { seconds: number; rssMiB: number };
}

/** `--data-dir <dir>`: where the log is kept (made if absent). */
function keptDir(args: readonly string[]): string | undefined {
  const at = args.indexOf('--data-dir');
  if (at < 0) return undefined;
  const dir = args[at + 1];
  if (!dir) throw new Error('--data-dir needs a directory');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** The index as the fill grew it (serve's way), and a start on it in a process of its own. */
async function serveGrown(dataDir: string) {
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const footprint = index.footprint();
  await index.close();
  return { footprint, started: startApart(dataDir) };
}

export default async function run(args: string[]): Promise<void> {
  const only = args.indexOf('--start-only');
  if (only >= 0) {
    console.log(JSON.stringify(await start(args[only + 1]!)));
    return;
  }
  const total = entriesOption(args);
  const scratch = new ScratchDirs();
  try {
    const dataDir = keptDir(args) ?? scratch.make('stele-bench-scale-');
    await fill(dataDir, total);
    const stored = storedBytes(localPaths(dataDir).publicDir);
    // `--checks-only`: not the index as serve grew it, nor the start (whose catching up would be the old index's).
    const grown = args.includes('--checks-only') ? undefined : await serveGrown(dataDir);
    const rates = await rebuild(dataDir, scratch);
    const checked = await fsck(dataDir, total);
    note(`${total} entries${grown ? `; index rows: ${JSON.stringify(grown.footprint.rows)}` : ', checks only'}`);
    figure('tile_bytes_per_entry', stored.tiles / total, 'B');
    figure('entry_bundle_bytes_per_entry', stored.entries / total, 'B');
    figure('record_bundle_bytes_per_entry', stored.records / total, 'B');
    if (grown) {
      figure('index_live_bytes_per_entry', grown.footprint.liveBytes / total, 'B');
      figure('index_file_bytes_per_entry', grown.footprint.fileBytes / total, 'B');
    }
    figure('index_file_bytes_per_entry_rebuilt', rates.fileBytes / total, 'B');
    figure('rebuild_entries_per_s_start', Math.round(rates.start), 'entries/s');
    figure('rebuild_entries_per_s_end', Math.round(rates.end), 'entries/s');
    figure('rebuild_entries_per_cpu_s', Math.round(rates.perCpuSecond), 'entries/s');
    figure('fsck_entries_per_s_start', Math.round(checked.start), 'entries/s');
    figure('fsck_entries_per_s_end', Math.round(checked.end), 'entries/s');
    figure('fsck_entries_per_cpu_s', Math.round(checked.perCpuSecond), 'entries/s');
    if (grown) {
      figure('start_seconds', grown.started.seconds, 's');
      figure('rss_mib', Math.round(grown.started.rssMiB), 'MiB');
    }
  } finally {
    scratch.removeAll();
  }
}
