/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The Stele explorer: a single page that verifies the log in the visitor's browser. Every
// number it shows comes from the checkpoint and tiles and is checked here: the checkpoint
// signature against the trusted key, witness cosignatures, the tiles against the signed root,
// consistency with the last checkpoint this browser saw, and for each entry the record →
// entry hash → leaf → audit path → root chain. The JSON API is used only to find a leaf
// index by digest or artifact; without it (a static mirror) the record bundles are scanned.
import { TILE_WIDTH } from '../core/tiles.js';
import { short, toBase64, toHex } from './bytes.js';
import { auditPathDrawing, timeChart, typeChart } from './charts.js';
import { type Child, type Verdict, badge, clear, fmtBytes, fmtInt, fmtTime, h, hashText } from './dom.js';
import { artifactId } from '../core/entry.js';
import { hashBlob } from './hashfile.js';
import { FetchError, LogClient, bundleWidth } from './log.js';
import {
  type LabelMatch,
  type Query,
  DEFAULT_SCAN_ENTRIES,
  apiLookup,
  apiSearch,
  classify,
  labelMatches,
  recordMatcher,
  scanRecords,
} from './search.js';
import {
  SOURCE_LABEL,
  type ResolvedTrust,
  type TrustConfig,
  type TrustSource,
  offeredConfig,
  pin,
  readSeen,
  resolveTrust,
  unpin,
  writeSeen,
} from './trust.js';
import { TLOG_PROOF_EXTENSION } from '../core/tlog-proof.js';
import {
  type Check,
  type CheckpointResult,
  type EntryFields,
  type EntryResult,
  type Report,
  buildReport,
  verifyBundle,
  verifyCheckpoint,
  verifyEntry,
  verifyTlogProofFile,
} from './verify.js';
import './styles.css';

const base = new URL('./', location.href);
const client = new LogClient(base);
const storage: Storage | null = (() => {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
})();

interface Loaded {
  readonly resolved: ResolvedTrust;
  readonly cp: CheckpointResult | null;
  /** Why there is no checkpoint result (no key, fetch failure). */
  readonly error: string | null;
  /** The last checkpoint seen before this one (for display). */
  readonly previous: { size: number; rootHex: string; at: string } | null;
}

declare global {
  interface Window {
    /** Timings for tests and the benchmark. */
    __stele?: { checkpointMs?: number; checkpointRenderedMs?: number; fetch?: LogClient['stats'] };
  }
}

let offered: Promise<Awaited<ReturnType<typeof offeredConfig>>> | null = null;
let loading: Promise<Loaded> | null = null;

/** Whether the site serves /api/ledger/* (a mirror's explorer.json says `"api": false`). */
async function siteHasApi(): Promise<boolean> {
  offered ??= offeredConfig(base, new URLSearchParams(location.search));
  return (await offered)?.api !== false;
}
const failures = new Map<string, string>();

// ------------------------------------------------------------------ banner

const banner = document.getElementById('banner')!;

function setFailure(key: string, message: string | null): void {
  if (message === null) failures.delete(key);
  else failures.set(key, message);
  renderBanner();
}

function renderBanner(): void {
  clear(banner);
  if (failures.size === 0) {
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
  banner.append(
    h(
      'p',
      { class: 'banner-title' },
      h('span', { 'aria-hidden': 'true' }, '⚠ '),
      'Verification FAILED — do not trust what this site shows.',
    ),
    h(
      'ul',
      null,
      [...failures.values()].map((m) => h('li', null, m)),
    ),
  );
}

// ------------------------------------------------------------------ loading and verifying the checkpoint

function load(force = false): Promise<Loaded> {
  if (loading && !force) return loading;
  const t0 = performance.now();
  if (force) offered = null;
  offered ??= offeredConfig(base, new URLSearchParams(location.search));
  const note = client.checkpoint();
  note.catch(() => undefined);
  loading = (async (): Promise<Loaded> => {
    const resolved = resolveTrust(await offered!, storage);
    setFailure('key-mismatch', resolved.mismatch);
    if (!resolved.trust) {
      const why =
        resolved.problems.join('; ') ||
        'This site names no log key (no explorer.json, no /api/ledger/key) and you have not pinned one.';
      setFailure('no-key', `${why} Nothing can be verified: paste the log's vkey on the Trust page.`);
      return { resolved, cp: null, error: why, previous: null };
    }
    setFailure('no-key', null);
    let text: string;
    try {
      text = await note;
    } catch (e) {
      const msg = e instanceof FetchError ? e.message : String(e);
      setFailure('checkpoint', `The checkpoint cannot be read: ${msg}`);
      return { resolved, cp: null, error: msg, previous: null };
    }
    const origin = resolved.trust.log.name;
    const previous = readSeen(storage, origin);
    const cp = await verifyCheckpoint(text, resolved.trust, client, previous);
    for (const [k, c] of [
      ['signature', cp.signature],
      ['witnesses', cp.witnesses],
      ['tiles', cp.tiles],
      ['consistency', cp.consistency],
    ] as const) {
      setFailure(`cp-${k}`, c.status === 'FAIL' ? `${c.name}: ${c.detail}` : null);
    }
    if (cp.remember && cp.root && (!previous || cp.size >= previous.size)) {
      writeSeen(storage, origin, { size: cp.size, rootHex: toHex(cp.root), at: new Date().toISOString() });
    }
    window.__stele = { ...(window.__stele ?? {}), checkpointMs: performance.now() - t0, fetch: client.stats };
    return { resolved, cp, error: null, previous };
  })();
  return loading;
}

// ------------------------------------------------------------------ shared pieces

function checkItem(c: Check, key?: string, rule?: number): HTMLElement {
  return h(
    'li',
    { class: `check check-${c.status.toLowerCase()}`, 'data-check': key ?? null, 'data-status': c.status },
    badge(c.status),
    ' ',
    h('strong', null, rule !== undefined ? `${rule}. ${c.name}` : c.name),
    h('span', { class: 'detail' }, c.detail),
  );
}

function reportList(r: Report, testid: string): HTMLElement {
  return h(
    'div',
    { class: 'report', 'data-testid': testid, 'data-status': r.result },
    h(
      'p',
      { class: `verdict verdict-${r.result.toLowerCase()}` },
      badge(r.result, r.result === 'PASS' ? 'PASS — verified in your browser' : 'FAIL — do not trust this entry'),
    ),
    h(
      'ol',
      { class: 'checks' },
      r.checks.map((c) => checkItem(c, `rule-${c.rule}`, c.rule)),
    ),
  );
}

function dl(rows: Array<[string, Child]>, cls = 'fields'): HTMLElement {
  return h(
    'dl',
    { class: cls },
    rows.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))),
  );
}

