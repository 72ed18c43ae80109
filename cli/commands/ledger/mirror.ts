// `stele ledger mirror <dir>`: copy the checkpoint and every tile, verified, incrementally.
import type { Command } from 'commander';
import { type MirrorResult, followMirror, mirrorLog } from '../../../src/client/ledger-mirror.js';
import { HttpObjectReader, type LogObjectSource, isUrl, openObjectSource } from '../../../src/client/objects.js';
import type { Trust } from '../../../src/client/rules.js';
import { addExplorerToMirror } from '../../../src/client/ledger-mirror-explorer.js';
import { UsageError } from '../../../src/client/errors.js';
import { type CommonOptions, common, emitJson, intArg, openSession, out, progress } from './common.js';

interface MirrorOptions extends CommonOptions {
  from?: string;
  concurrency?: number;
  reverify?: boolean;
  follow?: boolean;
  interval?: number;
  maxInterval?: number;
  withExplorer?: boolean;
}

export function registerMirror(ledger: Command): void {
  common(
    ledger
      .command('mirror')
      .description(
        'copy the log (checkpoint, hash tiles, bundles) into <dir>, verifying every object before keeping it; incremental and resumable',
      )
      .argument('<dir>', 'mirror directory (created if needed)')
      .option('--from <url|dir>', 'where to copy from (default: [ledger] tiles, else the endpoint)')
      .option('--concurrency <n>', 'parallel requests (default 16)', intArg('--concurrency', 1))
      .option('--reverify', 're-verify objects the mirror already holds')
      .option('--follow', 'keep the mirror current: poll the checkpoint and copy each new tree (until SIGINT/SIGTERM)')
      .option(
        '--interval <ms>',
        'with --follow: polling interval, doubled while nothing changes',
        intArg('--interval', 10),
      )
      .option('--max-interval <ms>', 'with --follow: longest polling interval', intArg('--max-interval', 10))
      .option(
        '--with-explorer',
        'also copy the explorer, with an explorer.json pinning the log key, so the mirror serves it',
      ),
  ).action(async (dir: string, opts: MirrorOptions) => {
    if (!opts.follow && (opts.interval !== undefined || opts.maxInterval !== undefined))
      throw new UsageError('--interval and --max-interval go with --follow');
    const { loaded, session } = await openSession(opts, { online: false, requireOnline: false });
    const from = opts.from ?? loaded.effective.tiles ?? loaded.effective.endpoint;
    if (!from) throw new UsageError('nothing to mirror from: pass --from <url> or configure an endpoint');
    const source = isUrl(from) ? new HttpObjectReader(from) : await openObjectSource(from);
    if (opts.follow) {
      if (opts.withExplorer) await addExplorerToMirror(dir, loaded.effective.trust);
      return follow(source, dir, session.trust, opts);
    }
    const bar = progress('mirroring', opts.json, 'objects');
    const r = await mirrorLog({
      source,
      sourceName: source.describe(),
      dest: dir,
      trust: session.trust,
      ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
      ...(opts.reverify ? { reverify: true } : {}),
      onProgress: (d, t) => bar.update(d, t),
    }).finally(() => bar.stop());
    const stats = { requests: source.stats.requests, bytes: source.stats.bytes };
    const explorer = opts.withExplorer ? await addExplorerToMirror(dir, loaded.effective.trust) : undefined;
    if (opts.json) {
      emitJson({ result: 'PASS', ...r, source: source.describe(), dir, ...stats, ...(explorer ? { explorer } : {}) });
      return;
    }
    const verb =
      r.status === 'up-to-date'
        ? 'Mirror is up to date'
        : r.status === 'source-behind'
          ? 'Source is behind the mirror'
          : 'Mirrored';
    out(`${verb}: ${r.origin} at size ${r.treeSize} in ${dir}`);
    out(`  root        ${r.rootHash}`);
    out(`  verified    signature: ${r.signature.detail}`);
    out(`              witnesses: ${r.witnesses.detail}`);
    out(`              ${r.consistency.detail}`);
    out(`              ${r.pin.detail}`);
    if (explorer) out(`  explorer    ${explorer.files} files and ${explorer.config}, pinned to ${explorer.vkey}`);
    out(
      `  objects     ${r.fetched} fetched and verified, ${r.reused} already present; ${stats.requests} requests in ${(r.elapsedMs / 1000).toFixed(1)} s`,
    );
  });
}

/** `--follow`: one line (or JSON line) per step that changed the mirror, until SIGINT/SIGTERM. */
async function follow(source: LogObjectSource, dir: string, trust: Trust, opts: MirrorOptions): Promise<void> {
  const interval = opts.interval ?? 1000;
  const maxInterval = opts.maxInterval ?? 60_000;
  if (maxInterval < interval) throw new UsageError('--max-interval must be at least --interval');
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  let first = true;
  const show = (r: MirrorResult) => {
    if (r.status !== 'updated' && !first) return;
    first = false;
    if (opts.json)
      process.stdout.write(`${JSON.stringify({ result: 'PASS', ...r, source: source.describe(), dir })}\n`);
    else out(`Mirrored: ${r.origin} at size ${r.treeSize} (${r.fetched} objects fetched and verified) in ${dir}`);
  };
  await followMirror({
    source,
    sourceName: source.describe(),
    dest: dir,
    trust,
    interval,
    maxInterval,
    signal: stop.signal,
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
    onStep: show,
    onError: (e) => process.stderr.write(`stele: mirror step failed (retrying): ${e.message.split('\n')[0]}\n`),
  });
}
