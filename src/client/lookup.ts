// `ledger get`: an entry by its digest, leaf, id or artifact label, from the JSON API or from
// the tiles (a mirror, a CDN), each match verified like any answer of the log (rules 1–6):
// the checkpoint by the pinned key and pin, the entry bound to its leaf and to what was
// asked for, and its inclusion. An artifact label without a scope lists the latest entry of
// each scope (the API's search route; from the tiles, the record bundles), and answers an
// artifact's anchor rather than a later event of the same file; with `all`, every entry
// naming the artifact, oldest first (its history; from the tiles only: the API answers
// the latest entry of an artifact, never its history).
import { artifactId, parseEntryId } from '../core/entry.js';
import { hashFromHex, leafHash, toHex } from '../core/hash.js';
import type { EntryLookup, EntryView, LedgerApi } from './api.js';
import {
  cacheFileFor,
  entryIndex,
  latestByScope,
  type LabelHit,
  type ScanProgress,
  scanRecords,
} from './entry-index.js';
import { LogAnswerError, UsageError } from './errors.js';
import { type ApiView, type LogView, TilesView } from './views.js';
import { type CheckpointSummary, type PinMove, type Session, checkpointRules, checkpointSummary } from './session.js';
import { checkTilesEntry, leafRule } from './entry-rules.js';
import { type CheckedCheckpoint, type Outcome, type StatusOutcome, Report, checkInclusion, hashes } from './rules.js';

export type Lookup =
  | { readonly by: 'digest'; readonly digest: string }
  | { readonly by: 'leaf'; readonly leaf: number }
  | { readonly by: 'id'; readonly id: string }
  | { readonly by: 'artifact'; readonly artifact: string; readonly scope?: string; readonly all?: boolean };

export interface Match {
  readonly report: Report;
  readonly entry?: EntryView;
  readonly leafIndex: number;
  readonly treeSize: number;
  readonly checkpoint: CheckpointSummary;
}

