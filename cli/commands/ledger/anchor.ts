// `stele ledger anchor <file>…`: hash each file (streaming; `-` is standard input), anchor
// its digest, verify the answer (inclusion, checkpoint signature, consistency with the pin,
// witnesses), store the proof bundle and print the entry id.
import { basename } from 'node:path';
import type { Command } from 'commander';
import { type AnchorResult, anchorFile } from '../../../src/client/anchor.js';
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
  checkFiles,
  eachFile,
  fileLabel,
  reportFiles,
  verdictLine,
  labelsLine,
} from './common.js';
import { STDIN } from '../../../src/client/hashfile.js';

interface AnchorOptions extends CommonOptions {
  artifact?: string;
  scope?: string;
  allowDuplicate?: boolean;
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
    existing: r.existing,
    treeSize: r.treeSize,
    checkpoint: r.checkpoint,
    pinMoved: r.pinMoved,
    proofFile: r.savedProof ?? null,
  };
}

export function printAnchor(r: AnchorResult, verb = 'Anchored'): void {
  out(`${verb} ${fileLabel(r.file)}`);
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
      .description('anchor files: stream the SHA-256 of each, append the digest to the log, verify and store the proof')
      .argument('<files...>', 'the files whose canonical bytes to anchor (- reads standard input)')
      .option('--artifact <label>', 'artifact label recorded with the entry (default: the file name; one file only)')
      .option('--scope <scope>', 'scope label (default: [ledger] scope)')
      .option(
        '--allow-duplicate',
        'append a new entry even if the log holds this anchor (default: get that entry back)',
      )
      .addHelpText(
        'after',
        `
With several files, each is anchored in turn and gets one result line (PASS/FAIL/ERROR);
the exit code is 1 if any failed verification, else the highest of the others.`,
      ),
  ).action(async (files: string[], opts: AnchorOptions) => {
    checkFiles(files, { '--artifact': opts.artifact });
    const { loaded, api, session } = await openSession(opts);
    const scope = opts.scope ?? loaded.effective.scope;
    const outcomes = await eachFile(files, async (file) => {
      const hp = hashProgress(fileLabel(file), opts.json);
      // Standard input has no name to label the entry with.
      const artifact = opts.artifact ?? (file === STDIN ? undefined : basename(file));
      return anchorFile(session, api!, file, {
        ...(artifact !== undefined ? { artifact } : {}),
        ...(scope !== undefined ? { scope } : {}),
        ...(loaded.effective.tenant !== undefined ? { tenant: loaded.effective.tenant } : {}),
        ...(opts.allowDuplicate ? { allowDuplicate: true } : {}),
        onHashProgress: hp.onHashProgress,
      }).finally(() => hp.stop());
    });
    if (files.length > 1) {
      process.exitCode = reportFiles(
        outcomes,
        opts.json,
        anchorJson,
        (r) =>
          `${r.existing ? 'already anchored' : 'anchored'}  ${r.entry.id}  leaf ${r.leafIndex}  ${verdictLine(r.report)}`,
      );
      return;
    }
    const r = outcomes[0]!.result!;
    if (opts.json) emitJson(anchorJson(r));
    else printAnchor(r, r.existing ? 'Already anchored' : 'Anchored');
    exitFor(r.report);
  });
}
