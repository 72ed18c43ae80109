// GET /api/ledger/search?artifact=<label>[&limit=N][&cursor=art_…]: the artifacts recorded
// under a label in any scope, each with its latest published entry, a page at a time. The
// index names the candidates; each entry is read (and authenticated) from the tiles and must
// carry the label and artifact id, so a stale or shared index row is skipped, never shown.
import type Router from '@koa/router';
import { ARTIFACT_ID, presentEntry } from '../core/entry.js';
import { checkLabel } from '../core/labels.js';
import type { LookupIndex } from '../index/types.js';
import type { LogReader } from '../read/reader.js';
import type { PublishedCheckpoint } from '../sequencer/contract.js';
import { badRequest } from '../http/errors.js';
import { indexCovers } from './index-coverage.js';
import { noStore, queryOf, single } from './route-helpers.js';
import type { ArtifactSearchView, EntryView } from './wire.js';

export const SEARCH_DEFAULT_LIMIT = 20;
export const SEARCH_MAX_LIMIT = 100;
const PARAMS = ['artifact', 'limit', 'cursor'];
/** A label is at most 1,024 UTF-8 bytes (src/core/labels.ts checks the bytes); never more characters. */
const MAX_LABEL_QUERY = 1024;

interface SearchSource {
  readonly index: LookupIndex;
  readonly reader: LogReader;
  checkpoint(): PublishedCheckpoint;
}

function limitOf(text: string | undefined): number {
  if (text === undefined) return SEARCH_DEFAULT_LIMIT;
  const n = /^[1-9][0-9]{0,2}$/.test(text) ? Number(text) : Number.NaN;
  if (!(n <= SEARCH_MAX_LIMIT))
    throw badRequest('invalid_limit', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}`);
  return n;
}

export function registerSearch(router: Router, svc: SearchSource): void {
  router.get('/search', async (ctx) => {
    noStore(ctx);
    const query = queryOf(ctx);
    const extra = Object.keys(query).filter((k) => !PARAMS.includes(k));
    if (extra.length > 0) throw badRequest('unknown_parameter', `unknown query parameter ${JSON.stringify(extra[0])}`);
    const given = single(query, 'artifact', MAX_LABEL_QUERY);
    if (given === undefined) throw badRequest('missing_artifact', 'artifact (a label) is required');
    // The log's label rule: a label it would have refused cannot have been recorded.
    const label = checkLabel('artifact', given);
    if (!label.ok) throw badRequest('invalid_artifact', label.reason);
    const limit = limitOf(single(query, 'limit'));
    const cursor = single(query, 'cursor');
    if (cursor !== undefined && !ARTIFACT_ID.test(cursor))
      throw badRequest('invalid_cursor', 'cursor must be the `next` of an earlier answer (art_<24 hex>)');
    const cp = svc.checkpoint();
    // A search over an index being rebuilt would miss artifacts: 503 until it covers the tree.
    await indexCovers(svc.index, cp);
    // Each artifact's latest leaf must be published and carry the label and the id (the
    // index's rows are candidates); the entries read to check them are the answer's.
    const read = new Map<number, Awaited<ReturnType<LogReader['entry']>>>();
    const page = await svc.index.searchArtifact(label.value, limit, cursor, async (artifactId, seq) => {
      if (seq >= cp.size) return false;
      const found = await svc.reader.entry(seq, cp);
      if (found.entry.artifact !== label.value || found.entry.artifactId !== artifactId) return false;
      read.set(seq, found);
      return true;
    });
    const matches: ArtifactSearchView['matches'] = page.matches.map((m) => {
      const found = read.get(m.seq)!;
      return {
        artifactId: m.artifactId,
        ...(found.entry.scope !== undefined ? { scope: found.entry.scope } : {}),
        leafIndex: m.seq,
        entry: presentEntry(found.entry, m.seq, found.entryHash) as EntryView,
      };
    });
    const last = page.matches[page.matches.length - 1];
    const body: ArtifactSearchView = {
      artifact: label.value,
      treeSize: cp.size,
      matches,
      ...(page.more && last ? { next: last.artifactId } : {}),
    };
    ctx.body = body;
  });
}
