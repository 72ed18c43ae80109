// `stele hammer <url>`: load and correctness for any Stele deployment (src/hammer/). Prints
// a live progress line on stderr, then the report (or --json); exits non-zero if anything
// failed to verify, a request failed, or a goal was missed, so a deployment can be gated on it.
import { type Command, InvalidArgumentError } from 'commander';
import type { HammerProgress, HammerReport, LatencySummary } from '../../src/hammer/hammer.js';
import { CliError, EXIT } from '../errors.js';
import { isQuiet } from '../verbosity.js';
import { emitJson, green, intArg, out, red } from './ledger/common.js';

const HELP = `
A share of the writers' POSTs re-send a digest already anchored (--duplicates). Readers
read only the log's tlog-tiles objects (checkpoint, tile/…) from --tiles (default: the
URL): every checkpoint seen, by a reader or in an anchor answer, must be signed by the log
and consistent with every other, and every acknowledged anchor must be proved included.
429 and 503 answers count as pushback (retried after Retry-After), not errors.

The log's key: --vkey, else fetched once from <url>/api/ledger/key (trust on first use).
The anchor route's bearer token, if the log needs one: env STELE_ANCHOR_TOKEN.

Exit codes:
  0  everything verified, no request failed, every goal met
  1  a verification failed, a request failed, an anchor was not proved included, or a goal was missed
  2  usage error
  3  network error before the run could start`;

const shareArg = (v: string): number => {
  const n = Number(v);
  if (!/^\d*\.?\d+$/.test(v) || n > 1) throw new InvalidArgumentError('must be a share between 0 and 1');
  return n;
};

const secondsArg = (v: string): number => {
  const n = Number(v);
  if (!/^\d*\.?\d+$/.test(v) || n <= 0 || n > 86_400)
    throw new InvalidArgumentError('must be a number of seconds, 0 < s ≤ 86400');
  return n;
};

interface HammerFlags {
  tiles?: string;
  vkey?: string;
  writers: number;
  rate?: number;
  duplicates: number;
  readers: number;
  maxRuntime: number;
  writeGoal?: number;
  json?: boolean;
}

const fmt = (l: LatencySummary | null) =>
  l ? `min ${l.min} / avg ${l.avg} / p50 ${l.p50} / p99 ${l.p99} / max ${l.max} ms` : 'none';

function render(r: HammerReport): void {
  out(`${r.ok ? green('OK') : red('FAILED')}  ${r.url} for ${r.durationS} s`);
  out(`  tree          ${r.tree.startSize} → ${r.tree.endSize} (+${r.tree.growth})`);
  out(
    `  anchors       ${r.writes.acknowledged} acknowledged (${r.writes.duplicates} duplicates), ${r.writes.perSecond}/s`,
  );
  out(`  integrate     ${fmt(r.writes.integrateMs)}`);
  out(`  pushback      ${r.writes.pushback[429]} × 429, ${r.writes.pushback[503]} × 503`);
  out(
    `  verified      ${r.reads.checkpoints} checkpoints, ${r.reads.consistencyProofs} consistency proofs, ${r.reads.inclusionProofs} inclusions, ${r.reads.spotChecks} spot checks`,
  );
  out(
    `  failures      ${r.verificationFailures} verification, ${r.writes.errors} write errors, ${r.reads.errors} read errors, ${r.reads.unverified} not proved included`,
  );
  if (r.goals.writeGoal)
    out(`  write goal    ${r.goals.writeGoal.target}/s: ${r.goals.writeGoal.met ? green('met') : red('missed')}`);
  for (const p of r.problems) out(`  ${red('!')} ${p}`);
}

/** The live line: redrawn in place on a terminal, a line every few seconds otherwise. */
function progressLine(json: boolean | undefined): (p: HammerProgress) => void {
  if (process.env.STELE_NO_PROGRESS || isQuiet()) return () => undefined;
  const tty = Boolean(process.stderr.isTTY);
  let lastPrinted = 0;
  return (p) => {
    const line = `hammer ${p.elapsedS.toFixed(0)} s | tree ${p.treeSize} | ${p.anchors} anchors, ${p.anchorsPerS.toFixed(0)}/s | pushback ${p.pushback} | verified ${p.verified} | failures ${p.failures}`;
    if (tty && !json) process.stderr.write(`\r\u001b[2K${line}`);
    else if (p.elapsedS - lastPrinted >= 5) {
      lastPrinted = p.elapsedS;
      process.stderr.write(`${line}\n`);
    }
  };
}

export function registerHammerCommand(program: Command): void {
  program
    .command('hammer <url>')
    .description(
      'load and verify a Stele deployment: writers anchor, readers verify every checkpoint and inclusion from the tiles',
    )
    .option('--tiles <url>', "where the log's tlog-tiles objects are (default: the URL)")
    .option('--vkey <vkey>', "the log's note verifier key (default: fetched from <url>/api/ledger/key)")
    .option('--writers <n>', 'concurrent writers, each waiting for its answer', intArg('--writers', 0), 16)
    .option(
      '--rate <n>',
      'target anchors per second across the writers (default: as fast as they go)',
      intArg('--rate', 1),
    )
    .option('--duplicates <share>', 'share of POSTs that re-send a digest already anchored', shareArg, 0.05)
    .option('--readers <n>', 'concurrent readers', intArg('--readers', 1), 2)
    .option('--max-runtime <s>', 'how long the writers run, in seconds', secondsArg, 10)
    .option(
      '--write-goal <n>',
      'fail unless at least n anchors per second were acknowledged',
      intArg('--write-goal', 1),
    )
    .option('--json', 'print the report as one JSON document on stdout')
    .addHelpText('after', HELP)
    .action(async (url: string, flags: HammerFlags) => {
      const { runHammer, HammerSetupError } = await import('../../src/hammer/hammer.js');
      if (!/^https?:\/\//i.test(url)) throw new CliError(EXIT.USAGE, `${url} is not an http(s) URL`);
      const show = progressLine(flags.json);
      const report = await runHammer({
        url,
        tiles: flags.tiles,
        vkey: flags.vkey,
        token: process.env.STELE_ANCHOR_TOKEN || undefined,
        writers: flags.writers,
        rate: flags.rate,
        duplicateShare: flags.duplicates,
        readers: flags.readers,
        durationMs: flags.maxRuntime * 1000,
        writeGoal: flags.writeGoal,
        onProgress: show,
      }).catch((e: unknown) => {
        if (e instanceof HammerSetupError) throw new CliError(EXIT.IO, e.message);
        throw e;
      });
      if (process.stderr.isTTY && !flags.json && !isQuiet()) process.stderr.write('\n');
      if (flags.json) emitJson(report);
      else render(report);
      if (!report.ok) process.exitCode = EXIT.VERIFY_FAILED;
    });
}
