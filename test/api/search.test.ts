// GET /api/ledger/search over real sockets: an artifact label across scopes, a page at a
// time, and JSON errors for bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactId } from '../../src/core/entry.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import type { Json } from '../helpers/json.js';
import { digestOf, getJson, postAnchor, startTestServer } from './server.js';

let server: RunningServer;
const LABEL = 'build-150.bin';
const SCOPES = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'];
const latest = new Map<string, number>();

const search = (qs: string) => getJson(`${server.url}/api/ledger/search?${qs}`);

beforeAll(async () => {
  server = await startTestServer();
  let d = 0x7000;
  for (const scope of SCOPES) {
    const r = await postAnchor(server.url, { digest: digestOf(d++), artifact: LABEL, scope });
    latest.set(scope, r.body.leafIndex);
  }
  const unscoped = await postAnchor(server.url, { digest: digestOf(d++), artifact: LABEL });
  latest.set('', unscoped.body.leafIndex);
  // A newer entry of one artifact: the search shows that one.
  latest.set(
    'beta',
    (await postAnchor(server.url, { digest: digestOf(d++), artifact: LABEL, scope: 'beta' })).body.leafIndex,
  );
  await postAnchor(server.url, { digest: digestOf(d++), artifact: 'build-151.bin', scope: 'alpha' });
  await postAnchor(server.url, { digest: digestOf(d++), artifact: 'café.bin', scope: 'alpha' });
}, 60_000);
afterAll(async () => server?.close());

describe('search by artifact label', () => {
  it('lists the label in every scope, each with its latest entry', async () => {
    const r = await search(`artifact=${encodeURIComponent(LABEL)}`);
    expect(r.status).toBe(200);
    expect(r.body.artifact).toBe(LABEL);
    expect(r.body.next).toBeUndefined();
    const matches = r.body.matches as Json[];
    expect(matches).toHaveLength(SCOPES.length + 1);
    const byScope = new Map(matches.map((m) => [m.scope ?? '', m]));
    for (const [scope, leaf] of latest) {
      const m = byScope.get(scope)!;
      expect(m.leafIndex, scope).toBe(leaf);
      expect(m.artifactId).toBe(artifactId(LABEL, scope));
      expect(m.entry.artifact).toBe(LABEL);
      expect(m.entry.id).toMatch(new RegExp(`^led_${leaf}_[0-9a-f]{12}$`));
    }
    const ids = matches.map((m) => m.artifactId);
    expect(ids).toEqual([...ids].sort());
  });

  it('pages with limit and cursor, each artifact once', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await search(`artifact=${LABEL}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      expect(r.body.matches.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.matches.map((m: Json) => m.artifactId));
      cursor = r.body.next;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(SCOPES.length + 1);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('finds a label by its NFC form whichever form is typed; an unknown label has no matches', async () => {
    const nfd = await search(`artifact=${encodeURIComponent('café.bin'.normalize('NFD'))}`);
    expect(nfd.body.matches).toHaveLength(1);
    expect(nfd.body.matches[0].entry.artifact).toBe('café.bin');
    const none = await search('artifact=nothing-like-it.bin');
    expect(none.status).toBe(200);
    expect(none.body.matches).toEqual([]);
  });

  it('answers bad input with a JSON 400', async () => {
    const cases: [string, string][] = [
      ['', 'missing_artifact'],
      ['artifact=a&artifact=b', 'duplicate_parameter'],
      ['artifact=a&scope=x', 'unknown_parameter'],
      [`artifact=${encodeURIComponent('evil\u202Egpj.exe')}`, 'invalid_artifact'],
      [`artifact=${'x'.repeat(1025)}`, 'invalid_artifact'],
      ['artifact=a&limit=0', 'invalid_limit'],
      ['artifact=a&limit=101', 'invalid_limit'],
      ['artifact=a&limit=ten', 'invalid_limit'],
      ['artifact=a&cursor=xyz', 'invalid_cursor'],
    ];
    for (const [qs, code] of cases) {
      const r = await search(qs);
      expect(r.status, qs).toBe(400);
      expect(r.body.error.code, qs).toBe(code);
      expect(typeof r.body.error.message).toBe('string');
    }
    const post = await getJson(`${server.url}/api/ledger/search?artifact=a`, { method: 'POST' });
    expect(post.status).toBe(405);
  });
});

describe('a malformed percent-encoding in any query of any route', () => {
  const BAD = ['%ZZ', '%C0%AF', '%ED%A0%80', '%E2%82', '%', 'a%2', '%FF'];
  const ROUTES = [
    '/api/ledger/search?artifact=',
    '/api/ledger/entry?hash=',
    '/api/ledger/entry?format=json&leaf=1&x=',
    '/api/ledger/consistency?first=1&second=',
    '/api/ledger/checkpoint?x=',
    '/tile/0/000.p/1?',
    '/checkpoint?',
    '/readyz?',
    '/no/such/route?q=',
  ];

  it('is a JSON 400 bad_request, not stored; the same query well formed is not', async () => {
    for (const route of ROUTES) {
      for (const bad of BAD) {
        const r = await getJson(`${server.url}${route}${bad}`);
        expect([route + bad, r.status, r.body.error?.code]).toEqual([route + bad, 400, 'bad_request']);
        expect(r.headers.get('cache-control')).toBe('no-store');
      }
    }
    // Also on a POST, before its body is read.
    const post = await postAnchor(`${server.url}/api/ledger/anchor?x=%ZZ`, {});
    expect([post.status, post.body.error.code]).toEqual([400, 'bad_request']);
    // Well formed (an encoded é, '%25' itself): the route's own answer.
    expect((await search(`artifact=caf%C3%A9.bin`)).body.matches).toHaveLength(1);
    expect((await search(`artifact=100%25.bin`)).status).toBe(200);
    expect((await getJson(`${server.url}/readyz?a=%41`)).status).toBe(200);
  });
});
