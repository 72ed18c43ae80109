// `stele ledger status`: the pin, the log's verified checkpoint and summary, and how far a
// mirror lags behind the log and the pin. It moves no pin.
import type { Command } from 'commander';
import type { SourceStatus } from '../../../src/client/status.js';
import { ledgerStatus } from '../../../src/client/status.js';
import { ApiView, TilesView } from '../../../src/client/views.js';
import { EXIT } from '../../errors.js';
import {
  type CommonOptions,
  common,
  emitJson,
  openSession,
  out,
  renderReport,
  reportJson,
  short,
  tilesOption,
  tilesSource,
} from './common.js';

interface StatusOptions extends CommonOptions {
  tiles?: string | true;
}

const sourceJson = (s: SourceStatus) => ({
  source: s.source,
  ...(s.report ? reportJson(s.report) : {}),
  checkpoint: s.checkpoint ?? null,
  error: s.error ?? null,
});

const indent = (text: string) => text.replace(/^/gm, '  ');

export function registerStatus(ledger: Command): void {
  common(
    ledger
      .command('status')
      .description("show the pin, the log's verified checkpoint and summary, and a mirror's lag behind the log")
      .addOption(tilesOption())
      .addHelpText(
        'after',
        `
The mirror is --tiles, else the configured tiles location when it is not the endpoint.
Status verifies the checkpoints it shows (rules 1, 2, 5) but does not move the pin.
Exit code 1 when a check fails, 3 when a source cannot be read.`,
      ),
  ).action(async (opts: StatusOptions) => {
    const o = await openSession(opts, { requireOnline: false });
    const configured = o.loaded.effective.tiles;
    const mirrorAt =
      opts.tiles ?? (configured !== undefined && configured !== o.api?.endpoint ? configured : undefined);
    let mirror: TilesView | null = null;
    if (mirrorAt !== undefined) {
      const src = await tilesSource(mirrorAt, o.loaded);
      mirror = new TilesView(src, src.describe(), o.api ? new ApiView(o.api).prove : null);
    }
    const r = await ledgerStatus(o.session, o.api, mirror);
    const failed = [r.log?.report, r.mirror?.report].some((x) => x?.failed);
    const unreadable = Boolean(r.log?.error || r.mirror?.error);
    if (opts.json) {
      emitJson({
        result: failed ? 'FAIL' : unreadable ? 'ERROR' : 'PASS',
        config: o.loaded.path,
        pin: r.pin,
        log: r.log ? { ...sourceJson(r.log), summary: r.log.summary ?? null, sincePin: r.log.sincePin ?? null } : null,
        mirror: r.mirror ? { ...sourceJson(r.mirror), lag: r.mirror.lag, behindPin: r.mirror.behindPin } : null,
      });
    } else {
      out(`Configuration  ${o.loaded.path}`);
      out(
        `Pinned         ${r.pin.origin} (key id ${short(r.pin.keyId)}) at size ${r.pin.treeSize}, root ${short(r.pin.rootHash)}; witnesses: ${r.pin.quorum}`,
      );
      if (!r.log) out('Log            (no endpoint configured)');
      else if (r.log.error) out(`Log            ${r.log.source}: cannot be read: ${r.log.error}`);
      else {
        const cp = r.log.checkpoint!;
        out(
          `Log            ${r.log.source}: size ${cp.treeSize}, root ${short(cp.rootHash)} (${r.log.sincePin} since your pin)`,
        );
        const sm = r.log.summary;
        if (sm)
          out(
            `               ${sm.lifetimeEntries ?? '?'} entries accepted, ${sm.pendingEntries ?? '?'} pending, last checkpoint ${sm.lastCheckpointTime ?? '?'} (as the log says; unsigned)`,
          );
        out(indent(renderReport(r.log.report!)));
      }
      if (r.mirror) {
        if (r.mirror.error) out(`Mirror         ${r.mirror.source}: cannot be read: ${r.mirror.error}`);
        else {
          const cp = r.mirror.checkpoint!;
          const lag =
            r.mirror.lag === null
              ? 'lag behind the log unknown (no log to compare)'
              : r.mirror.lag > 0
                ? `${r.mirror.lag} ${r.mirror.lag === 1 ? 'entry' : 'entries'} behind the log`
                : r.mirror.lag === 0
                  ? 'up to date with the log'
                  : `${-r.mirror.lag} entries ahead of the log's API`;
          out(`Mirror         ${r.mirror.source}: size ${cp.treeSize}, root ${short(cp.rootHash)}; ${lag}`);
          if (r.mirror.behindPin > 0)
            out(`               older than your pin (${cp.treeSize} < ${r.pin.treeSize}): update the mirror`);
          out(indent(renderReport(r.mirror.report!)));
        }
      }
    }
    if (failed) process.exitCode = EXIT.VERIFY_FAILED;
    else if (unreadable) process.exitCode = EXIT.IO;
  });
}
