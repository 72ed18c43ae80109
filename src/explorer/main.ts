/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The Stele explorer: a single page that verifies the log in the visitor's browser. Every
// number it shows comes from the checkpoint and tiles and is checked here: the checkpoint
// signature against the trusted key, witness cosignatures, the tiles against the signed root,
// consistency with the last checkpoint this browser saw, and for each entry the record →
// entry hash → leaf → audit path → root chain. The JSON API is used only to find a leaf
// index by digest or artifact; without it (a static mirror) the record bundles are scanned.
// This file is the router and the shell; each page is a module of pages/, what they share
// is in site.ts (state), widgets.ts (pieces) and lookup.ts (finding a leaf).
import { badge, clear, h } from './dom.js';
import './styles.css';
import { viewCharts } from './pages/charts.js';
import { viewCheckpoint } from './pages/checkpoint.js';
import { viewEntries, viewEntry } from './pages/entries.js';
import { viewSearch } from './pages/search.js';
import { viewTrust } from './pages/trust.js';
import { viewVerify } from './pages/verify.js';
import { load } from './site.js';
import { searchForm } from './widgets.js';

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
    else if (section === 'trust') await viewTrust(view, route);
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
