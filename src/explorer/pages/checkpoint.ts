/// <reference lib="dom" />
// The overview page: the verified checkpoint, its witnesses, and the latest entries.
import { TILE_WIDTH } from '../../core/tiles.js';
import { short, toBase64, toHex } from '../bytes.js';
import { badge, clear, fmtInt, fmtTime, h, hashText, type Verdict } from '../dom.js';
import { client, load, setFailure } from '../site.js';
import { SOURCE_LABEL, type TrustSource } from '../trust.js';
import { verifyBundle } from '../page-checks.js';
import { checkItem, dl, entriesByKind, noCheckpoint, reportEntryFailures } from '../widgets.js';

export async function viewCheckpoint(main: HTMLElement): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, 'Checkpoint'));
  const status = h(
    'div',
    { class: 'panel', 'data-testid': 'cp-status', 'data-status': 'PENDING' },
    badge('PENDING', 'Verifying the checkpoint…'),
  );
  main.append(status);
  const l = await load();
  if (!l.cp) {
    status.remove();
    noCheckpoint(main, l);
    return;
  }
  const cp = l.cp;
  const t = l.resolved.trust!;
  showVerdict(status, cp, t);
  const timeCell = h('span', null, badge('PENDING', 'reading the latest entry…'));
  main.append(
    fieldsSection(l, cp, timeCell),
    h('h2', null, 'Checks'),
    h('ul', { class: 'checks', 'data-testid': 'cp-checks' }, [
      checkItem(cp.signature, 'signature'),
      checkItem(cp.witnesses, 'witnesses'),
      checkItem(cp.tiles, 'tiles'),
      checkItem(cp.consistency, 'consistency'),
    ]),
    h('h2', null, 'Witness cosignatures'),
    witnessTable(cp),
    h(
      'details',
      null,
      h('summary', null, 'The signed note, as served'),
      h('pre', { class: 'note', 'data-testid': 'cp-note' }, cp.note),
    ),
    l.previous
      ? h(
          'p',
          { class: 'muted' },
          `Previously seen by this browser: size ${fmtInt(l.previous.size)}, root ${short(l.previous.rootHex)}, on ${fmtTime(l.previous.at)}.`,
        )
      : '',
  );
  document.documentElement.dataset.checkpoint = 'ready';
  // Since navigation start: the first render of the verified checkpoint view.
  window.__stele = { ...(window.__stele ?? {}), checkpointRenderedMs: performance.now() };
  const latest = h('section', { 'aria-labelledby': 'latest-h' }, h('h2', { id: 'latest-h' }, 'Latest entries'));
  main.append(latest);
  if (cp.size === 0 || !cp.root) {
    timeCell.replaceChildren('the log is empty');
    latest.append(h('p', null, 'The log is empty.'));
    return;
  }
  await showLatest(latest, cp, cp.root, timeCell);
}

type Loaded = Awaited<ReturnType<typeof load>>;
type VerifiedView = NonNullable<Loaded['cp']>;
type Trust = NonNullable<Loaded['resolved']['trust']>;

/** The panel at the top: PASS or FAIL, and what was verified, in words. */
function showVerdict(status: HTMLElement, cp: VerifiedView, t: Trust): void {
  const overall: Verdict = cp.ok ? 'PASS' : 'FAIL';
  clear(status);
  status.className = `panel panel-${overall.toLowerCase()}`;
  status.dataset.status = overall;
  status.append(
    badge(overall, cp.ok ? 'Checkpoint verified in your browser' : 'Checkpoint verification FAILED'),
    h(
      'p',
      null,
      cp.ok
        ? `Signed by ${t.log.name}${t.witnesses.length ? `, cosigned by ${cp.witnessRows.filter((w) => w.status === 'PASS').length} witnesses` : ''}, matching the tiles, ${cp.consistency.status === 'PASS' ? 'and consistent with the checkpoint this browser saw before.' : 'and remembered so later visits can check the log only grew.'}`
        : 'See the failed checks below. Do not rely on this log view.',
    ),
  );
}

