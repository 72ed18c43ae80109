/// <reference lib="dom" />
// Pieces every page uses: report lists, field lists, entry panels, entry tables, the search form.
import { CLIENT_ENTRY_TYPES } from '../core/anchor.js';
import { toHex } from './bytes.js';
import { auditPathDrawing } from './charts.js';
import { badge, type Child, fmtInt, fmtTime, h, hashText } from './dom.js';
import { type Loaded, load, setFailure } from './site.js';
import {
  buildReport,
  type PageCheck,
  type CheckpointResult,
  type EntryResult,
  type PageReport,
} from './page-checks.js';

export function checkItem(c: PageCheck, key?: string, rule?: number): HTMLElement {
  return h(
    'li',
    { class: `check check-${c.status.toLowerCase()}`, 'data-check': key ?? null, 'data-status': c.status },
    badge(c.status),
    ' ',
    h('strong', null, rule !== undefined ? `${rule}. ${c.name}` : c.name),
    h('span', { class: 'detail' }, c.detail),
  );
}

export function reportList(r: PageReport, testid: string): HTMLElement {
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

export function dl(rows: Array<[string, Child]>, cls = 'fields'): HTMLElement {
  return h(
    'dl',
    { class: cls },
    rows.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))),
  );
}

export const entryLink = (seq: number, label?: string) => h('a', { href: `#/entry/${seq}` }, label ?? `entry ${seq}`);

export function noCheckpoint(main: HTMLElement, l: Loaded): void {
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
export async function nonEmptyLog(main: HTMLElement) {
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

/** The entry's fields in words (docs/design.md §1.5); a field the page does not know keeps its name. */
export const FIELD_LABELS: Readonly<Record<string, string>> = {
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
export function entryPanel(
  cp: CheckpointResult,
  e: EntryResult,
  opts: { fileDigest?: string; match?: PageCheck; heading?: string } = {},
): HTMLElement {
  const report = buildReport(cp, e, opts.fileDigest);
  const checks = opts.match ? { ...report, checks: [{ ...opts.match, rule: 0 }, ...report.checks] } : report;
  const result: PageReport =
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

export const failedEntries = new Map<number, string>();

/** One banner line for all entries that failed, however many pages reported them. */
export function reportEntryFailures(rows: EntryResult[]): void {
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
export function dataTable(testid: string, headers: readonly string[], rows: HTMLElement[]): HTMLElement {
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

export function entriesTable(rows: EntryResult[], testid = 'entries'): HTMLElement {
  return dataTable(
    testid,
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
 * A control-plane event: an entry of a type no client appends (a policy evaluation, an access
 * decision, a key epoch, a refused token), not a release. An entry whose fields cannot be
 * read stays with the releases, where its FAIL shows.
 */
function isEvent(r: EntryResult): boolean {
  const type = r.fields?.type;
  return typeof type === 'string' && !Object.hasOwn(CLIENT_ENTRY_TYPES, type);
}

/**
 * Entries split by kind, each list in the given order and at most `limit` long: the releases
 * (anchors and recorded verifications) in the entries table, and apart from it, when there
 * are any, the control plane's events in a table of their own.
 */
export function entriesByKind(rows: readonly EntryResult[], limit = Number.POSITIVE_INFINITY): HTMLElement[] {
  const releases = rows.filter((r) => !isEvent(r)).slice(0, limit);
  const events = rows.filter(isEvent).slice(0, limit);
  const out = [
    releases.length > 0 || events.length === 0
      ? entriesTable(releases)
      : h('p', { class: 'muted', 'data-testid': 'no-releases' }, 'No anchors or verifications among these entries.'),
  ];
  if (events.length > 0)
    out.push(
      h(
        'section',
        { class: 'events', 'data-testid': 'control-events' },
        h('h3', null, 'Control-plane events'),
        h(
          'p',
          { class: 'muted' },
          'Policy evaluations, access decisions, key epochs and refused tokens the control plane records in the log: not releases.',
        ),
        entriesTable(events, 'events'),
      ),
    );
  return out;
}

/**
 * A page of entries: the record bundle of `tile`, newest first. The newest page shows a full
 * page (TILE_WIDTH entries) even when the last bundle is partial: it continues into the bundle
 * before, and "Older" then leads to that bundle's own page.
 */

/** The search form (in the header, and on the search page with a scope field). */
export function searchForm(q = '', scope = '', withScope = false): HTMLFormElement {
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