const entryLink = (seq: number, label?: string) => h('a', { href: `#/entry/${seq}` }, label ?? `entry ${seq}`);

function noCheckpoint(main: HTMLElement, l: Loaded): void {
  main.append(
    h(
      'div',
      { class: 'panel panel-fail', 'data-testid': 'cp-status', 'data-status': 'FAIL' },
      badge('FAIL', 'Cannot verify'),
      h('p', null, l.error ?? 'no checkpoint'),
      h('p', null, h('a', { href: '#/trust' }, 'Go to the Trust page'), ' to pin the log key.'),
    ),
  );
}

/** The verified log for a view that lists entries; says why there is none otherwise. */
async function nonEmptyLog(main: HTMLElement) {
  const l = await load();
  if (!l.cp?.root) {
    noCheckpoint(main, l);
    return null;
  }
  if (l.cp.size === 0) {
    main.append(h('p', null, 'The log is empty.'));
    return null;
  }
  return { l, cp: l.cp, root: l.cp.root };
}

/** The entry's fields in words (DESIGN.md §1.5); a field the page does not know keeps its name. */
const FIELD_LABELS: Readonly<Record<string, string>> = {
  v: 'Format version',
  type: 'Type',
  result: 'Result',
  digest: 'Digest (SHA-256)',
  timestamp: 'Recorded at',
  artifact: 'Artifact',
  artifactId: 'Artifact id',
  scope: 'Scope',
  tenant: 'Tenant',
};

/** Renders the fields, the report and the audit path of a verified entry. */
function entryPanel(
  cp: CheckpointResult,
  e: EntryResult,
  opts: { fileDigest?: string; match?: Check; heading?: string } = {},
): HTMLElement {
  const report = buildReport(cp, e, opts.fileDigest);
  const checks = opts.match ? { ...report, checks: [{ ...opts.match, rule: 0 }, ...report.checks] } : report;
  const result: Report =
    opts.match && opts.match.status === 'FAIL'
      ? { ...checks, result: 'FAIL', verdict: 'FAIL' }
      : { ...checks, result: report.result };
  const fields = e.fields ?? {};
  const rows: Array<[string, Child]> = [
    ['Entry id', h('code', null, e.id ?? '?')],
    ['Leaf index', fmtInt(e.seq)],
    ...Object.entries(fields).map(([k, v]): [string, Child] => [
      FIELD_LABELS[k] ?? k,
      k === 'digest'
        ? hashText(String(v))
        : k === 'timestamp' && typeof v === 'string'
          ? h('time', { datetime: v, title: v }, fmtTime(v))
          : typeof v === 'string'
            ? v
            : JSON.stringify(v),
    ]),
    ['Entry hash', e.entryHash ? hashText(toHex(e.entryHash)) : '?'],
    ['Leaf hash', e.proof ? hashText(toHex(e.proof.leaf.hash)) : '?'],
    ['Tree size', fmtInt(e.size)],
  ];
  return h(
    'article',
    { class: 'entry', 'data-testid': 'entry', 'data-seq': e.seq, 'data-status': result.result },
    h('h2', null, opts.heading ?? `Entry ${e.id ?? e.seq}`),
    h(
      'p',
      {
        class: `verdict verdict-${result.result.toLowerCase()}`,
        'data-testid': 'entry-verdict',
        'data-status': result.result,
      },
      badge(
        result.result,
        result.result === 'PASS' ? 'Verified in your browser' : 'Verification FAILED in your browser',
      ),
    ),
    dl(rows),
    h('h3', null, 'Checks (as ', h('code', null, 'stele ledger verify'), ')'),
    reportList(result, 'entry-report'),
    h('h3', null, 'Inclusion proof'),
    e.proof && cp.root ? auditPathDrawing(e.proof, cp.root) : h('p', null, 'No audit path.'),
    e.record
      ? h(
          'details',
          null,
          h('summary', null, 'Canonical record (the bytes the entry hash commits to)'),
          h('pre', { class: 'note' }, new TextDecoder().decode(e.record)),
        )
      : null,
  );
}

// ------------------------------------------------------------------ views

