// `stele ledger get`: an entry by --digest, --leaf, --id or --artifact (with or without
// --scope), from the JSON API or (--tiles) from the tiles, each match verified and shown
// with its report; `--artifact NAME --all`, the artifact's history, one line per entry.
import type { Command } from 'commander';
import { type GetResult, type Match, describeLookup, getEntries, parseLookup } from '../../../src/client/lookup.js';
import { EXIT } from '../../errors.js';
import {
  type CommonOptions,
  common,
  emitJson,
  intArg,
  logView,
  openSession,
  out,
  renderReport,
  reportJson,
  scanProgress,
  short,
  tilesOption,
  verdictLine,
  labelsLine,
} from './common.js';

interface GetOptions extends CommonOptions {
  digest?: string;
  leaf?: number;
  id?: string;
  artifact?: string;
  scope?: string;
  all?: boolean;
  tiles?: string | true;
}

function matchJson(m: Match) {
  return {
    ...reportJson(m.report),
    entryId: m.entry?.id ?? null,
    entry: m.entry ?? null,
    leafIndex: m.leafIndex,
    treeSize: m.treeSize,
    checkpoint: m.checkpoint,
  };
}

export function getJson(r: GetResult) {
  const failed = r.matches.some((m) => m.report.failed);
  return {
    result: r.matches.length === 0 ? 'NOT_FOUND' : failed ? 'FAIL' : 'PASS',
    lookup: r.lookup,
    mode: r.mode,
    source: r.source,
    checkpoint: r.checkpoint,
    pinMoved: r.pinMoved,
    matches: r.matches.map(matchJson),
  };
}

function printMatch(m: Match): void {
  const e = m.entry;
  out(
    `Entry ${e?.id ?? '(unreadable)'}  leaf ${m.leafIndex} of tree size ${m.treeSize}, root ${short(m.checkpoint.rootHash)}`,
  );
  if (e) {
    out(`  type        ${e.type} (${e.result})`);
    out(`  digest      ${e.digest}`);
    out(`  timestamp   ${e.timestamp}`);
    out(labelsLine(e));
  }
  out(renderReport(m.report));
}

/** The history of an artifact: the checkpoint once, then one line per entry, oldest first. */
function printHistory(r: GetResult): void {
  const cp = r.checkpoint;
  out(
    `History of ${describeLookup(r.lookup)} in ${r.source}: ${r.matches.length} ${r.matches.length === 1 ? 'entry' : 'entries'}${cp ? `, verified against tree size ${cp.treeSize}, root ${short(cp.rootHash)}` : ''}`,
  );
  for (const m of r.matches) {
    const e = m.entry;
    const scope = e?.scope !== undefined ? `  scope ${JSON.stringify(e.scope)}` : '';
    out(
      `  ${e?.id ?? `leaf ${m.leafIndex}`}  ${e ? `${e.type} (${e.result})  ${e.timestamp}  ${e.digest}${scope}` : '(unreadable)'}  ${verdictLine(m.report)}`,
    );
  }
}

export function registerGet(ledger: Command): void {
  common(
    ledger
      .command('get')
      .description('look an entry up by digest, leaf, id or artifact label, and verify it (PASS/FAIL per rule)')
      .option('--digest <hex>', 'the SHA-256 an entry records (the earliest such entry)')
      .option('--leaf <n>', 'the leaf index', intArg('--leaf'))
      .option('--id <entry_id>', 'the entry id (led_<leaf>_<12 hex>)')
      .option(
        '--artifact <label>',
        'an artifact label: its latest entry in --scope, or in each scope when none is given',
      )
      .option('--scope <scope>', 'with --artifact: the scope (default: every scope)')
      .option(
        '--all',
        "with --artifact: the artifact's history, every entry naming it, oldest first (read from the tiles)",
      )
      .addOption(tilesOption())
      .addHelpText(
        'after',
        `
Without --scope, --artifact lists the latest entry of every scope recording that label
(the API's GET /api/ledger/search; from --tiles, the record bundles, whose index a local
mirror keeps beside the configuration). With --all, every entry naming the artifact, oldest
first, one line each (id, kind, time, digest, verdict), each verified; it reads the tiles
(--tiles, else the configured tiles or the endpoint's). Exit code 1 when nothing matches.

Examples:
  stele ledger get --digest 3f1c…
  stele ledger get --artifact build-150.bin
  stele ledger get --artifact build-150.bin --scope nightly --tiles ./mirror
  stele ledger get --artifact build-150.bin --all`,
      ),
  ).action(async (opts: GetOptions) => {
    const lookup = parseLookup(opts);
    const o = await openSession(opts, { requireOnline: !opts.tiles, tilesFallback: true });
    // The history is read from the tiles: the API answers an artifact's latest entry only.
    const view = await logView(
      opts.tiles ?? (lookup.by === 'artifact' && lookup.all ? true : undefined),
      o.loaded,
      o.api,
    );
    const sp = scanProgress(opts.json);
    const r = await getEntries(o.session, view, lookup, sp.onScanProgress).finally(() => sp.stop());
    if (opts.json) emitJson(getJson(r));
    else {
      if (r.matches.length === 0)
        out(
          `Not found: no entry with ${describeLookup(lookup)} in ${r.source}${r.checkpoint ? ` (tree size ${r.checkpoint.treeSize})` : ''}`,
        );
      else if (lookup.by === 'artifact' && lookup.all) printHistory(r);
      else for (const m of r.matches) printMatch(m);
      if (r.pinMoved) out(`pin advanced ${r.pinMoved.from} → ${r.pinMoved.to}`);
    }
    if (r.matches.length === 0 || r.matches.some((m) => m.report.failed)) process.exitCode = EXIT.VERIFY_FAILED;
  });
}
