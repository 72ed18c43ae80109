// `stele ledger proof <entry_id>`: show the stored inclusion proof and verify it again
// (fetching it from the log if it is not stored).
import type { Command } from 'commander';
import { parseEntryId } from '../../../src/core/entry.js';
import { ClientError, UsageError } from '../../../src/client/errors.js';
import { type ProofBundle, tlogProofOf, writeAtomic } from '../../../src/client/proofs.js';
import { proveEntry } from '../../../src/client/proof.js';
import { type CommonOptions, common, emitJson, exitFor, openSession, out, renderReport, reportJson } from './common.js';
import { fsReason } from '../../../src/store/files.js';

interface ProofOptions extends CommonOptions {
  offline?: boolean;
  export?: string;
}

/** Writes the verified bundle as a tlog-proof file; the bundle must carry the prior entry hash. */
async function exportTlogProof(bundle: ProofBundle, path: string): Promise<string> {
  const text = tlogProofOf(bundle);
  if (text === null)
    throw new UsageError(
      `cannot export ${bundle.entry.id}: the proof lacks the prior entry hash; run it without --offline`,
    );
  try {
    await writeAtomic(path, text);
  } catch (e) {
    throw new ClientError('io', `cannot write ${path}: ${fsReason(e)}`);
  }
  return path;
}

export function registerProof(ledger: Command): void {
  common(
    ledger
      .command('proof')
      .description('show (and re-verify) the stored inclusion proof of an entry; fetch it if not stored')
      .argument('<entry_id>', 'entry id, led_<leaf index>_<12 hex>')
      .option('--offline', 'do not contact the log (consistency with a newer pin is then not checked)')
      .option('--export <file>', 'also write the proof as a C2SP tlog-proof file (.tlog-proof), once it has verified'),
  ).action(async (id: string, opts: ProofOptions) => {
    if (!parseEntryId(id))
      throw new UsageError(`malformed entry id ${JSON.stringify(id)}: expected led_<leaf index>_<12 hex>`);
    const { api, session } = await openSession(opts, { online: !opts.offline, requireOnline: false });
    const r = await proveEntry(session, id, opts.offline ? null : api);
    const exported =
      opts.export !== undefined && !r.report.failed ? await exportTlogProof(r.bundle, opts.export) : undefined;
    const b = r.bundle;
    if (opts.json) {
      emitJson({
        ...reportJson(r.report),
        entryId: id,
        stored: r.stored,
        proofFile: r.savedProof ?? (r.stored ? session.proofs.pathOf(id) : null),
        exported: exported ?? null,
        pinMoved: r.pinMoved,
        proof: b,
      });
    } else {
      out(
        `Inclusion proof of ${id}${r.stored ? ` (stored: ${session.proofs.pathOf(id)})` : ' (fetched from the log)'}`,
      );
      out(`  entry       ${b.entry.type} (${b.entry.result}) at ${b.entry.timestamp}`);
      out(`  digest      ${b.entry.digest}`);
      if (typeof b.entry.artifact === 'string')
        out(`  artifact    ${b.entry.artifact}${typeof b.entry.scope === 'string' ? ` (scope ${b.entry.scope})` : ''}`);
      out(`  entry hash  ${b.entry.proof.entryHash}`);
      out(`  leaf        index ${b.leafIndex}, hash ${b.leafHash}`);
      out(`  tree size   ${b.treeSize}`);
      out(`  root        ${b.rootHash}`);
      out(`  audit path  ${b.auditPath.length} hash${b.auditPath.length === 1 ? '' : 'es'}`);
      b.auditPath.forEach((h, i) => out(`    ${String(i).padStart(2)}  ${h}`));
      out(
        `  checkpoint  ${b.checkpoint.logId} size ${b.checkpoint.treeSize}${b.checkpoint.timestamp ? ` (unsigned timestamp ${b.checkpoint.timestamp}, not verified)` : ''}`,
      );
      if (r.savedProof) out(`  saved       ${r.savedProof}`);
      if (exported) out(`  exported    ${exported} (c2sp.org/tlog-proof@v1)`);
      if (r.pinMoved) out(`  pin         advanced ${r.pinMoved.from} → ${r.pinMoved.to}`);
      out(renderReport(r.report));
    }
    exitFor(r.report);
  });
}