async function viewCheckpoint(main: HTMLElement): Promise<void> {
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
  const timeCell = h('span', null, badge('PENDING', 'reading the latest entry…'));
  const cosignTimes = cp.witnessRows.filter((w) => w.time !== undefined).map((w) => w.time!);
  main.append(
    h(
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
    ),
    h('h2', null, 'Checks'),
    h('ul', { class: 'checks', 'data-testid': 'cp-checks' }, [
      checkItem(cp.signature, 'signature'),
      checkItem(cp.witnesses, 'witnesses'),
      checkItem(cp.tiles, 'tiles'),
      checkItem(cp.consistency, 'consistency'),
    ]),
    h('h2', null, 'Witness cosignatures'),
    cp.witnessRows.length
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
      : h('p', null, 'This log has no witnesses configured.'),
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
  try {
    const lastTile = Math.floor((cp.size - 1) / TILE_WIDTH);
    const tree = { size: cp.size, root: cp.root };
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
    const newest = rows.slice(-LATEST_ROWS).reverse();
    latest.append(
      entriesTable(newest),
      h('p', null, h('a', { href: '#/entries' }, `Browse all ${fmtInt(cp.size)} entries →`)),
    );
    reportEntryFailures(rows);
  } catch (e) {
    timeCell.replaceChildren(badge('FAIL', (e as Error).message));
    setFailure('latest', `The latest entries cannot be read: ${(e as Error).message}`);
  }
}

/** How many of the newest entries the overview lists. */
const LATEST_ROWS = 8;

const failedEntries = new Map<number, string>();

/** One banner line for all entries that failed, however many pages reported them. */
function reportEntryFailures(rows: EntryResult[]): void {
  for (const r of rows) {
    if (r.ok) continue;
    const c = r.leaf.status === 'FAIL' ? r.leaf : r.inclusion;
    failedEntries.set(r.seq, `${c.name}: ${c.detail}`);
  }
  if (failedEntries.size === 0) return;
  const seqs = [...failedEntries.keys()].sort((a, b) => a - b);
  const first = seqs[0]!;
  const list = seqs.length > 6 ? `${seqs.slice(0, 6).join(', ')}, …` : seqs.join(', ');
  setFailure(
    'entries',
    seqs.length === 1
      ? `Entry ${first} does not verify: ${failedEntries.get(first)}`
      : `${fmtInt(seqs.length)} entries do not verify (leaves ${list}). Entry ${first}: ${failedEntries.get(first)}`,
  );
}

/** A scrolling data table: one header row, then a row per item. */
function dataTable(testid: string, headers: readonly string[], rows: HTMLElement[]): HTMLElement {
  // Each cell names its column: a narrow screen shows a row as a card of labelled lines.
  for (const row of rows)
    [...row.children].forEach((cell, i) => {
      if (headers[i] !== undefined) cell.setAttribute('data-label', headers[i]);
    });
  return h(
    'div',
    { class: 'scroll' },
    h(
      'table',
      { class: 'data entries', 'data-testid': testid },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      h('tbody', null, rows),
    ),
  );
}

function entriesTable(rows: EntryResult[]): HTMLElement {
  return dataTable(
    'entries',
    ['Leaf', 'Entry id', 'Type', 'Result', 'Artifact', 'Time', 'Verified'],
    rows.map((r) => {
      const f = r.fields ?? {};
      return h(
        'tr',
        { 'data-seq': r.seq, 'data-status': r.ok ? 'PASS' : 'FAIL' },
        h('td', null, String(r.seq)),
        h('td', null, entryLink(r.seq, r.id ?? String(r.seq))),
        h('td', null, String(f.type ?? '?')),
        h('td', null, String(f.result ?? '?')),
        h('td', { class: 'wrap' }, typeof f.artifact === 'string' ? f.artifact : h('span', { class: 'muted' }, '—')),
        h('td', null, typeof f.timestamp === 'string' ? fmtTime(f.timestamp) : '?'),
        h('td', null, badge(r.ok ? 'PASS' : 'FAIL', r.ok ? 'verified' : 'FAIL')),
      );
    }),
  );
}

/**
 * A page of entries: the record bundle of `tile`, newest first. The newest page shows a full
 * page (TILE_WIDTH entries) even when the last bundle is partial: it continues into the bundle
 * before, and "Older" then leads to that bundle's own page.
 */
async function viewEntries(main: HTMLElement, tileParam: string | undefined): Promise<void> {
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
    main.append(entriesTable([...rows].sort((a, b) => b.seq - a.seq)), nav.cloneNode(true));
    reportEntryFailures(rows);
  } catch (e) {
    summary.replaceChildren(badge('FAIL'), ` ${(e as Error).message}`);
    summary.dataset.status = 'FAIL';
    setFailure(`tile-${reading}`, `Tile ${reading} cannot be read: ${(e as Error).message}`);
  }
}

