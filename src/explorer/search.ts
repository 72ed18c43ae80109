// Lookups: what a query means, the JSON API's index when the site has one (only its leaf
// index is used; the entry is then read and verified from the tiles), and a bounded scan of
// the record bundles with progress when there is no API (a static mirror).
import { checkLabel } from '../core/labels.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { type LogClient, bundleWidth } from './log.js';
import { artifactId } from '../core/entry.js';
import { type EntryFields, parseRecord } from './page-checks.js';

export type Query =
  | { readonly kind: 'id'; readonly seq: number; readonly prefix: string; readonly text: string }
  | { readonly kind: 'leaf'; readonly seq: number; readonly text: string }
  | { readonly kind: 'digest'; readonly digest: string; readonly text: string }
  | {
      readonly kind: 'artifact';
      readonly artifactId: string;
      readonly label?: string;
      readonly scope?: string;
      readonly text: string;
    }
  /** An artifact label without a scope: every scope's artifact of that name. */
  | { readonly kind: 'label'; readonly label: string; readonly text: string }
  | { readonly kind: 'invalid'; readonly reason: string; readonly text: string };

/**
 * Interprets a search: entry id, leaf index, digest (hex, optional sha256: prefix), artifact
 * id, else an artifact label: in `scope` when one is given, else in any scope.
 */
export function classify(input: string, scope = ''): Query {
  const text = input.trim();
  if (text === '')
    return { kind: 'invalid', reason: 'type an entry id, a digest, an artifact id or label, or a leaf index', text };
  let m = /^led_(0|[1-9][0-9]{0,15})_([0-9a-f]{12})$/i.exec(text);
  if (m) return { kind: 'id', seq: Number(m[1]), prefix: m[2]!.toLowerCase(), text };
  if (/^(0|[1-9][0-9]{0,15})$/.test(text) && Number.isSafeInteger(Number(text)))
    return { kind: 'leaf', seq: Number(text), text };
  m = /^(?:sha256:)?([0-9a-fA-F]{64})$/.exec(text);
  if (m) return { kind: 'digest', digest: m[1]!.toLowerCase(), text };
  if (/^art_[0-9a-f]{24}$/i.test(text)) return { kind: 'artifact', artifactId: text.toLowerCase(), text };
  if (/^led_/i.test(text)) return { kind: 'invalid', reason: 'an entry id looks like led_<leaf index>_<12 hex>', text };
  // An artifact label, by the log's label rule: NFC (the id of the text as recorded), and
  // nothing a log would have refused to record (so a look-alike search finds nothing wrong).
  const label = checkLabel('artifact', text);
  if (!label.ok) return { kind: 'invalid', reason: label.reason, text };
  if (scope === '') return { kind: 'label', label: label.value, text };
  const scoped = scope === '' ? ({ ok: true, value: '' } as const) : checkLabel('scope', scope);
  if (!scoped.ok) return { kind: 'invalid', reason: scoped.reason, text };
  return {
    kind: 'artifact',
    artifactId: artifactId(label.value, scoped.value),
    label: label.value,
    scope: scoped.value,
    text,
  };
}

/** GETs a JSON API answer: the response and its body (null unless JSON), or why it could not be fetched. */
async function getJson(
  url: URL,
  fetchFn: typeof fetch,
): Promise<{ res: Response; body: unknown } | { unavailable: string }> {
  let res: Response;
  try {
    res = await fetchFn(url, { cache: 'no-store', headers: { accept: 'application/json' } });
  } catch (e) {
    return { unavailable: (e as Error).message };
  }
  const isJson = (res.headers.get('content-type') ?? '').includes('json');
  return { res, body: isJson ? await res.json().catch(() => null) : null };
}

export type ApiAnswer = { readonly found: number } | { readonly notFound: string } | { readonly unavailable: string };

/** Asks the site's /api/ledger/entry for a leaf index; `unavailable` when there is no API. */
export async function apiLookup(
  base: URL,
  key: 'hash' | 'artifact',
  value: string,
  fetchFn: typeof fetch = (...a) => fetch(...a),
): Promise<ApiAnswer> {
  const got = await getJson(new URL(`api/ledger/entry?${key}=${encodeURIComponent(value)}`, base), fetchFn);
  if ('unavailable' in got) return { unavailable: `the lookup API cannot be reached (${got.unavailable})` };
  const { res, body } = got;
  if (res.ok && body && typeof body === 'object' && Number.isSafeInteger((body as { leafIndex?: unknown }).leafIndex)) {
    return { found: (body as { leafIndex: number }).leafIndex };
  }
  const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
  if (res.status === 404 && code === 'entry_not_found')
    return { notFound: 'the log’s lookup index has no published entry for it' };
  return { unavailable: `this site has no lookup API (HTTP ${res.status})` };
}

/** One artifact carrying a searched label: its id, scope and latest leaf (from the index or a scan, unverified). */
export interface LabelMatch {
  readonly artifactId: string;
  readonly scope: string;
  readonly seq: number;
}

