/// <reference lib="dom" />
// The entries pages: a record bundle at a time, and one entry with its proof.
/// <reference lib="dom" />
// The entries pages: a record bundle at a time, and one entry with its proof.
import { TILE_WIDTH } from '../../core/tiles.js';
import { badge, fmtInt, h, type Verdict } from '../dom.js';
import { bundleWidth } from '../log.js';
import { client, load, setFailure } from '../site.js';
import { type EntryResult, verifyBundle, verifyEntry } from '../page-checks.js';
import { entriesByKind, entryPanel, noCheckpoint, nonEmptyLog, reportEntryFailures } from '../widgets.js';

export async function viewEntries(main: HTMLElement, tileParam: string | undefined): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, 'Entries'));
  const verified = await nonEmptyLog(main);
  if (!verified) return;
  const { cp, root } = verified;
  const lastTile = Math.floor((cp.size - 1) / TILE_WIDTH);
  const newest = tileParam === undefined || !/^\d+$/.test(tileParam) || Number(tileParam) >= lastTile;
  const tile = newest ? lastTile : Number(tileParam);
  const width = bundleWidth(tile, cp.size);
  // The bundles this page reads, newest first, and the leaves it shows [first, end).
  const tiles = newest && width < TILE_WIDTH && tile > 0 ? [tile, tile - 1] : [tile];
  const end = tile * TILE_WIDTH + width;
  const first = Math.max(0, end - TILE_WIDTH, tiles[tiles.length - 1]! * TILE_WIDTH);
  const older = newest ? lastTile - 1 : tile - 1;
  const nav = h(
    'nav',
    { class: 'pager', 'aria-label': 'Pages of entries' },
    !newest
      ? h('a', { href: tile + 1 >= lastTile ? '#/entries' : `#/entries/${tile + 1}`, rel: 'prev' }, '← Newer')
      : h('span', { class: 'muted' }, '← Newer'),
    h('span', null, newest ? `Newest ${fmtInt(end - first)}` : `Tile ${fmtInt(tile)} of ${fmtInt(lastTile)}`),
    older >= 0
      ? h('a', { href: `#/entries/${older}`, rel: 'next' }, 'Older →')
      : h('span', { class: 'muted' }, 'Older →'),
    !newest ? h('a', { href: '#/entries' }, 'Newest') : null,
  );
  main.append(
    h(
      'p',
      null,
      `Leaves ${fmtInt(end - 1)} down to ${fmtInt(first)} of ${fmtInt(cp.size)}, newest first, read from the record bundle${tiles.length > 1 ? 's' : ''} `,
      ...tiles.flatMap((t, i) => [i > 0 ? ' and ' : '', h('code', null, `tile/records/${t}`)]),
      '.',
    ),
    nav,
  );
  const summary = h(
    'p',
    { class: 'panel', 'data-testid': 'page-status', 'data-status': 'PENDING' },
    badge('PENDING', 'Verifying this page…'),
  );
  main.append(summary);
  let reading = tile;
  try {
    const rows: EntryResult[] = [];
    for (const t of tiles) {
      reading = t;
      rows.push(...(await verifyBundle(client, t, { size: cp.size, root })).filter((r) => r.seq >= first));
    }
    const ok = rows.filter((r) => r.ok).length;
    const v: Verdict = ok === rows.length && cp.signature.status === 'PASS' ? 'PASS' : 'FAIL';
    summary.replaceChildren(
      badge(v),
      ` ${ok} of ${rows.length} entries verified in your browser: each record hashes to its entry hash, each leaf's audit path (read from the tiles) rebuilds the signed root.`,
    );
    summary.dataset.status = v;
    summary.className = `panel panel-${v.toLowerCase()}`;
    main.append(...entriesByKind([...rows].sort((a, b) => b.seq - a.seq)), nav.cloneNode(true));
    reportEntryFailures(rows);
  } catch (e) {
    summary.replaceChildren(badge('FAIL'), ` ${(e as Error).message}`);
    summary.dataset.status = 'FAIL';
    setFailure(`tile-${reading}`, `Tile ${reading} cannot be read: ${(e as Error).message}`);
  }
}

export async function viewEntry(main: HTMLElement, seqText: string): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, `Entry ${seqText}`));
  const l = await load();
  if (!l.cp?.root) return noCheckpoint(main, l);
  const seq = Number(seqText);
  if (!/^\d+$/.test(seqText) || seq >= l.cp.size) {
    main.append(
      h(
        'p',
        { 'data-testid': 'not-found' },
        `Entry ${seqText} is not found: the verified tree has ${fmtInt(l.cp.size)} entries.`,
      ),
    );
    return;
  }
  const wait = h('p', null, badge('PENDING', 'Reading and verifying the entry…'));
  main.append(wait);
  try {
    const e = await verifyEntry(client, seq, { size: l.cp.size, root: l.cp.root });
    wait.remove();
    main.querySelector('h1')!.textContent = `Entry ${e.id ?? seq}`;
    main.append(entryPanel(l.cp, e, { heading: 'Fields and proof' }));
    if (!e.ok) reportEntryFailures([e]);
  } catch (err) {
    wait.replaceChildren(badge('FAIL'), ` ${(err as Error).message}`);
  }
}