async function viewEntry(main: HTMLElement, seqText: string): Promise<void> {
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

// ------------------------------------------------------------------ lookups

/** Scans the record bundles newest first (search.ts), with a progress bar in `out` while it runs. */
async function scanShowingProgress(
  out: HTMLElement,
  size: number,
  match: (e: EntryFields, seq: number) => boolean,
  maxEntries: number,
  stopAtFirst = false,
): Promise<Awaited<ReturnType<typeof scanRecords>>> {
  const progress = h('progress', { max: Math.min(size, maxEntries), value: 0, 'aria-label': 'Scan progress' });
  const label = h('span', null, 'Scanning the record bundles…');
  const box = h('p', { class: 'scan', 'data-testid': 'scan-progress', role: 'status' }, label, ' ', progress);
  out.append(box);
  try {
    return await scanRecords(client, size, match, {
      maxEntries,
      stopAtFirst,
      onProgress: (done, total) => {
        progress.value = done;
        progress.max = total;
        label.textContent = `Scanning the record bundles, newest first: ${fmtInt(done)} of ${fmtInt(total)} entries…`;
      },
    });
  } finally {
    box.remove();
  }
}

interface Found {
  seq: number;
  via: string;
}

/** Resolves a digest or artifact to a leaf index: API first, else a bounded scan with progress. */
async function locate(
  q: Extract<Query, { kind: 'digest' | 'artifact' }>,
  size: number,
  out: HTMLElement,
  maxEntries = DEFAULT_SCAN_ENTRIES,
  skipApi = false,
): Promise<{ found: Found | null; why: string; scannedAll: boolean; scanned: number }> {
  if (!skipApi && (await siteHasApi())) {
    const api = await apiLookup(
      base,
      q.kind === 'digest' ? 'hash' : 'artifact',
      q.kind === 'digest' ? q.digest : q.artifactId,
    );
    if ('found' in api && api.found < size)
      return { found: { seq: api.found, via: 'the site’s lookup index' }, why: '', scannedAll: false, scanned: 0 };
    if ('found' in api) {
      // Newer than the checkpoint verified here: verify the newer checkpoint first.
      const l = await load(true);
      if (l.cp && api.found < l.cp.size)
        return { found: { seq: api.found, via: 'the site’s lookup index' }, why: '', scannedAll: false, scanned: 0 };
    }
    if ('notFound' in api) return { found: null, why: api.notFound, scannedAll: false, scanned: 0 };
  }
  const r = await scanShowingProgress(out, size, recordMatcher(q)!, maxEntries, q.kind === 'artifact');
  const scannedAll = r.from === 0;
  const seq = q.kind === 'digest' ? r.matches[0] : r.matches[r.matches.length - 1];
  const where = scannedAll ? `all ${fmtInt(r.scanned)} entries` : `the latest ${fmtInt(r.scanned)} entries`;
  if (seq === undefined)
    return {
      found: null,
      why: `no record among ${where} matches (scanned in your browser)`,
      scannedAll,
      scanned: r.scanned,
    };
  return { found: { seq, via: `a scan of ${where} in your browser` }, why: '', scannedAll, scanned: r.scanned };
}

function matchCheck(q: Query, e: EntryResult): Check {
  const f = e.fields ?? {};
  const name = 'Matches your search';
  const ok = (detail: string): Check => ({ name, status: 'PASS', detail });
  const bad = (detail: string): Check => ({ name, status: 'FAIL', detail });
  switch (q.kind) {
    case 'digest':
      return f.digest === q.digest
        ? ok(`the entry records digest ${short(q.digest)}`)
        : bad(
            `the lookup pointed to leaf ${e.seq}, whose digest is ${short(String(f.digest))}, not ${short(q.digest)}`,
          );
    case 'artifact': {
      const aid = f.artifactId;
      return aid === q.artifactId
        ? ok(
            `the entry records artifact id ${q.artifactId}${q.label ? ` (= label ${JSON.stringify(q.label)} in scope ${JSON.stringify(q.scope ?? '')})` : ''}`,
          )
        : bad(`leaf ${e.seq} has artifact id ${String(aid)}, not ${q.artifactId}`);
    }
    case 'label':
      return f.artifact === q.label
        ? ok(`the entry records artifact ${JSON.stringify(q.label)} in scope ${JSON.stringify(f.scope ?? '')}`)
        : bad(`leaf ${e.seq} has artifact ${JSON.stringify(f.artifact ?? null)}, not ${JSON.stringify(q.label)}`);
    case 'id':
      return e.id === q.text.toLowerCase()
        ? ok(`the entry hash starts with ${q.prefix}`)
        : bad(`leaf ${e.seq} has id ${e.id}, not ${q.text}`);
    default:
      return ok(`leaf ${e.seq}`);
  }
}

async function viewSearch(main: HTMLElement, params: URLSearchParams): Promise<void> {
  const text = params.get('q') ?? '';
  const scope = params.get('scope') ?? '';
  main.append(h('h1', { tabindex: '-1' }, 'Search'));
  const form = searchForm(text, scope, true);
  main.append(form);
  if (!text) {
    main.append(
      h(
        'p',
        { class: 'muted' },
        'Find an entry by entry id (led_…), leaf index, digest (64 hex), artifact id (art_…) or artifact label (with its scope).',
      ),
    );
    return;
  }
  const out = h('div', { 'data-testid': 'search-result' });
  main.append(out);
  const l = await load();
  if (!l.cp?.root) return noCheckpoint(out, l);
  const q = classify(text, scope);
  if (q.kind === 'invalid') {
    out.append(h('p', null, q.reason));
    return;
  }
  const kindText = {
    id: 'an entry id',
    leaf: 'a leaf index',
    digest: 'a SHA-256 digest',
    artifact: q.kind === 'artifact' && q.label ? `an artifact label (artifact id ${q.artifactId})` : 'an artifact id',
    label: 'an artifact label, in any scope',
  }[q.kind];
  out.append(h('p', { class: 'muted' }, `Looking up ${kindText}.`));
  await runLookup(out, q, l.cp);
}

async function runLookup(
  out: HTMLElement,
  q: Exclude<Query, { kind: 'invalid' }>,
  cp0: CheckpointResult,
  maxEntries = DEFAULT_SCAN_ENTRIES,
  skipApi = false,
): Promise<void> {
  if (q.kind === 'label') return runLabelSearch(out, q, cp0, maxEntries, skipApi);
  let cp = cp0;
  let seq: number | null = null;
  let via = '';
  if (q.kind === 'id' || q.kind === 'leaf') {
    seq = q.seq;
    via = q.kind === 'id' ? 'its entry id' : 'its leaf index';
  } else {
    const r = await locate(q, cp.size, out, maxEntries, skipApi);
    cp = (await load()).cp ?? cp;
    if (r.found) {
      seq = r.found.seq;
      via = r.found.via;
    } else {
      const more = !r.scannedAll && r.scanned > 0;
      out.append(
        notFoundPanel(
          r.why,
          r.scanned === 0 || more
            ? {
                label:
                  r.scanned === 0 ? 'Double-check by scanning the record bundles in this browser' : 'Scan further back',
                run: () => void runLookup(out, q, cp, r.scanned === 0 ? DEFAULT_SCAN_ENTRIES : maxEntries * 4, true),
              }
            : null,
        ),
      );
      return;
    }
  }
  if (seq === null || !cp.root) return;
  if (seq >= cp.size) {
    out.append(notFoundPanel(`leaf ${seq} is beyond the verified tree size ${fmtInt(cp.size)}`, null));
    return;
  }
  const e = await verifyEntry(client, seq, { size: cp.size, root: cp.root });
  const match = matchCheck(q, e);
  if (match.status === 'FAIL') setFailure(`match-${seq}`, `${match.name}: ${match.detail}`);
  if (!e.ok) reportEntryFailures([e]);
  out.append(
    h(
      'p',
      null,
      `Found leaf ${fmtInt(seq)} via ${via}; everything below is recomputed from the tiles. `,
      entryLink(seq, 'Permalink'),
    ),
    entryPanel(cp, e, { match }),
  );
}

/** The NOT FOUND panel of a lookup, with a button to scan (further) when that could still find it. */
function notFoundPanel(why: string, retry: { label: string; run: () => void } | null): HTMLElement {
  return h(
    'div',
    { class: 'panel panel-notfound', 'data-testid': 'not-found', 'data-status': 'NOTFOUND' },
    badge('NOTFOUND'),
    h('p', null, `Not found: ${why}.`),
    retry
      ? h(
          'button',
          {
            type: 'button',
            onclick: (ev: Event) => {
              (ev.currentTarget as HTMLButtonElement).closest('[data-testid=not-found]')?.remove();
              retry.run();
            },
          },
          retry.label,
        )
      : null,
  );
}

/**
 * An artifact label in any scope: the site's search API lists the artifacts (one per scope),
 * else a bounded scan of the record bundles finds them. Each listed entry is then read and
 * verified from the tiles; NOT FOUND only when there is none.
 */
async function runLabelSearch(
  out: HTMLElement,
  q: Extract<Query, { kind: 'label' }>,
  cp0: CheckpointResult,
  maxEntries: number,
  skipApi: boolean,
): Promise<void> {
  let matches: LabelMatch[] | null = null;
  let more = false;
  let via = '';
  let scanned = 0;
  let scannedAll = false;
  if (!skipApi && (await siteHasApi())) {
    const api = await apiSearch(base, q.label);
    if ('matches' in api) {
      matches = api.matches;
      more = api.more;
      via = 'the site’s lookup index';
    }
  }
  const cp = (await load()).cp ?? cp0;
  if (!cp.root) return;
  if (matches === null) {
    const found = new Map<number, EntryFields>();
    const r = await scanShowingProgress(
      out,
      cp.size,
      (e, seq) => {
        if (e.artifact !== q.label) return false;
        found.set(seq, e);
        return true;
      },
      maxEntries,
    );
    matches = labelMatches(found);
    scanned = r.scanned;
    scannedAll = r.from === 0;
    via = `a scan of ${scannedAll ? 'all' : 'the latest'} ${fmtInt(r.scanned)} entries in your browser`;
  }
  const size = cp.size;
  const listed = matches.filter((m) => m.seq < size);
  if (listed.length === 0) {
    const why =
      scanned > 0 || !skipApi
        ? `no artifact named ${JSON.stringify(q.label)} in any scope (${via || 'the site’s lookup index'})`
        : `no artifact named ${JSON.stringify(q.label)}`;
    const retry =
      via === 'the site’s lookup index'
        ? {
            label: 'Double-check by scanning the record bundles in this browser',
            run: () => runLabelSearch(out, q, cp, DEFAULT_SCAN_ENTRIES, true),
          }
        : !scannedAll
          ? { label: 'Scan further back', run: () => runLabelSearch(out, q, cp, maxEntries * 4, true) }
          : null;
    out.append(notFoundPanel(why, retry));
    return;
  }
  const root = cp.root;
  const rows = await Promise.all(listed.map((m) => verifyEntry(client, m.seq, { size, root })));
  const checked = rows.map((e, i) => {
    const m = listed[i]!;
    const f = e.fields ?? {};
    const scope = typeof f.scope === 'string' ? f.scope : '';
    // The entry the index or scan named must carry the label and be that scope's artifact.
    const carries = f.artifact === q.label && artifactId(q.label, scope) === m.artifactId;
    if (!carries)
      setFailure(`label-${e.seq}`, `Leaf ${e.seq} was listed for ${JSON.stringify(q.label)} but does not carry it`);
    return { e, m, scope, ok: e.ok && carries };
  });
  reportEntryFailures(rows);
  out.append(
    h(
      'p',
      { 'data-testid': 'label-summary' },
      `${fmtInt(listed.length)} artifact${listed.length === 1 ? '' : 's'} named ${JSON.stringify(q.label)}${more ? ' (the first page)' : ''}, found via ${via}; each entry below is read and verified from the tiles.`,
    ),
    dataTable(
      'label-matches',
      ['Scope', 'Artifact id', 'Latest entry', 'Type', 'Digest', 'Time', 'Verified'],
      checked.map(({ e, m, scope, ok }) => {
        const f = e.fields ?? {};
        return h(
          'tr',
          { 'data-seq': e.seq, 'data-scope': scope, 'data-status': ok ? 'PASS' : 'FAIL' },
          h('td', { class: 'wrap' }, scope === '' ? h('span', { class: 'muted' }, '(none)') : scope),
          h('td', null, h('code', null, m.artifactId)),
          h('td', null, entryLink(e.seq, e.id ?? `leaf ${e.seq}`)),
          h('td', null, String(f.type ?? '?')),
          h('td', null, typeof f.digest === 'string' ? h('code', null, short(f.digest)) : '?'),
          h('td', null, typeof f.timestamp === 'string' ? fmtTime(f.timestamp) : '?'),
          h('td', null, badge(ok ? 'PASS' : 'FAIL', ok ? 'verified' : 'FAIL')),
        );
      }),
    ),
  );
  if (checked.length === 1) {
    const only = checked[0]!;
    out.append(entryPanel(cp, only.e, { match: matchCheck(q, only.e) }));
  }
}

// ------------------------------------------------------------------ verify a file

async function viewVerify(main: HTMLElement): Promise<void> {
  main.append(
    h('h1', { tabindex: '-1' }, 'Verify a file'),
    h(
      'p',
      null,
      'The file is hashed here, in your browser, a chunk at a time; it is never uploaded. Only its SHA-256 digest is looked up.',
    ),
    h(
      'p',
      null,
      'Or drop a ',
      h('code', null, '.tlog-proof'),
      ' file (',
      h('code', null, 'stele ledger proof <id> --export'),
      '), alone or with the file it proves: it is verified here against the trusted key and witness policy, with nothing looked up.',
    ),
  );
  const input = h('input', {
    type: 'file',
    multiple: true,
    id: 'file-input',
    class: 'visually-hidden',
    tabindex: '-1',
    'data-testid': 'file-input',
  });
  const zone = h(
    'div',
    { class: 'dropzone', 'data-testid': 'dropzone' },
    h('p', null, h('span', { 'aria-hidden': 'true' }, '⬇ '), 'Drop a file here, or'),
    h('label', { for: 'file-input', class: 'button' }, 'Choose a file…'),
    input,
  );
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'verify-output' });
  main.append(zone, out);
  // A dropped C2SP tlog-proof (`.tlog-proof`) is verified on its own; beside it, a file is
  // checked against the proof's entry instead of being looked up.
  const start = (files: ArrayLike<File> | null | undefined) => {
    const all = files ? Array.from(files) : [];
    const proof = all.find((f) => f.name.endsWith(TLOG_PROOF_EXTENSION));
    const file = all.find((f) => f !== proof);
    if (proof) void verifyProofFile(proof, file, out);
    else if (file) void verifyFile(file, out);
  };
  input.addEventListener('change', () => start(input.files));
  zone.addEventListener('dragover', (ev) => {
    ev.preventDefault();
    zone.classList.add('dragging');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('dragging'));
  zone.addEventListener('drop', (ev) => {
    ev.preventDefault();
    zone.classList.remove('dragging');
    start(ev.dataTransfer?.files);
  });
  // Let the label act as a button from the keyboard too.
  zone.querySelector('label')!.setAttribute('tabindex', '0');
  zone.querySelector('label')!.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      input.click();
    }
  });
}

