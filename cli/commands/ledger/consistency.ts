// `stele ledger consistency --from <a> --to <b>`: prove the log only grew between two tree
// sizes, recomputing both roots from one proof, and tie the newer root to the verified
// current checkpoint (which is itself checked against the pin).
import type { Command } from 'commander';
import { proveConsistency } from '../../../src/client/consistency.js';
import {
  type CommonOptions,
  common,
  emitJson,
  exitFor,
  intArg,
  openSession,
  out,
  renderReport,
  reportJson,
  tilesOption,
  logView,
} from './common.js';

interface ConsistencyOptions extends CommonOptions {
  from?: number;
  to?: number;
  tiles?: string | true;
}

export function registerConsistency(ledger: Command): void {
  common(
    ledger
      .command('consistency')
      .description('prove that the log only grew (append-only) between two tree sizes')
      .option('--from <size>', 'older tree size (default: the pinned size)', intArg('--from', 1))
      .option('--to <size>', 'newer tree size (default: the current size)', intArg('--to', 1))
      .addOption(tilesOption()),
  ).action(async (opts: ConsistencyOptions) => {
    const o = await openSession(opts, { online: !opts.tiles, tilesFallback: true });
    const view = await logView(opts.tiles, o.loaded, o.api);
    const r = await proveConsistency(o.session, view, opts.from, opts.to);
    if (opts.json) {
      emitJson({
        ...reportJson(r.report),
        from: r.from,
        to: r.to,
        firstRoot: r.firstRoot ?? null,
        secondRoot: r.secondRoot ?? null,
        proof: r.proof ?? null,
        checkpoint: r.checkpoint,
        pinMoved: r.pinMoved,
      });
    } else {
      out(`Consistency of ${r.checkpoint.origin} from size ${r.from} to ${r.to}`);
      if (r.firstRoot) out(`  root ${String(r.from).padEnd(8)} ${r.firstRoot}`);
      if (r.secondRoot) out(`  root ${String(r.to).padEnd(8)} ${r.secondRoot}`);
      if (r.proof) out(`  proof       ${r.proof.length} hash${r.proof.length === 1 ? '' : 'es'}`);
      out(`  checkpoint  size ${r.checkpoint.treeSize}`);
      if (r.pinMoved) out(`  pin         advanced ${r.pinMoved.from} → ${r.pinMoved.to}`);
      out(renderReport(r.report));
    }
    exitFor(r.report);
  });
}