/** The checkpoint's fields: origin, size, root, time (filled in once the latest entry is read), signature. */
function fieldsSection(l: Loaded, cp: VerifiedView, timeCell: HTMLElement): HTMLElement {
  const t = l.resolved.trust!;
  const cosignTimes = cp.witnessRows.filter((w) => w.time !== undefined).map((w) => w.time!);
  return h(
    'section',
    { 'aria-labelledby': 'cp-fields' },
    h('h2', { id: 'cp-fields', class: 'visually-hidden' }, 'Checkpoint fields'),
    dl([
      ['Origin', h('code', { 'data-testid': 'cp-origin' }, cp.origin)],
      ['Tree size', h('span', { 'data-testid': 'cp-size' }, fmtInt(cp.size))],
      [
        'Root hash',
        cp.root
          ? h(
              'span',
              null,
              hashText(toHex(cp.root), { 'data-testid': 'cp-root' }),
              h('br'),
              h('small', null, 'base64 ', h('code', null, toBase64(cp.root))),
            )
          : '—',
      ],
      [
        'Time',
        h(
          'span',
          null,
          timeCell,
          cosignTimes.length ? h('br') : null,
          cosignTimes.length
            ? h('small', null, `Cosigned ${fmtTime(Math.max(...cosignTimes) * 1000)} (latest witness time, signed)`)
            : null,
        ),
      ],
      [
        'Signature',
        h(
          'span',
          null,
          badge(cp.signature.status),
          ' ',
          `${t.log.name}, key id `,
          h('code', null, short(t.log.keyId, 24)),
          h('br'),
          h('small', null, `Key ${SOURCE_LABEL[l.resolved.source as TrustSource]}`),
        ),
      ],
    ]),
  );
}

/** One row per witness: its verdict on the cosignature, the time it signed, why. */
function witnessTable(cp: VerifiedView): HTMLElement {
  return cp.witnessRows.length
    ? h(
        'div',
        { class: 'scroll' },
        h(
          'table',
          { class: 'data', 'data-testid': 'witnesses' },
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              h('th', { scope: 'col' }, 'Witness'),
              h('th', { scope: 'col' }, 'Status'),
              h('th', { scope: 'col' }, 'Signed time'),
              h('th', { scope: 'col' }, 'Detail'),
            ),
          ),
          h(
            'tbody',
            null,
            cp.witnessRows.map((w) =>
              h(
                'tr',
                null,
                h('th', { scope: 'row' }, w.name),
                h('td', null, badge(w.status)),
                h('td', null, w.time !== undefined ? fmtTime(w.time * 1000) : '—'),
                h('td', null, w.detail),
              ),
            ),
          ),
        ),
      )
    : h('p', null, 'This log has no witnesses configured.');
}

/** The newest entries, each verified against the root, and the checkpoint's time from the last. */
async function showLatest(
  latest: HTMLElement,
  cp: VerifiedView,
  root: Uint8Array,
  timeCell: HTMLElement,
): Promise<void> {
  try {
    const lastTile = Math.floor((cp.size - 1) / TILE_WIDTH);
    const tree = { size: cp.size, root };
    let rows = await verifyBundle(client, lastTile, tree);
    // A last bundle of fewer than LATEST_ROWS entries: the rest come from the bundle before it.
    if (rows.length < LATEST_ROWS && lastTile > 0)
      rows = [...(await verifyBundle(client, lastTile - 1, tree)), ...rows];
    const last = rows[rows.length - 1]!;
    timeCell.replaceChildren(
      last.ok && typeof last.fields?.timestamp === 'string'
        ? h(
            'span',
            { 'data-testid': 'cp-time' },
            `Latest entry ${fmtTime(last.fields.timestamp)} `,
            h('small', null, '(record timestamp, verified against the root)'),
          )
        : badge('FAIL', 'the latest entry does not verify'),
    );
    // Releases and the control plane's events apart, the newest of each.
    latest.append(
      ...entriesByKind([...rows].reverse(), LATEST_ROWS),
      h('p', null, h('a', { href: '#/entries' }, `Browse all ${fmtInt(cp.size)} entries →`)),
    );
    reportEntryFailures(rows);
  } catch (e) {
    timeCell.replaceChildren(badge('FAIL', (e as Error).message));
    setFailure('latest', `The latest entries cannot be read: ${(e as Error).message}`);
  }
}

/** How many of the newest entries the overview lists. */
export const LATEST_ROWS = 8;
