// `stele ledger verify <file>…` (`-`: standard input): the PASS/FAIL report of docs/interface.md §4.3 rules 1–6, from the JSON
// API or (--tiles) straight from the tiles with every proof computed client-side.
import type { Command } from 'commander';
import { UsageError } from '../../../src/client/errors.js';
import { sha256File } from '../../../src/client/hashfile.js';
import { type VerifyResult, verifyFile } from '../../../src/client/verify-file.js';
import {
  type CommonOptions,
  type Opened,
  common,
  emitJson,
  exitFor,
  hashProgress,
  intArg,
  openSession,
  out,
  renderReport,
  reportJson,
  scanProgress,
  short,
  tilesOption,
  logView,
  checkFiles,
  eachFile,
  fileLabel,
  reportFiles,
  verdictLine,
  labelsLine,
} from './common.js';

export const RULES_HELP = `
The report (docs/interface.md §4.3), each check PASS or FAIL, computed on this machine:
  1  checkpoint signature: by the pinned key id (and the note agrees with the JSON)
  2  consistency: the checkpoint extends the pinned one (old size → new size), both roots
     recomputed from one proof; the pin then moves forward
  3  leaf hash: the entry records the file's SHA-256, its fields hash to its entry hash,
     and leaf = SHA-256(0x00 ‖ entry hash)
  4  inclusion: the audit path rebuilds the checkpoint root (leaf index and tree size shown)
  5  witnesses: the valid cosignatures by the trust policy's witness keys meet its quorum
     (C2SP tlog-policy); SKIP "not witnessed" when the policy requires none (quorum none)
  6  overall: PASS only if every check that ran passed; a check that did not run (SKIP) is
     never counted as passed: the result names it, e.g. "PASS (rule 2 not checked: offline)"
     (--json: verdict, complete false, notChecked), still exit 0; "PASS (not witnessed)" when
     rule 5 required nothing (exit 0: the log's own signature is all that vouches for it)`;

export interface VerifyCliOptions extends CommonOptions {
  tiles?: string | true;
  leafIndex?: number;
  proof?: string;
}

export function verifyJson(r: VerifyResult) {
  return {
    ...reportJson(r.report),
    file: r.file,
    digest: r.digest,
    bytes: r.bytes,
    mode: r.mode,
    source: r.source,
    entryId: r.entry?.id ?? null,
    entry: r.entry ?? null,
    leafIndex: r.leafIndex ?? null,
    treeSize: r.treeSize ?? null,
    checkpoint: r.checkpoint ?? null,
    pinMoved: r.pinMoved,
    proofFile: r.savedProof ?? null,
  };
}

export function printVerify(r: VerifyResult): void {
  out(`Verifying ${fileLabel(r.file)}`);
  out(`  digest      ${r.digest}`);
  const how =
    r.mode === 'api'
      ? 'JSON API'
      : r.mode === 'tiles'
        ? 'tiles, proofs computed locally'
        : 'C2SP tlog-proof file, offline';
  out(`  log         ${r.checkpoint?.origin ?? '?'} via ${r.source} (${how})`);
  if (r.entry) {
    out(`  entry       ${r.entry.id} (${r.entry.type}, ${r.entry.timestamp})`);
    out(labelsLine(r.entry));
  }
  if (r.leafIndex !== undefined && r.treeSize !== undefined)
    out(`  leaf        ${r.leafIndex} of tree size ${r.treeSize}, root ${short(r.checkpoint?.rootHash)}`);
  if (r.pinMoved) out(`  pin         advanced ${r.pinMoved.from} → ${r.pinMoved.to}`);
  out(renderReport(r.report));
}

/** Runs the verification for `ledger verify` and top-level `verify`. */
export async function runVerify(file: string, opts: VerifyCliOptions, opened?: Opened): Promise<VerifyResult> {
  // With --tiles the endpoint, if any, is asked only to prove a mirror older than the pin.
  const o = opened ?? (await openSession(opts, { requireOnline: !opts.tiles, tilesFallback: true }));
  const view = await logView(opts.tiles, o.loaded, o.api);
  const hp = hashProgress(fileLabel(file), opts.json);
  const sp = scanProgress(opts.json);
  return verifyFile(o.session, view, file, {
    ...(opts.leafIndex !== undefined ? { leafIndex: opts.leafIndex } : {}),
    onHashProgress: hp.onHashProgress,
    onScanProgress: sp.onScanProgress,
  }).finally(() => {
    hp.stop();
    sp.stop();
  });
}

/** `--proof <file>`: rules 1, 3, 4 and 5 from a tlog-proof file, with no network at all. */
async function runProofVerify(file: string, proofPath: string, opts: VerifyCliOptions): Promise<VerifyResult> {
  if (opts.tiles !== undefined || opts.leafIndex !== undefined)
    throw new UsageError('--proof excludes --tiles and --leaf-index');
  const { session } = await openSession(opts, { online: false, requireOnline: false });
  const hp = hashProgress(fileLabel(file), opts.json);
  const { digest, bytes } = await sha256File(file, hp.onHashProgress).finally(() => hp.stop());
  // Loaded for --proof only: the tlog-proof parser and its checks are not every verify's.
  const { verifyFileWithTlogProof } = await import('../../../src/client/tlog-proof-file.js');
  return verifyFileWithTlogProof(session, file, digest, bytes, proofPath);
}

export function verifyOptions(cmd: Command): Command {
  return cmd
    .addOption(tilesOption())
    .option(
      '--leaf-index <n>',
      "with --tiles: the leaf to check (default: a stored proof bundle's, else found by the file's digest in the record bundles)",
      intArg('--leaf-index'),
    );
}

export function registerLedgerVerify(ledger: Command): void {
  common(
    verifyOptions(
      ledger
        .command('verify')
        .description('verify files against the current checkpoint: PASS/FAIL for each rule of the report')
        .argument('<files...>', 'the files to verify (- reads standard input)')
        .option(
          '--proof <file>',
          'verify offline against a C2SP tlog-proof file (rule 2 only if its checkpoint is the pinned one; one file only)',
        )
        .addHelpText(
          'after',
          `${RULES_HELP}

With several files, each gets one result line (PASS/FAIL/ERROR, and its verdict); the
exit code is 1 if any failed verification, else the highest of the others.`,
        ),
    ),
  ).action(async (files: string[], opts: VerifyCliOptions) => {
    checkFiles(files, { '--proof': opts.proof, '--leaf-index': opts.leafIndex });
    if (opts.proof !== undefined) {
      const r = await runProofVerify(files[0]!, opts.proof, opts);
      if (opts.json) emitJson(verifyJson(r));
      else printVerify(r);
      exitFor(r.report);
      return;
    }
    const opened = await openSession(opts, { requireOnline: !opts.tiles, tilesFallback: true });
    const outcomes = await eachFile(files, (file) => runVerify(file, opts, opened));
    if (files.length > 1) {
      process.exitCode = reportFiles(
        outcomes,
        opts.json,
        verifyJson,
        (r) => `${r.entry ? `${r.entry.id}  leaf ${r.leafIndex}  ` : ''}${verdictLine(r.report)}`,
      );
      return;
    }
    const r = outcomes[0]!.result!;
    if (opts.json) emitJson(verifyJson(r));
    else printVerify(r);
    exitFor(r.report);
  });
}