export interface GetResult {
  readonly lookup: Lookup;
  readonly mode: 'api' | 'tiles';
  readonly source: string;
  /** Every entry the lookup names (one at most, but for an artifact without scope), verified. */
  readonly matches: Match[];
  /** The verified checkpoint of the tiles (null from the API when nothing matched). */
  readonly checkpoint: CheckpointSummary | null;
  readonly pinMoved: PinMove | null;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** The lookup from the command line's options: exactly one key, each well-formed. */
export function parseLookup(o: {
  digest?: string;
  leaf?: number;
  id?: string;
  artifact?: string;
  scope?: string;
  all?: boolean;
}): Lookup {
  const given = (['digest', 'leaf', 'id', 'artifact'] as const).filter((k) => o[k] !== undefined);
  if (given.length !== 1) throw new UsageError('give exactly one of --digest, --leaf, --id or --artifact');
  if (o.scope !== undefined && o.artifact === undefined) throw new UsageError('--scope goes with --artifact');
  if (o.all && o.artifact === undefined)
    throw new UsageError('--all goes with --artifact (the history of an artifact)');
  if (o.digest !== undefined) {
    if (!HEX64.test(o.digest)) throw new UsageError('--digest must be 64 hexadecimal characters (a SHA-256)');
    return { by: 'digest', digest: o.digest.toLowerCase() };
  }
  if (o.leaf !== undefined) return { by: 'leaf', leaf: o.leaf };
  if (o.id !== undefined) {
    if (!parseEntryId(o.id))
      throw new UsageError(`--id ${JSON.stringify(o.id)} is not an entry id (led_<leaf>_<12 hex>)`);
    return { by: 'id', id: o.id };
  }
  return {
    by: 'artifact',
    artifact: o.artifact!,
    ...(o.scope !== undefined ? { scope: o.scope } : {}),
    ...(o.all ? { all: true } : {}),
  };
}

export function describeLookup(l: Lookup): string {
  switch (l.by) {
    case 'digest':
      return `digest ${l.digest}`;
    case 'leaf':
      return `leaf ${l.leaf}`;
    case 'id':
      return `id ${l.id}`;
    case 'artifact':
      return `artifact ${JSON.stringify(l.artifact)}${l.scope !== undefined ? ` in scope ${JSON.stringify(l.scope)}` : ' (any scope)'}`;
  }
}

/** Rule 3's extra for a lookup: the entry shown is the one asked for. */
function answersLookup(l: Lookup, entry: EntryView, seq: number): string | null {
  switch (l.by) {
    case 'digest':
      return entry.digest === l.digest ? null : `the entry records digest ${entry.digest}, not the one asked for`;
    case 'leaf':
      return seq === l.leaf ? null : `the log answered with leaf ${seq}, not ${l.leaf}`;
    case 'id':
      return entry.id === l.id ? null : `the log answered with entry ${entry.id}, not ${l.id}`;
    case 'artifact':
      if (entry.artifact !== l.artifact) return `the entry records artifact ${JSON.stringify(entry.artifact)}`;
      if (l.scope !== undefined && (entry.scope ?? '') !== l.scope)
        return `the entry records scope ${JSON.stringify(entry.scope)}, not ${JSON.stringify(l.scope)}`;
      return null;
  }
}

function withLookupCheck(report: Report, l: Lookup, entry: EntryView | undefined, seq: number): void {
  const leaf = report.get('leaf');
  if (!entry || !leaf || leaf.status !== 'PASS') return;
  const wrong = answersLookup(l, entry, seq);
  if (wrong) report.add('leaf', { ok: false, detail: `${leaf.detail}; but ${wrong}` });
}

// ---- from the API ---------------------------------------------------------------------

async function apiLookups(api: LedgerApi, l: Lookup): Promise<EntryLookup[]> {
  switch (l.by) {
    case 'digest':
      return [{ hash: l.digest }];
    case 'leaf':
      return [{ leaf: l.leaf }];
    case 'id':
      return [{ id: l.id }];
    case 'artifact':
      if (l.scope !== undefined) return [{ artifact: artifactId(l.artifact, l.scope) }];
      try {
        return [...new Set(await api.searchArtifact(l.artifact))].sort((a, b) => a - b).map((leaf) => ({ leaf }));
      } catch (e) {
        if (e instanceof LogAnswerError && e.status === 404 && e.code === 'not_found')
          throw new UsageError(
            `${api.endpoint} has no artifact search across scopes (GET /api/ledger/search): pass --scope <scope>, or search its tiles with --tiles`,
          );
        if (e instanceof LogAnswerError && e.status === 404) return [];
        throw e;
      }
  }
}

async function getFromApi(s: Session, view: ApiView, l: Lookup): Promise<GetResult> {
  const matches: Match[] = [];
  let pinMoved: PinMove | null = null;
  for (const q of await apiLookups(view.api, l)) {
    let found;
    try {
      found = await view.api.entry(q);
    } catch (e) {
      if (e instanceof LogAnswerError && e.status === 404) continue;
      throw e;
    }
    const report = new Report();
    const rules = await checkpointRules(s, report, { json: found.checkpoint }, view.prove);
    pinMoved ??= rules.pinMoved;
    report.add('leaf', await leafRule(s, found.entry, found.leafIndex, found.treeSize, found.leafHash, undefined));
    withLookupCheck(report, l, found.entry, found.leafIndex);
    let inclusion = checkInclusion(
      found.leafIndex,
      found.treeSize,
      leafHash(hashFromHex(found.entry.proof.entryHash)),
      hashes(found.auditPath),
      rules.cc,
    );
    if (inclusion.ok && found.rootHash !== toHex(rules.cc.root))
      inclusion = { ok: false, detail: `the response's rootHash is not the checkpoint root` };
    report.add('inclusion', inclusion);
    report.finish();
    matches.push({
      report,
      entry: found.entry,
      leafIndex: found.leafIndex,
      treeSize: found.treeSize,
      checkpoint: checkpointSummary(rules.cc),
    });
  }
  // Across scopes, as from the tiles: the latest entry of each scope (what a lookup by artifact id answers).
  const latest =
    l.by === 'artifact' && l.scope === undefined
      ? matches.filter(
          (m) =>
            !matches.some((o) => o.leafIndex > m.leafIndex && o.entry && m.entry && o.entry.scope === m.entry.scope),
        )
      : matches;
  return {
    lookup: l,
    mode: 'api',
    source: view.name,
    matches: latest,
    checkpoint: latest[0]?.checkpoint ?? null,
    pinMoved,
  };
}

// ---- from the tiles -------------------------------------------------------------------

/** The leaves a lookup names in the tree of `cc`, read from the record bundles (or a mirror's cached index). */
async function tilesLeaves(
  s: Session,
  view: TilesView,
  l: Lookup,
  cc: CheckedCheckpoint,
  onScanProgress?: ScanProgress,
): Promise<number[]> {
  if (l.by === 'leaf') return l.leaf < cc.size ? [l.leaf] : [];
  if (l.by === 'id') {
    const seq = parseEntryId(l.id)!.seq;
    return seq < cc.size ? [seq] : [];
  }
  const cacheFile = cacheFileFor(view.source, s.config.path);
  const tree = { size: cc.size, root: cc.root };
  let digestAt: number | undefined;
  let hits: LabelHit[] = [];
  if (cacheFile) {
    const { index } = await entryIndex(view, tree, cacheFile, { progress: onScanProgress, notice: s.onNotice });
    if (l.by === 'digest') digestAt = Object.hasOwn(index.digests, l.digest) ? index.digests[l.digest] : undefined;
    else hits = Object.hasOwn(index.artifacts, l.artifact) ? index.artifacts[l.artifact]! : [];
  } else {
    await scanRecords(
      view.reader,
      0,
      cc.size,
      (seq, e) => {
        if (l.by === 'digest') {
          if (e.digest !== l.digest) return false;
          digestAt = seq;
          return true;
        }
        if (e.artifact === l.artifact) hits.push([typeof e.scope === 'string' ? e.scope : null, seq]);
        return false;
      },
      onScanProgress,
    );
  }
  if (l.by === 'digest') return digestAt === undefined ? [] : [digestAt];
  // Scope "" is no scope, as in the artifact id (docs/design.md §1.4).
  const scope = l.by === 'artifact' && l.scope !== undefined ? (l.scope === '' ? null : l.scope) : undefined;
  if (scope === null) hits = hits.filter(([sc]) => sc === null || sc === '');
  // The history: every entry naming the artifact (in the scope, if one is given), oldest first.
  if (l.by === 'artifact' && l.all)
    return hits
      .filter(([sc]) => scope === undefined || scope === null || sc === scope)
      .map(([, seq]) => seq)
      .sort((a, b) => a - b);
  return latestByScope(hits, scope === null ? undefined : scope).map(([, seq]) => seq);
}

async function getFromTiles(s: Session, view: TilesView, l: Lookup, onScanProgress?: ScanProgress): Promise<GetResult> {
  const first = new Report('checkpoint');
  const { cc, consistency, pinMoved } = await checkpointRules(s, first, await view.checkpoint(), view.prove, view);
  const checkpoint = checkpointSummary(cc);
  const matches: Match[] = [];
  for (const seq of await tilesLeaves(s, view, l, cc, onScanProgress)) {
    const report = new Report();
    report.add('signature', cc.signature);
    report.add('consistency', consistency as Outcome | StatusOutcome);
    report.add('witnesses', cc.witnesses);
    const entry = await checkTilesEntry(view, report, seq, cc);
    withLookupCheck(report, l, entry, seq);
    report.finish();
    matches.push({ report, ...(entry ? { entry } : {}), leafIndex: seq, treeSize: cc.size, checkpoint });
  }
  return { lookup: l, mode: 'tiles', source: view.name, matches, checkpoint, pinMoved };
}

export async function getEntries(
  s: Session,
  view: LogView,
  l: Lookup,
  onScanProgress?: ScanProgress,
): Promise<GetResult> {
  const get = (q: Lookup) =>
    view instanceof TilesView ? getFromTiles(s, view, q, onScanProgress) : getFromApi(s, view as ApiView, q);
  if (l.by === 'artifact' && l.all && !(view instanceof TilesView))
    throw new UsageError('the history of an artifact (--all) is read from the tiles: pass --tiles');
  const r = await get(l);
  // A history lists each entry as it is; a single answer is the artifact's anchor.
  return l.by === 'artifact' && !l.all
    ? { ...r, matches: await Promise.all(r.matches.map((m) => anchorOf(m, get))) }
    : r;
}

/**
 * What a lookup by artifact asks for is the file's anchor: a match that is a later event of
 * the same file (a `document_verified`) gives way to the earliest entry of its digest, when
 * that is a `ledger_anchor` under the same label and scope, verified like any match.
 */
async function anchorOf(m: Match, get: (q: Lookup) => Promise<GetResult>): Promise<Match> {
  const e = m.entry;
  if (!e || e.type === 'ledger_anchor' || m.report.failed) return m;
  const earliest = (await get({ by: 'digest', digest: e.digest })).matches[0];
  const a = earliest?.entry;
  const isAnchor =
    a !== undefined &&
    !earliest!.report.failed &&
    a.type === 'ledger_anchor' &&
    a.artifact === e.artifact &&
    (a.scope ?? '') === (e.scope ?? '') &&
    earliest!.leafIndex < m.leafIndex;
  return isAnchor ? earliest! : m;
}