let verifyRun = 0;

/**
 * The anchored file a changed copy most likely is: the latest entry under the file's name
 * (the site's search) that records another digest, verified (rules 3 and 4) against the
 * checkpoint before it is named. Null when there is none, or the site cannot say.
 */
async function anchoredUnderName(
  name: string,
  digest: string,
  cp: { size: number; root: Uint8Array },
): Promise<{ digest: string; id: string } | null> {
  if (!(await siteHasApi())) return null;
  const answer = await apiSearch(base, name, 4);
  if (!('matches' in answer)) return null;
  for (const m of answer.matches) {
    if (m.seq >= cp.size) continue;
    const e = await verifyEntry(client, m.seq, cp);
    const recorded = e.fields?.digest;
    if (e.ok && e.id && e.fields?.artifact === name && typeof recorded === 'string' && recorded !== digest)
      return { digest: recorded, id: e.id };
  }
  return null;
}

async function verifyFile(file: File, out: HTMLElement): Promise<void> {
  const run = ++verifyRun;
  clear(out);
  const progress = h('progress', { max: Math.max(1, file.size), value: 0, 'aria-label': 'Hashing progress' });
  const status = h('span', null, `Hashing ${file.name} (${fmtBytes(file.size)})…`);
  out.append(h('p', { role: 'status' }, status, ' ', progress));
  const digest = await hashBlob(file, (p) => {
    progress.value = p.bytes;
    status.textContent = `Hashing ${file.name}: ${fmtBytes(p.bytes)} of ${fmtBytes(p.total)}…`;
  });
  if (run !== verifyRun) return;
  clear(out);
  out.append(
    dl([
      ['File', `${file.name} (${fmtBytes(file.size)})`],
      ['SHA-256', hashText(digest, { 'data-testid': 'file-digest' })],
    ]),
  );
  const l = await load();
  if (!l.cp?.root) return noCheckpoint(out, l);
  const q: Extract<Query, { kind: 'digest' }> = { kind: 'digest', digest, text: digest };
  const r = await locate(q, l.cp.size, out);
  if (run !== verifyRun) return;
  const cp = (await load()).cp ?? l.cp;
  if (!r.found || !cp.root) {
    out.append(
      h(
        'div',
        { class: 'panel panel-notfound', 'data-testid': 'verify-result', 'data-status': 'NOTFOUND' },
        badge('NOTFOUND'),
        h('p', null, `Not found: no entry of this log records the digest of ${file.name} (${r.why}).`),
      ),
    );
    const original = cp.root ? await anchoredUnderName(file.name, digest, { size: cp.size, root: cp.root }) : null;
    if (run !== verifyRun || !original) return;
    out.append(
      h(
        'p',
        { class: 'differs', 'data-testid': 'differs' },
        `${file.name} is anchored with digest ${original.digest} (entry ${original.id}, verified against the signed checkpoint); this file's digest is ${digest}: it differs from the anchored file.`,
      ),
    );
    return;
  }
  const e = await verifyEntry(client, r.found.seq, { size: cp.size, root: cp.root });
  if (run !== verifyRun) return;
  const report = buildReport(cp, e, digest);
  if (report.result === 'FAIL')
    setFailure(
      `file-${digest}`,
      `Verification of ${file.name} failed: ${report.checks
        .filter((c) => c.status === 'FAIL')
        .map((c) => `${c.name}: ${c.detail}`)
        .join('; ')}`,
    );
  out.append(
    h(
      'div',
      {
        class: `panel panel-${report.result.toLowerCase()}`,
        'data-testid': 'verify-result',
        'data-status': report.result,
      },
      badge(
        report.result,
        report.result === 'PASS' ? `PASS — ${file.name} is in the log` : `FAIL — do not trust this entry`,
      ),
      h(
        'p',
        null,
        `Entry `,
        entryLink(e.seq, e.id ?? String(e.seq)),
        ` found via ${r.found.via}, leaf ${fmtInt(e.seq)} of tree size ${fmtInt(cp.size)}.`,
      ),
    ),
    reportList(report, 'verify-report'),
    h('h2', null, 'Inclusion proof'),
    e.proof ? auditPathDrawing(e.proof, cp.root) : h('p', null, 'No audit path.'),
  );
}

