// `stele ledger checkpoint`: the current checkpoint, verified (signature by the pinned key,
// consistency with the pin, witnesses); --note prints the signed note itself.
import type { Command } from 'commander';
import { verifyCheckpoint } from '../../../src/client/ledger.js';
import { type CommonOptions, common, emitJson, exitFor, openSession, out, renderReport, reportJson, tilesOption, logView } from './common.js';

interface CheckpointOptions extends CommonOptions {
  note?: boolean;
  tiles?: string | true;
}

export function registerCheckpoint(ledger: Command): void {
  common(
    ledger
      .command('checkpoint')
      .description('print the current signed checkpoint after verifying it')
      .option('--note', 'print the raw signed note (C2SP tlog-checkpoint) once verified')
      .addOption(tilesOption()),
  ).action(async (opts: CheckpointOptions) => {
    const o = await openSession(opts, { online: !opts.tiles });
    const view = await logView(opts.tiles, o.loaded, o.api);
    const r = await verifyCheckpoint(o.session, view);
    if (opts.json) {
      emitJson({ ...reportJson(r.report), checkpoint: r.checkpoint, witnesses: r.witnesses, note: r.note, pinnedBefore: r.pinnedBefore, pinMoved: r.pinMoved });
    } else if (opts.note && !r.report.failed) {
      process.stdout.write(r.note);
    } else {
      const c = r.checkpoint;
      out(`Checkpoint of ${c.origin}`);
      out(`  tree size   ${c.treeSize}${c.lifetimeEntries !== undefined ? ` (${c.lifetimeEntries} entries accepted)` : ''}`);
      out(`  root hash   ${c.rootHash}`);
      if (c.timestamp) out(`  timestamp   ${c.timestamp}`);
      out(`  key id      ${c.keyId}`);
      out(`  witnesses   ${r.witnesses.length ? r.witnesses.join(', ') : 'none counted'}`);
      out(`  pinned      ${r.pinMoved ? `advanced ${r.pinMoved.from} → ${r.pinMoved.to}` : `size ${r.pinnedBefore}`}`);
      out(renderReport(r.report));
      if (opts.note) out('(the note is printed only when the checkpoint verifies)');
    }
    exitFor(r.report);
  });
}
