// `stele verify <file> [--anchor]`: check a file against the log (is its digest anchored,
// does its inclusion verify). With --anchor, docs/interface.md §4.3's "verification plus anchoring in one
// step": a file that verifies gets a document_verified entry; a file the log does not hold
// yet is anchored (ledger_anchor); either new entry's proof is verified.
import { basename } from 'node:path';
import type { Command } from 'commander';
import type { VerifyResult } from '../../src/client/verify-file.js';
import { anchorFile } from '../../src/client/anchor.js';
import { RULES } from '../../src/client/rules.js';
import { UsageError } from '../../src/client/errors.js';
import { anchorJson, printAnchor } from './ledger/anchor.js';
import { common, emitJson, exitFor, openSession, out, verdictLine } from './ledger/common.js';
import {
  RULES_HELP,
  type VerifyCliOptions,
  printVerify,
  runVerify,
  verifyJson,
  verifyOptions,
} from './ledger/verify.js';

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
        .description(
          'verify a package file against the ledger; with --anchor, verify and record it, or anchor it if it is new',
        )
        .argument('<package_file>', 'the file to verify')
        .option(
          '--anchor',
          'in one step: if the file is in the log and verifies, record a document_verified entry; if it is not in the log (and the log checks out), anchor it (ledger_anchor); the new entry is verified either way',
        )
        .option('--artifact <label>', 'with --anchor: artifact label (default: the file name)')
        .option('--scope <scope>', 'with --anchor: scope label (default: [ledger] scope)')
        .addHelpText('after', RULES_HELP),
    ),
  ).action(async (file: string, opts: TopVerifyOptions) => {
    if (opts.anchor && opts.tiles) throw new UsageError('--anchor needs the API; it cannot be combined with --tiles');
    const opened = await openSession(opts, { online: !opts.tiles });
    const v = await runVerify(file, opts, opened);
    if (!opts.anchor) {
      if (opts.json) emitJson(verifyJson(v));
      else printVerify(v);
      exitFor(v.report);
      return;
    }
    const step = anchorStep(v);
    if (step === null) {
      if (opts.json) emitJson({ ...verifyJson(v), anchor: null, recorded: null });
      else {
        printVerify(v);
        out('Not recorded: the file did not verify.');
      }
      exitFor(v.report);
      return;
    }
    // The pin may have moved during the verification: reload the session before anchoring.
    const again = await openSession(opts);
    const scope = opts.scope ?? again.loaded.effective.scope;
    const a = await anchorFile(again.session, again.api!, file, {
      type: step === 'anchored' ? 'ledger_anchor' : 'document_verified',
      artifact: opts.artifact ?? basename(file),
      ...(scope !== undefined ? { scope } : {}),
      ...(again.loaded.effective.tenant !== undefined ? { tenant: again.loaded.effective.tenant } : {}),
      digest: { digest: v.digest, bytes: v.bytes },
    });
    const outcome = a.report.failed ? 'FAIL' : step;
    if (opts.json) {
      // `anchor`: which step ran ("anchored": the file was new, "recorded": it verified and a
      // document_verified entry was added); `verification` is the look-up before it.
      const recorded = anchorJson(a);
      emitJson(
        step === 'anchored'
          ? { ...recorded, anchor: step, verification: verifyJson(v) }
          : { ...verifyJson(v), result: recorded.result, verdict: recorded.verdict, anchor: step, recorded },
      );
    } else {
      if (step === 'recorded') {
        // One full report (the verification); the record it adds is one line unless it fails.
        printVerify(v);
        out();
        if (a.report.failed) printAnchor(a, 'Recorded document_verified for');
        else
          out(
            `Recorded document_verified: entry ${a.entry.id}, leaf ${a.leafIndex} of tree size ${a.treeSize}, ${verdictLine(a.report)}`,
          );
      } else {
        out(`${file} is not in the log yet (sha256 ${v.digest}): anchoring it.`);
        printAnchor(a, 'Anchored (ledger_anchor)');
      }
      out(
        outcome === 'FAIL'
          ? 'verify --anchor: FAIL'
          : step === 'anchored'
            ? 'verify --anchor: anchored, and the new entry verified'
            : 'verify --anchor: verified, recorded document_verified',
      );
    }
    exitFor(a.report);
  });
}

/**
 * What `--anchor` does after the look-up: "recorded" when the file verified, "anchored" when
 * the log checks out but holds no entry for the digest (a new package), else nothing.
 */
function anchorStep(v: VerifyResult): 'anchored' | 'recorded' | null {
  if (!v.report.failed) return 'recorded';
  const notFound = v.entry === undefined && v.mode === 'api';
  const logOk = v.report.checks.every(
    // Rules 3 and 4 fail for want of an entry; the log itself (rules 1, 2, 5) must check out.
    (c) =>
      c.status !== 'FAIL' ||
      c.rule === RULES.leaf.rule ||
      c.rule === RULES.inclusion.rule ||
      c.rule === RULES.overall.rule,
  );
  return notFound && logOk ? 'anchored' : null;
}