async function verifyProofFile(proofFile: File, file: File | undefined, out: HTMLElement): Promise<void> {
  const run = ++verifyRun;
  clear(out);
  const [text, digest] = await Promise.all([proofFile.text(), file ? hashBlob(file) : Promise.resolve(undefined)]);
  if (run !== verifyRun) return;
  const l = await load();
  if (!l.resolved.trust) return noCheckpoint(out, l);
  const current = l.cp?.root && l.cp.signature.status === 'PASS' ? { size: l.cp.size, root: l.cp.root } : null;
  const v = await verifyTlogProofFile(text, l.resolved.trust, client, current, digest);
  if (run !== verifyRun) return;
  const r = v.report;
  if (r.result === 'FAIL')
    setFailure(
      `proof-${proofFile.name}`,
      `Verification of ${proofFile.name} failed: ${r.checks
        .filter((c) => c.status === 'FAIL')
        .map((c) => `${c.rule}. ${c.name}: ${c.detail}`)
        .join('; ')}`,
    );
  out.append(
    dl([
      ['Proof file', proofFile.name],
      ...(file && digest
        ? ([
            ['File', `${file.name} (${fmtBytes(file.size)})`],
            ['SHA-256', hashText(digest, { 'data-testid': 'file-digest' })],
          ] as Array<[string, Child]>)
        : []),
      ...(v.index >= 0
        ? ([
            ['Leaf index', fmtInt(v.index)],
            ['Tree size', fmtInt(v.size)],
          ] as Array<[string, Child]>)
        : []),
      ...(v.entry && typeof v.entry.digest === 'string'
        ? ([['Entry digest', hashText(v.entry.digest)]] as Array<[string, Child]>)
        : []),
    ]),
    h(
      'div',
      {
        class: `panel panel-${r.result.toLowerCase()}`,
        'data-testid': 'verify-result',
        'data-status': r.result,
        'data-verdict': r.verdict,
      },
      badge(r.result, r.result === 'PASS' ? `${r.verdict} — the proof verifies` : 'FAIL — do not trust this proof'),
    ),
    reportList(r, 'verify-report'),
  );
}

