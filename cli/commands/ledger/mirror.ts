// `stele ledger mirror <dir>`: copy the checkpoint and every tile, verified, incrementally.
import type { Command } from 'commander';
import { mirrorLog } from '../../../src/client/mirror.js';
import { addExplorerToMirror } from '../../../src/client/mirror-explorer.js';
import { HttpObjectReader, isUrl, openObjectSource } from '../../../src/client/objects.js';
import { UsageError } from '../../../src/client/errors.js';
import { type CommonOptions, common, emitJson, intArg, openSession, out, progress } from './common.js';

interface MirrorOptions extends CommonOptions {
  from?: string;
  concurrency?: number;
  reverify?: boolean;
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
      .option(
        '--with-explorer',
        'also copy the explorer, with an explorer.json pinning the log key, so the mirror serves it',
      ),
  ).action(async (dir: string, opts: MirrorOptions) => {
    const { loaded, session } = await openSession(opts, { online: false, requireOnline: false });
    const from = opts.from ?? loaded.effective.tiles ?? loaded.effective.endpoint;
    if (!from) throw new UsageError('nothing to mirror from: pass --from <url> or configure an endpoint');
    const source = isUrl(from) ? new HttpObjectReader(from) : await openObjectSource(from);
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
