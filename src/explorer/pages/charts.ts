/// <reference lib="dom" />
// The charts page: anchors over time and by type, from the record bundles.
/// <reference lib="dom" />
// The charts page: anchors over time and by type, from the record bundles.
import { TILE_WIDTH } from '../../core/tiles.js';
import { timeChart, typeChart } from '../charts.js';
import { badge, fmtInt, h } from '../dom.js';
import { client } from '../site.js';
import { type EntryResult, verifyBundle } from '../page-checks.js';
import { nonEmptyLog, reportEntryFailures } from '../widgets.js';

/** Bundles the charts read at most: every one of a log up to this many, else this many spread evenly over it. */
export const CHART_BUNDLES = 64;

/** The record bundles the charts read: all of them, or an even sample (the first and last included). */
export function chartTiles(lastTile: number, most = CHART_BUNDLES): number[] {
  if (lastTile + 1 <= most) return Array.from({ length: lastTile + 1 }, (_, i) => i);
  if (most <= 1) return [lastTile];
  const picked = new Set<number>();
  for (let i = 0; i < most; i++) picked.add(Math.round((i * lastTile) / (most - 1)));
  return [...picked].sort((x, y) => x - y);
}

export async function viewCharts(main: HTMLElement, params: URLSearchParams): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, 'Charts'));
  const log = await nonEmptyLog(main);
  if (!log) return;
  const { cp, root } = log;
  const most = Math.max(1, Math.min(4096, Number(params.get('bundles') ?? CHART_BUNDLES) || CHART_BUNDLES));
  const lastTile = Math.floor((cp.size - 1) / TILE_WIDTH);
  const tiles = chartTiles(lastTile, most);
  const sampled = tiles.length < lastTile + 1;
  const progress = h('progress', { max: tiles.length, value: 0, 'aria-label': 'Bundles read' });
  const wait = h(
    'p',
    { role: 'status' },
    badge('PENDING', `Reading and verifying ${fmtInt(tiles.length)} record bundles…`),
    ' ',
    progress,
  );
  main.append(wait);
  const all: EntryResult[] = [];
  for (let at = 0; at < tiles.length; at += 4) {
    const group = tiles.slice(at, at + 4);
    for (const rows of await Promise.all(group.map((t) => verifyBundle(client, t, { size: cp.size, root }))))
      all.push(...rows);
    progress.value = Math.min(tiles.length, at + 4);
  }
  wait.remove();
  const verified = all.filter((r) => r.ok && r.fields);
  reportEntryFailures(all);
  // A sampled entry stands for its share of the whole log, so the totals estimate the log's.
  const weight = sampled ? cp.size / all.length : 1;
  const entries = verified.map((r) => ({
    timestamp: String(r.fields!.timestamp),
    type: String(r.fields!.type),
    ...(sampled ? { weight } : {}),
  }));
  main.append(
    h(
      'p',
      { 'data-testid': 'chart-coverage', 'data-sampled': String(sampled) },
      sampled
        ? `The whole log of ${fmtInt(cp.size)} entries, sampled: ${fmtInt(tiles.length)} of its ${fmtInt(lastTile + 1)} record bundles, evenly spread from the first to the newest (${fmtInt(all.length)} entries read, ${fmtInt(verified.length)} verified in your browser), each counted as ${weight.toFixed(1)} entries. `
        : `The whole log: all ${fmtInt(cp.size)} entries, from the record timestamps (${fmtInt(verified.length)} verified in your browser; only verified entries are counted).`,
      sampled ? h('a', { href: `#/charts?bundles=${Math.min(4096, most * 4)}` }, 'Read more bundles') : null,
    ),
    h('h2', null, 'Anchors over time'),
    timeChart(entries),
    h('h2', null, 'By entry type'),
    typeChart(entries),
  );
}
