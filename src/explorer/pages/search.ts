/// <reference lib="dom" />
// The search page: by entry id, leaf, digest, artifact id or label, each hit verified.
import { artifactId } from '../../core/entry.js';
import { short } from '../bytes.js';
import { badge, fmtInt, fmtTime, h } from '../dom.js';
import { locate, scanShowingProgress } from '../lookup.js';
import { apiSearch, classify, DEFAULT_SCAN_ENTRIES, type LabelMatch, labelMatches, type Query } from '../search.js';
import { base, client, load, setFailure, siteHasApi } from '../site.js';
import {
  type PageCheck,
  type CheckpointResult,
  type EntryFields,
  type EntryResult,
  verifyEntry,
} from '../page-checks.js';
import { dataTable, entryLink, entryPanel, noCheckpoint, reportEntryFailures, searchForm } from '../widgets.js';

export function matchCheck(q: Query, e: EntryResult): PageCheck {
  const f = e.fields ?? {};
  const name = 'Matches your search';
  const ok = (detail: string): PageCheck => ({ name, status: 'PASS', detail });
  const bad = (detail: string): PageCheck => ({ name, status: 'FAIL', detail });
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

export async function viewSearch(main: HTMLElement, params: URLSearchParams): Promise<void> {
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

export async function runLookup(
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
export function notFoundPanel(why: string, retry: { label: string; run: () => void } | null): HTMLElement {
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
export async function runLabelSearch(
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
  await showLabelMatches(out, q, cp, cp.root, listed, via, more);
}

/** The artifacts listed for a label, each entry read and verified from the tiles (and shown whole if only one). */
async function showLabelMatches(
  out: HTMLElement,
  q: Extract<Query, { kind: 'label' }>,
  cp: CheckpointResult,
  root: Uint8Array,
  listed: readonly LabelMatch[],
  via: string,
  more: boolean,
): Promise<void> {
  const size = cp.size;
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