// ------------------------------------------------------------------ charts

/** Bundles the charts read at most: every one of a log up to this many, else this many spread evenly over it. */
const CHART_BUNDLES = 64;

/** The record bundles the charts read: all of them, or an even sample (the first and last included). */
function chartTiles(lastTile: number, most = CHART_BUNDLES): number[] {
  if (lastTile + 1 <= most) return Array.from({ length: lastTile + 1 }, (_, i) => i);
  if (most <= 1) return [lastTile];
  const picked = new Set<number>();
  for (let i = 0; i < most; i++) picked.add(Math.round((i * lastTile) / (most - 1)));
  return [...picked].sort((x, y) => x - y);
}

async function viewCharts(main: HTMLElement, params: URLSearchParams): Promise<void> {
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

// ------------------------------------------------------------------ trust

async function viewTrust(main: HTMLElement): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, 'Trust'));
  const l = await load();
  const r = l.resolved;
  const t = r.trust;
  const reload = () => {
    void load(true).then(() => route());
  };
  if (t && r.config) {
    main.append(
      h('p', null, `Everything on this site is verified against these keys, ${SOURCE_LABEL[r.source!]}.`),
      dl([
        ['Log', h('code', null, t.log.name)],
        ['Log key (vkey)', h('code', { class: 'hash', 'data-testid': 'trust-vkey' }, t.log.vkey)],
        ['Key id', hashText(t.log.keyId)],
        [
          'Witnesses',
          t.witnesses.length
            ? h(
                'ul',
                null,
                t.witnesses.map((w) => h('li', null, h('code', { class: 'hash' }, w.vkey))),
              )
            : 'none',
        ],
        [
          'Quorum',
          h(
            'span',
            { 'data-testid': 'trust-quorum' },
            t.quorum.required ? `${t.quorum.text} (C2SP tlog-policy)` : 'none: checkpoints are not witnessed',
          ),
        ],
      ]),
      r.source === 'pin'
        ? h(
            'button',
            { type: 'button', onclick: () => (unpin(storage, t.log.name), reload()) },
            'Unpin (use the site’s configuration again)',
          )
        : h(
            'button',
            { type: 'button', 'data-testid': 'pin', onclick: () => (pin(storage, r.config as TrustConfig), reload()) },
            'Pin these keys in this browser',
          ),
    );
    if (r.offered && r.mismatch)
      main.append(h('p', { class: 'panel panel-fail' }, badge('FAIL', 'Key changed'), ' ', r.mismatch));
  } else {
    main.append(
      h('p', { class: 'panel panel-fail' }, badge('FAIL', 'No key'), ' ', l.error ?? 'No log key is configured.'),
    );
  }
  const vkey = h('textarea', { id: 'pin-vkey', rows: 2 }) as HTMLTextAreaElement;
  const wits = h('textarea', { id: 'pin-witnesses', rows: 3 }) as HTMLTextAreaElement;
  const thr = h('input', { id: 'pin-threshold', type: 'number', min: 0, value: '' }) as HTMLInputElement;
  const msg = h('p', { role: 'status' });
  main.append(
    h('h2', null, 'Pin a key by hand'),
    h(
      'form',
      {
        class: 'pinform',
        onsubmit: (ev: Event) => {
          ev.preventDefault();
          try {
            const witnesses = wits.value
              .split('\n')
              .map((s) => s.trim())
              .filter(Boolean);
            const c: TrustConfig = {
              vkey: vkey.value.trim(),
              witnesses,
              threshold: thr.value === '' ? witnesses.length : Number(thr.value),
            };
            pin(storage, c);
            reload();
          } catch (e) {
            msg.textContent = `Not pinned: ${(e as Error).message}`;
          }
        },
      },
      h('label', { for: 'pin-vkey' }, 'Log vkey (', h('code', null, 'origin+hash+base64'), ')'),
      vkey,
      h('label', { for: 'pin-witnesses' }, 'Witness vkeys, one per line'),
      wits,
      h('label', { for: 'pin-threshold' }, 'Witness threshold (default: all)'),
      thr,
      h('button', { type: 'submit' }, 'Pin'),
      msg,
    ),
  );
  if (t) {
    const seen = readSeen(storage, t.log.name);
    main.append(
      h('h2', null, 'Last checkpoint seen'),
      seen
        ? h(
            'p',
            null,
            `Size ${fmtInt(seen.size)}, root `,
            h('code', null, short(seen.rootHex, 24)),
            `, on ${fmtTime(seen.at)}. Every later checkpoint must be consistent with it. `,
            h(
              'button',
              { type: 'button', onclick: () => (writeSeen(storage, t.log.name, null), reload()) },
              'Forget it',
            ),
          )
        : h('p', null, 'None yet.'),
    );
  }
}

