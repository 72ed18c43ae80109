// `stele ledger anchor <file>`: hash the file (streaming), anchor its digest, verify the
// answer (inclusion, checkpoint signature, consistency with the pin, witnesses), store the
// proof bundle and print the entry id.
import { basename } from 'node:path';
import type { Command } from 'commander';
import { type AnchorResult, anchorFile } from '../../../src/client/ledger.js';
import {
  type CommonOptions,
  common,
  emitJson,
  exitFor,
  hashProgress,
  openSession,
  out,
  renderReport,
  reportJson,
  short,
} from './common.js';

interface AnchorOptions extends CommonOptions {
  artifact?: string;
  scope?: string;
}

export function anchorJson(r: AnchorResult) {
  return {
    ...reportJson(r.report),
    file: r.file,
    digest: r.digest,
    bytes: r.bytes,
    entryId: r.entry.id,
    entry: r.entry,
    leafIndex: r.leafIndex,
    treeSize: r.treeSize,
    checkpoint: r.checkpoint,
    pinMoved: r.pinMoved,
    proofFile: r.savedProof ?? null,
  };
}

/** The labels an entry records (artifact, scope, tenant), for the text reports. */
export function labelsLine(e: Readonly<Record<string, unknown>>): string {
  const shown = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : '(none)');
  return `  labels      artifact ${shown(e.artifact)}, scope ${shown(e.scope)}, tenant ${shown(e.tenant)}`;
}

export function printAnchor(r: AnchorResult, verb = 'Anchored'): void {
  out(`${verb} ${r.file}`);
  out(`  digest      ${r.digest}`);
  out(`  entry id    ${r.entry.id}`);
  out(`  type        ${r.entry.type} (${r.entry.result})`);
  out(labelsLine(r.entry));
  out(`  leaf        ${r.leafIndex} in tree of size ${r.treeSize}, root ${short(r.checkpoint.rootHash)}`);
  if (r.pinMoved) out(`  pin         advanced ${r.pinMoved.from} → ${r.pinMoved.to}`);
  if (r.savedProof) out(`  proof       ${r.savedProof}`);
  out(renderReport(r.report));
}

export function registerAnchor(ledger: Command): void {
  common(
    ledger
      .command('anchor')
      .description('anchor a file: stream its SHA-256, append the digest to the log, verify and store the proof')
      .argument('<package_file>', 'the file whose canonical bytes to anchor')
      .option('--artifact <label>', 'artifact label recorded with the entry (default: the file name)')
      .option('--scope <scope>', 'scope label (default: [ledger] scope)'),
  ).action(async (file: string, opts: AnchorOptions) => {
    const { loaded, api, session } = await openSession(opts);
    const hp = hashProgress(file, opts.json);
    const scope = opts.scope ?? loaded.effective.scope;
    const r = await anchorFile(session, api!, file, {
      artifact: opts.artifact ?? basename(file),
      ...(scope !== undefined ? { scope } : {}),
      ...(loaded.effective.tenant !== undefined ? { tenant: loaded.effective.tenant } : {}),
      onHashProgress: hp.onHashProgress,
    }).finally(() => hp.stop());
    if (opts.json) emitJson(anchorJson(r));
    else printAnchor(r, r.existing ? 'Already anchored' : 'Anchored');
    exitFor(r.report);
  });
}
