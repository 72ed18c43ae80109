// `stele verify <file> [--anchor]`: check a file against the log (is its digest anchored,
// does its inclusion verify) and, with --anchor, record a document_verified entry in the
// same step (only when the verification passed).
import { basename } from 'node:path';
import type { Command } from 'commander';
import { anchorFile } from '../../src/client/ledger.js';
import { UsageError } from '../../src/client/errors.js';
import { anchorJson, printAnchor } from './ledger/anchor.js';
import { common, emitJson, exitFor, openSession, out } from './ledger/common.js';
import { RULES_HELP, type VerifyCliOptions, printVerify, runVerify, verifyJson, verifyOptions } from './ledger/verify.js';

interface TopVerifyOptions extends VerifyCliOptions {
  anchor?: boolean;
  artifact?: string;
  scope?: string;
}

export function registerVerify(program: Command): void {
  common(
    verifyOptions(
      program
        .command('verify')
        .description('verify a package file against the ledger; with --anchor also record a document_verified entry')
        .argument('<package_file>', 'the file to verify')
        .option('--anchor', 'after a PASS, record a document_verified entry for the file and verify it too')
        .option('--artifact <label>', 'with --anchor: artifact label (default: the file name)')
        .option('--scope <scope>', 'with --anchor: scope label (default: [ledger] scope)')
        .addHelpText('after', RULES_HELP),
    ),
  ).action(async (file: string, opts: TopVerifyOptions) => {
    if (opts.anchor && opts.tiles) throw new UsageError('--anchor needs the API; it cannot be combined with --tiles');
    const opened = await openSession(opts, { online: !opts.tiles });
    const v = await runVerify(file, opts, opened);
    if (!opts.anchor || v.report.failed) {
      if (opts.json) emitJson(opts.anchor ? { ...verifyJson(v), recorded: null } : verifyJson(v));
      else {
        printVerify(v);
        if (opts.anchor) out('Not recorded: the file did not verify.');
      }
      exitFor(v.report);
      return;
    }
    // The pin may have moved during the verification: reload the session before anchoring.
    const again = await openSession(opts);
    const scope = opts.scope ?? again.loaded.effective.scope;
    const a = await anchorFile(again.session, again.api!, file, {
      type: 'document_verified',
      artifact: opts.artifact ?? basename(file),
      ...(scope !== undefined ? { scope } : {}),
      digest: { digest: v.digest, bytes: v.bytes },
    });
    if (opts.json) emitJson({ ...verifyJson(v), result: a.report.failed ? 'FAIL' : 'PASS', recorded: anchorJson(a) });
    else {
      printVerify(v);
      out();
      printAnchor(a, 'Recorded document_verified for');
    }
    exitFor(a.report);
  });
}
