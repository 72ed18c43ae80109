// `stele ledger checkpoint`: the current checkpoint, verified (signature by the pinned key,
// consistency with the pin, witnesses); --note prints the signed note itself.
import type { Command } from 'commander';
import type { UnsignedFields } from '../../../src/client/session.js';
import { verifyCheckpoint } from '../../../src/client/checkpoint.js';
import {
  type CommonOptions,
  common,
  emitJson,
  exitFor,
  openSession,
  out,
  renderReport,
  reportJson,
  tilesOption,
  logView,
} from './common.js';

interface CheckpointOptions extends CommonOptions {
  note?: boolean;
  tiles?: string | true;
}

/** The JSON fields outside the signed note body, labelled as such: never among the verified facts. */
export function printUnsigned(u: UnsignedFields | undefined): void {
  if (!u || (u.timestamp === undefined && u.lifetimeEntries === undefined)) return;
  out('  unsigned    served beside the note, covered by no signature, NOT verified:');
  if (u.timestamp !== undefined) out(`    timestamp        ${u.timestamp}`);
  if (u.lifetimeEntries !== undefined) out(`    lifetimeEntries  ${u.lifetimeEntries}`);
}

export function registerCheckpoint(ledger: Command): void {
  common(
    ledger
      .command('checkpoint')
      .description(
        'print the current signed checkpoint after verifying it (unsigned JSON fields are shown apart, as unsigned)',
      )
      .option('--note', 'print the raw signed note (C2SP tlog-checkpoint) once verified')
      .addOption(tilesOption()),
  ).action(async (opts: CheckpointOptions) => {
    const o = await openSession(opts, { online: !opts.tiles, tilesFallback: true });
    const view = await logView(opts.tiles, o.loaded, o.api);
    const r = await verifyCheckpoint(o.session, view);
    if (opts.json) {
      emitJson({
        ...reportJson(r.report),
        checkpoint: r.checkpoint,
        witnesses: r.witnesses,
        note: r.note,
        pinnedBefore: r.pinnedBefore,
        pinMoved: r.pinMoved,
      });
    } else if (opts.note && !r.report.failed) {
      process.stdout.write(r.note);
    } else {
      const c = r.checkpoint;
      out(`Checkpoint of ${c.origin}`);
      out(`  tree size   ${c.treeSize}`);
      out(`  root hash   ${c.rootHash}`);
      out(`  key id      ${c.keyId} (pinned)`);
      out(`  witnesses   ${r.witnesses.length ? r.witnesses.join(', ') : 'none counted'}`);
      // The only verified time: what a policy witness signed in its cosignature.
      out(`  witnessed   ${c.witnessedAt ? `${c.witnessedAt} (signed by a witness)` : 'no witness-signed time'}`);
      out(`  pinned      ${r.pinMoved ? `advanced ${r.pinMoved.from} → ${r.pinMoved.to}` : `size ${r.pinnedBefore}`}`);
      printUnsigned(c.unsigned);
      out(renderReport(r.report));
      if (opts.note) out('(the note is printed only when the checkpoint verifies)');
    }
    exitFor(r.report);
  });
}