export type SearchAnswer =
  | { readonly matches: LabelMatch[]; readonly more: boolean }
  | { readonly unavailable: string };

/** Asks the site's /api/ledger/search for the artifacts with a label (first page of up to `limit`). */
export async function apiSearch(
  base: URL,
  label: string,
  limit = 100,
  fetchFn: typeof fetch = (...a) => fetch(...a),
): Promise<SearchAnswer> {
  const got = await getJson(
    new URL(`api/ledger/search?artifact=${encodeURIComponent(label)}&limit=${limit}`, base),
    fetchFn,
  );
  if ('unavailable' in got) return { unavailable: `the search API cannot be reached (${got.unavailable})` };
  const { res, body } = got;
  const list = (body as { matches?: unknown } | null)?.matches;
  if (!res.ok || !Array.isArray(list)) return { unavailable: `this site has no search API (HTTP ${res.status})` };
  const matches: LabelMatch[] = [];
  for (const m of list as Array<Record<string, unknown>>) {
    if (!Number.isSafeInteger(m.leafIndex) || typeof m.artifactId !== 'string') continue;
    matches.push({
      artifactId: m.artifactId,
      scope: typeof m.scope === 'string' ? m.scope : '',
      seq: m.leafIndex as number,
    });
  }
  return { matches, more: typeof (body as { next?: unknown }).next === 'string' };
}

/** A scan's matches of a label grouped by artifact (scope), the latest leaf of each, by artifact id. */
export function labelMatches(found: ReadonlyMap<number, EntryFields>): LabelMatch[] {
  const latest = new Map<string, LabelMatch>();
  for (const [seq, e] of found) {
    if (typeof e.artifact !== 'string') continue;
    const scope = typeof e.scope === 'string' ? e.scope : '';
    const id = artifactId(e.artifact, scope);
    const had = latest.get(id);
    if (!had || had.seq < seq) latest.set(id, { artifactId: id, scope, seq });
  }
  return [...latest.values()].sort((a, b) => (a.artifactId < b.artifactId ? -1 : 1));
}

export interface ScanOptions {
  /** Entries to scan at most, from the newest down (default 16,384 = 64 bundles). */
  readonly maxEntries?: number;
  /** Stop at the first (newest) match. */
  readonly stopAtFirst?: boolean;
  readonly onProgress?: (scanned: number, total: number) => void;
  readonly signal?: AbortSignal;
  readonly concurrency?: number;
}

export interface ScanResult {
  /** Matching leaf indexes, ascending. */
  readonly matches: number[];
  readonly scanned: number;
  /** The oldest leaf index scanned; 0 when the whole log was scanned. */
  readonly from: number;
}

export const DEFAULT_SCAN_ENTRIES = 64 * TILE_WIDTH;

/** Scans record bundles newest first. Records are matched unverified; callers verify the match. */
export async function scanRecords(
  client: LogClient,
  size: number,
  match: (e: EntryFields, seq: number) => boolean,
  o: ScanOptions = {},
): Promise<ScanResult> {
  const max = Math.max(1, o.maxEntries ?? DEFAULT_SCAN_ENTRIES);
  const lastTile = Math.ceil(size / TILE_WIDTH) - 1;
  const tiles: number[] = [];
  let planned = 0;
  for (let t = lastTile; t >= 0 && planned < max; t--) {
    tiles.push(t);
    planned += bundleWidth(t, size);
  }
  const total = Math.min(size, planned);
  const matches: number[] = [];
  let scanned = 0;
  let from = size;
  let stop = false;
  const conc = o.concurrency ?? 4;
  for (let at = 0; at < tiles.length && !stop; at += conc) {
    if (o.signal?.aborted) throw new DOMException('scan cancelled', 'AbortError');
    const group = tiles.slice(at, at + conc);
    const bundles = await Promise.all(group.map((t) => client.bundle('records', t, bundleWidth(t, size))));
    for (let g = 0; g < group.length && !stop; g++) {
      const first = group[g]! * TILE_WIDTH;
      const recs = bundles[g]!;
      for (let i = recs.length - 1; i >= 0; i--) {
        let fields: EntryFields;
        try {
          fields = parseRecord(recs[i]!);
        } catch {
          continue;
        }
        if (match(fields, first + i)) {
          matches.push(first + i);
          if (o.stopAtFirst) {
            stop = true;
            break;
          }
        }
      }
      scanned += recs.length;
      from = first;
      o.onProgress?.(scanned, total);
    }
  }
  return { matches: matches.sort((a, b) => a - b), scanned, from };
}

/** The record predicate a query implies for a scan. */
export function recordMatcher(q: Query): ((e: EntryFields, seq: number) => boolean) | null {
  switch (q.kind) {
    case 'digest':
      return (e) => e.digest === q.digest;
    case 'artifact':
      return (e) =>
        e.artifactId === q.artifactId ||
        (typeof e.artifact === 'string' &&
          artifactId(e.artifact, typeof e.scope === 'string' ? e.scope : '') === q.artifactId);
    case 'label':
      return (e) => e.artifact === q.label;
    default:
      return null;
  }
}
