/// <reference lib="dom" />
// Finding a leaf for a query: the site's lookup index when it has an API, else a scan of the
// record bundles in the browser, with its progress shown.
import { fmtInt, h } from './dom.js';
import { apiLookup, DEFAULT_SCAN_ENTRIES, type Query, recordMatcher, scanRecords } from './search.js';
import { base, client, load, siteHasApi } from './site.js';
import type { EntryFields } from './page-checks.js';

/** Scans the record bundles newest first (search.ts), with a progress bar in `out` while it runs. */
export async function scanShowingProgress(
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

export interface Found {
  seq: number;
  via: string;
}

/** Resolves a digest or artifact to a leaf index: API first, else a bounded scan with progress. */
export async function locate(
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