// ------------------------------------------------------------------ router and shell

function searchForm(q = '', scope = '', withScope = false): HTMLFormElement {
  const input = h('input', {
    type: 'search',
    name: 'q',
    value: q,
    placeholder: 'entry id, digest, artifact or leaf',
    'aria-label': 'Search the log',
    'data-testid': 'search-input',
    autocomplete: 'off',
    spellcheck: 'false',
  });
  const scopeInput = withScope
    ? h('input', {
        type: 'text',
        name: 'scope',
        value: scope,
        placeholder: 'scope (for a label)',
        'aria-label': 'Scope of an artifact label',
      })
    : null;
  return h(
    'form',
    {
      role: 'search',
      class: 'search',
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        const p = new URLSearchParams({ q: (input as HTMLInputElement).value.trim() });
        const s = (scopeInput as HTMLInputElement | null)?.value.trim();
        if (s) p.set('scope', s);
        location.hash = `#/search?${p}`;
      },
    },
    input,
    scopeInput,
    h('button', { type: 'submit' }, 'Search'),
  );
}

const main = document.getElementById('main')!;
let routeSeq = 0;
let firstRoute = true;

function parseHash(): { path: string[]; params: URLSearchParams } {
  const raw = location.hash.replace(/^#\/?/, '');
  const [p, qs] = raw.split('?', 2) as [string, string | undefined];
  return { path: p.split('/').filter(Boolean), params: new URLSearchParams(qs ?? '') };
}

async function route(): Promise<void> {
  const my = ++routeSeq;
  const { path, params } = parseHash();
  const view = h('div', { class: 'view' });
  clear(main);
  main.append(view);
  const section = path[0] ?? '';
  for (const a of document.querySelectorAll<HTMLAnchorElement>('#nav a')) {
    if (a.dataset.route === (section || 'checkpoint')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // The header's search box shows the query of the search page, and nothing elsewhere.
  const box = document.querySelector<HTMLInputElement>('#header [data-testid=search-input]');
  if (box) box.value = section === 'search' ? (params.get('q') ?? '') : '';
  const titles: Record<string, string> = {
    '': 'Checkpoint',
    entries: 'Entries',
    entry: 'Entry',
    search: 'Search',
    verify: 'Verify a file',
    charts: 'Charts',
    trust: 'Trust',
  };
  document.title = `${titles[section] ?? 'Not found'} · Stele explorer`;
  try {
    if (section === '') await viewCheckpoint(view);
    else if (section === 'entries') await viewEntries(view, path[1]);
    else if (section === 'entry' && path[1]) await viewEntry(view, path[1]);
    else if (section === 'search') await viewSearch(view, params);
    else if (section === 'verify') await viewVerify(view);
    else if (section === 'charts') await viewCharts(view, params);
    else if (section === 'trust') await viewTrust(view);
    else
      view.append(
        h('h1', { tabindex: '-1' }, 'Not found'),
        h('p', null, h('a', { href: '#/' }, 'Back to the checkpoint')),
      );
  } catch (e) {
    if (my === routeSeq) view.append(h('p', { class: 'panel panel-fail' }, badge('FAIL'), ` ${(e as Error).message}`));
  }
  if (!firstRoute && my === routeSeq) view.querySelector<HTMLElement>('h1')?.focus();
}

function shell(): void {
  const header = document.getElementById('header')!;
  header.append(searchForm());
  window.addEventListener('hashchange', () => {
    firstRoute = false;
    void route();
  });
  void load().then((l) => {
    const o = document.getElementById('log-origin');
    if (o && l.resolved.trust) o.textContent = l.resolved.trust.log.name;
  });
  void route();
}

shell();
