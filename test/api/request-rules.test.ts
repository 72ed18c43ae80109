// The HTTP edge, tried as an attacker would (issue 16): every malformed request (methods,
// encodings, charsets, headers, framing, bodies, query strings, labels), sent over a raw
// socket, gets the JSON error shape with a 4xx status, and none changes the log.
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMirror } from '../../src/mirror/host.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { startWitness } from '../../src/witness/host.js';
import { rawExchange, rawRequest } from '../helpers/raw-http.js';
import { scratchDir } from '../helpers/tmp.js';
import { digestOf, getJson, postAnchor, startTestServer } from './server.js';

const ANCHOR = '/api/ledger/anchor';
const JSON_CT = 'Content-Type: application/json';
const good = JSON.stringify({ digest: digestOf(0xed9e) });
/** An anchor body with one label field set to `value` (a string as raw JSON text, to send lone surrogates). */
const withLabel = (field: string, rawValue: string) => `{"digest":"${digestOf(0xbad)}","${field}":${rawValue}}`;
const anchor = (body: string | Buffer, headers: readonly string[] = [JSON_CT]) =>
  rawRequest('POST', ANCHOR, { headers, body });

type Case = readonly [name: string, request: Buffer | string, status: number, code: string];

const METHODS: Case[] = [
  ...[
    'TRACE',
    'PROPFIND',
    'PROPPATCH',
    'SEARCH',
    'MKCOL',
    'COPY',
    'MOVE',
    'LOCK',
    'UNLOCK',
    'PURGE',
    'LINK',
    'UNLINK',
    'REPORT',
    'MKACTIVITY',
    'CHECKOUT',
    'MERGE',
    'NOTIFY',
    'SUBSCRIBE',
    'UNSUBSCRIBE',
    'BIND',
    'REBIND',
    'UNBIND',
    'ACL',
    'MKCALENDAR',
  ].map((m): Case => [`${m} /`, rawRequest(m, '/'), 405, 'method_not_allowed']),
  ['TRACE on the checkpoint JSON', rawRequest('TRACE', '/api/ledger/checkpoint'), 405, 'method_not_allowed'],
  ['PROPFIND on a tile', rawRequest('PROPFIND', '/tile/0/000'), 405, 'method_not_allowed'],
  ['PURGE on the anchor route', rawRequest('PURGE', ANCHOR), 405, 'method_not_allowed'],
  ['CONNECT', 'CONNECT stele.test:443 HTTP/1.1\r\nHost: stele.test:443\r\n\r\n', 405, 'method_not_allowed'],
  ['an unknown method token', rawRequest('FROB', '/'), 400, 'malformed_request'],
  ['DELETE the checkpoint JSON', rawRequest('DELETE', '/api/ledger/checkpoint'), 405, 'method_not_allowed'],
  ['PUT on the anchor route', rawRequest('PUT', ANCHOR, { headers: [JSON_CT], body: good }), 405, 'method_not_allowed'],
  ['PATCH a tile', rawRequest('PATCH', '/tile/0/000', { body: 'x' }), 405, 'method_not_allowed'],
  ['PUT the checkpoint', rawRequest('PUT', '/checkpoint', { body: 'x' }), 405, 'method_not_allowed'],
  ['GET on the anchor route', rawRequest('GET', ANCHOR), 405, 'method_not_allowed'],
];

const ENCODINGS: Case[] = [
  ...['gzip', 'deflate', 'br', 'compress', 'x-gzip', 'zstd', 'bogus', 'gzip, identity', 'identity, gzip'].map(
    (e): Case => [
      `Content-Encoding: ${e} on plain JSON`,
      anchor(good, [JSON_CT, `Content-Encoding: ${e}`]),
      415,
      'unsupported_encoding',
    ],
  ),
  [
    'Content-Encoding: gzip on a real gzip body',
    anchor(gzipSync(good), [JSON_CT, 'Content-Encoding: gzip']),
    415,
    'unsupported_encoding',
  ],
  [
    'Content-Encoding: identity is no encoding',
    anchor('{"digest":"zz"}', [JSON_CT, 'Content-Encoding: identity']),
    400,
    'invalid_digest',
  ],
];

const CHARSETS: Case[] = [
  ...[
    'bogus',
    'utf-16',
    'UTF-16LE',
    'utf-32',
    'iso-8859-1',
    'latin1',
    'us-ascii',
    'windows-1252',
    '"utf-16"',
    'utf-8; charset=utf-16',
  ].map(
    (c): Case => [
      `charset=${c}`,
      anchor(good, [`Content-Type: application/json; charset=${c}`]),
      415,
      'unsupported_charset',
    ],
  ),
  ['charset=UTF-8 is accepted', anchor('{}', ['Content-Type: application/json; charset=UTF-8']), 400, 'missing_digest'],
  [
    'charset="utf-8" quoted is accepted',
    anchor('{}', ['Content-Type: application/json; charset="utf-8"']),
    400,
    'missing_digest',
  ],
  ['text/plain', anchor(good, ['Content-Type: text/plain']), 415, 'unsupported_media_type'],
  ['no Content-Type', anchor(good, []), 415, 'unsupported_media_type'],
  ['a form', anchor('digest=00', ['Content-Type: application/x-www-form-urlencoded']), 415, 'unsupported_media_type'],
  ['multipart', anchor('--b--', ['Content-Type: multipart/form-data; boundary=b']), 415, 'unsupported_media_type'],
];

const BIG_HEADER = `X-Big: ${'a'.repeat(20_000)}`;
const MANY_HEADERS = Array.from({ length: 10_000 }, (_, i) => `X-H${i}: v`);
const FRAMING: Case[] = [
  ['a 20 KB header', rawRequest('GET', '/api/ledger/checkpoint', { headers: [BIG_HEADER] }), 431, 'headers_too_large'],
  ['10,000 headers', rawRequest('GET', '/api/ledger/checkpoint', { headers: MANY_HEADERS }), 431, 'headers_too_large'],
  [
    'Content-Length with Transfer-Encoding',
    rawRequest('POST', ANCHOR, {
      headers: [JSON_CT, 'Transfer-Encoding: chunked', 'Content-Length: 4'],
      body: '0\r\n\r\n',
      length: false,
    }),
    400,
    'malformed_request',
  ],
  [
    'a negative Content-Length',
    rawRequest('POST', ANCHOR, { headers: [JSON_CT, 'Content-Length: -1'], body: good, length: false }),
    400,
    'malformed_request',
  ],
  [
    'a non-numeric Content-Length',
    rawRequest('POST', ANCHOR, { headers: [JSON_CT, 'Content-Length: abc'], body: good, length: false }),
    400,
    'malformed_request',
  ],
  [
    'two different Content-Lengths',
    rawRequest('POST', ANCHOR, {
      headers: [JSON_CT, 'Content-Length: 2', 'Content-Length: 3'],
      body: '{}',
      length: false,
    }),
    400,
    'malformed_request',
  ],
  [
    'NUL in a header value',
    rawRequest('GET', '/api/ledger/checkpoint', { headers: ['X-Nul: a\u0000b'] }),
    400,
    'malformed_request',
  ],
  [
    'a header line without a colon',
    rawRequest('GET', '/api/ledger/checkpoint', { headers: ['NoColonHere'] }),
    400,
    'malformed_request',
  ],
  [
    'a space before the colon',
    rawRequest('GET', '/api/ledger/checkpoint', { headers: ['X-Space : v'] }),
    400,
    'malformed_request',
  ],
  [
    'a bad chunk size',
    rawRequest('POST', ANCHOR, {
      headers: [JSON_CT, 'Transfer-Encoding: chunked'],
      body: 'zz\r\n{}\r\n0\r\n\r\n',
      length: false,
    }),
    400,
    'malformed_request',
  ],
  ['a TLS ClientHello on the plain port', Buffer.from('16030100a5010000a103035f', 'hex'), 400, 'malformed_request'],
  ['an HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 400, 'malformed_request'],
  ['an unknown HTTP version', 'GET / HTTP/7.1\r\nHost: x\r\n\r\n', 400, 'malformed_request'],
  ['a space in the request target', 'GET /a b HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'malformed_request'],
];

const BODIES: Case[] = [
  ['not JSON', anchor('{not json'), 400, 'invalid_json'],
  ['a JSON array', anchor('[1,2]'), 400, 'invalid_body'],
  ['a JSON string', anchor('"digest"'), 400, 'invalid_json'],
  ['JSON null', anchor('null'), 400, 'invalid_json'],
  ['an empty object', anchor('{}'), 400, 'missing_digest'],
  [
    'a digest of invalid UTF-8 bytes',
    anchor(Buffer.from([...Buffer.from('{"digest":"'), 0xff, 0xfe, ...Buffer.from('"}')])),
    400,
    'invalid_digest',
  ],
  ['__proto__ as a field', anchor(`{"digest":"${digestOf(1)}","__proto__":{"x":1}}`), 400, 'forbidden_field'],
  [
    'constructor as a field',
    anchor(`{"digest":"${digestOf(1)}","constructor":{"prototype":{"x":1}}}`),
    400,
    'unknown_field',
  ],
  ['a digest one character short', anchor(`{"digest":"${digestOf(1).slice(1)}"}`), 400, 'invalid_digest'],
  ['an entry type of the control plane', anchor(`{"digest":"${digestOf(1)}","type":"key_epoch"}`), 400, 'invalid_type'],
  ['deeply nested arrays', anchor(`${'['.repeat(3000)}${']'.repeat(3000)}`), 400, 'invalid_body'],
  [
    'a body over the limit',
    anchor(JSON.stringify({ digest: digestOf(1), artifact: 'a'.repeat(20_000) })),
    413,
    'body_too_large',
  ],
];

const QUERIES: Case[] = [
  ['no lookup key', rawRequest('GET', '/api/ledger/entry'), 400, 'lookup_key'],
  ['two lookup keys', rawRequest('GET', `/api/ledger/entry?hash=${digestOf(1)}&leaf=0`), 400, 'lookup_key'],
  ['a duplicated key', rawRequest('GET', '/api/ledger/entry?leaf=0&leaf=1'), 400, 'duplicate_parameter'],
  ['an unknown parameter', rawRequest('GET', '/api/ledger/entry?leaf=0&x=1'), 400, 'unknown_parameter'],
  ['a malformed id', rawRequest('GET', '/api/ledger/entry?id=led_x'), 400, 'invalid_id'],
  ['a bad percent-escape', rawRequest('GET', '/api/ledger/entry?hash=%ZZ'), 400, 'bad_request'],
  ['NUL in a value', rawRequest('GET', '/api/ledger/entry?hash=%00'), 400, 'invalid_hash'],
  ['a negative leaf', rawRequest('GET', '/api/ledger/entry?leaf=-1'), 400, 'invalid_leaf'],
  ['a leaf beyond 2^53', rawRequest('GET', '/api/ledger/entry?leaf=99999999999999999999'), 400, 'invalid_leaf'],
  ['a long value', rawRequest('GET', `/api/ledger/entry?artifact=${'a'.repeat(4000)}`), 400, 'invalid_artifact'],
  ['an unknown format', rawRequest('GET', '/api/ledger/entry?leaf=0&format=xml'), 400, 'invalid_format'],
  [
    'a consistency range upside down',
    rawRequest('GET', '/api/ledger/consistency?first=3&second=1'),
    400,
    'invalid_range',
  ],
  ['a percent-encoded path', rawRequest('GET', '/api/ledger/%63heckpoint%ZZ'), 404, 'not_found'],
  ['a traversal attempt', rawRequest('GET', '/tile/..%2f..%2fcheckpoint'), 404, 'object_not_found'],
];

const LABELS: Case[] = [
  ['artifact with NEL (U+0085, C1)', anchor(withLabel('artifact', '"a\\u0085b"')), 400, 'invalid_artifact'],
  ['artifact with CSI (U+009B, C1)', anchor(withLabel('artifact', '"a\\u009bb"')), 400, 'invalid_artifact'],
  ['artifact with DEL', anchor(withLabel('artifact', '"a\\u007fb"')), 400, 'invalid_artifact'],
  ['artifact with a newline', anchor(withLabel('artifact', '"a\\nb"')), 400, 'invalid_artifact'],
  ['artifact with LINE SEPARATOR', anchor(withLabel('artifact', '"a\\u2028b"')), 400, 'invalid_artifact'],
  ['artifact with PARAGRAPH SEPARATOR', anchor(withLabel('artifact', '"a\\u2029b"')), 400, 'invalid_artifact'],
  [
    'artifact "evil\\u202Egpj.exe" (RLO)',
    anchor(withLabel('artifact', '"evil\\u202egpj.exe"')),
    400,
    'invalid_artifact',
  ],
  ['artifact with LRE', anchor(withLabel('artifact', '"a\\u202ab"')), 400, 'invalid_artifact'],
  ['artifact with an isolate (U+2066)', anchor(withLabel('artifact', '"a\\u2066b"')), 400, 'invalid_artifact'],
  ['artifact with PDI (U+2069)', anchor(withLabel('artifact', '"a\\u2069b"')), 400, 'invalid_artifact'],
  ['artifact with LRM', anchor(withLabel('artifact', '"a\\u200eb"')), 400, 'invalid_artifact'],
  ['artifact with RLM', anchor(withLabel('artifact', '"a\\u200fb"')), 400, 'invalid_artifact'],
  ['artifact with ALM (U+061C)', anchor(withLabel('artifact', '"a\\u061cb"')), 400, 'invalid_artifact'],
  ['artifact with a zero-width space', anchor(withLabel('artifact', '"a\\u200bb"')), 400, 'invalid_artifact'],
  ['artifact with a BOM', anchor(withLabel('artifact', '"\\ufeffa"')), 400, 'invalid_artifact'],
  ['artifact with a soft hyphen', anchor(withLabel('artifact', '"a\\u00adb"')), 400, 'invalid_artifact'],
  ['artifact with a tag character', anchor(withLabel('artifact', '"a\\udb40\\udc41"')), 400, 'invalid_artifact'],
  ['artifact with a lone surrogate', anchor(withLabel('artifact', '"a\\ud800"')), 400, 'invalid_artifact'],
  ['artifact of 1,025 bytes', anchor(withLabel('artifact', JSON.stringify('a'.repeat(1025)))), 400, 'invalid_artifact'],
  ['artifact as a number', anchor(withLabel('artifact', '7')), 400, 'invalid_artifact'],
  ['scope with RLO', anchor(withLabel('scope', '"ci\\u202e"')), 400, 'invalid_scope'],
  ['scope with a C1 control', anchor(withLabel('scope', '"ci\\u0085"')), 400, 'invalid_scope'],
  ['scope of 257 bytes', anchor(withLabel('scope', JSON.stringify('s'.repeat(257)))), 400, 'invalid_scope'],
  ['tenant with RLO', anchor(withLabel('tenant', '"acme\\u202e"')), 400, 'invalid_tenant'],
  ['tenant with U+2028', anchor(withLabel('tenant', '"acme\\u2028"')), 400, 'invalid_tenant'],
  ['tenant as an object', anchor(withLabel('tenant', '{}')), 400, 'invalid_tenant'],
  ['tenant of 257 bytes', anchor(withLabel('tenant', JSON.stringify('t'.repeat(257)))), 400, 'invalid_tenant'],
];

const CASES: Case[] = [...METHODS, ...ENCODINGS, ...CHARSETS, ...FRAMING, ...BODIES, ...QUERIES, ...LABELS];

describe('an edge that always answers JSON', () => {
  let srv: RunningServer;
  let before: { treeSize: number; rootHash: string; lifetimeEntries: number };

  beforeAll(async () => {
    srv = await startTestServer();
    for (let i = 0; i < 3; i++)
      expect((await postAnchor(srv.url, { digest: digestOf(i), artifact: `a${i}` })).status).toBe(201);
    before = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
  }, 60_000);
  afterAll(() => srv?.close());

  it('has at least 80 malformed requests in its table', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(80);
    expect(new Set(CASES.map((c) => c[0])).size).toBe(CASES.length);
  });

  it.each(CASES)(
    '%s',
    async (_name, request, status, code) => {
      const r = await rawExchange(srv.url, request);
      expect(r.status).toBe(status);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.json).toEqual({ error: { code, message: expect.any(String) } });
      expect(r.status).toBeLessThan(500);
      if (status === 405) expect(r.headers.allow).toMatch(/^(GET|POST|HEAD)/);
    },
    30_000,
  );

  it('leaves the log as it was: no entry was added by any of them', async () => {
    const after = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    expect(after.treeSize).toBe(before.treeSize);
    expect(after.rootHash).toBe(before.rootHash);
    expect(after.lifetimeEntries).toBe(before.lifetimeEntries);
    // Still serving: the edge closed the bad connections, not the server.
    expect((await postAnchor(srv.url, { digest: digestOf(99) })).status).toBe(201);
  }, 30_000);

  it('counts none of them as a server error in /metrics', async () => {
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    expect(metrics).not.toMatch(/stele_http_requests_total\{[^}]*status="5\d\d"/);
  });
});

// Node answers these itself, before any handler: src/http/server.ts gives every server
// (the API above, the witness, the mirror) the listeners that answer them in the JSON shape.
const BEFORE_ANY_HANDLER: Case[] = [
  METHODS.find((c) => c[0] === 'CONNECT')!,
  METHODS.find((c) => c[0] === 'an unknown method token')!,
  ...FRAMING.slice(0, 3),
];

describe.each([
  ['witness', startWitness],
  ['mirror', startMirror],
] as const)('the %s runs behind the same edge', (name, start) => {
  let srv: { url: string; close(): Promise<void> };
  beforeAll(async () => {
    const dataDir = join(scratchDir(`stele-edge-${name}-`), name);
    srv = await start({
      dataDir,
      name: `${name}.test`,
      logs: [],
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
  });
  afterAll(() => srv?.close());

  it.each(BEFORE_ANY_HANDLER)('%s', async (_name, request, status, code) => {
    const r = await rawExchange(srv.url, request);
    expect(r.status).toBe(status);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(r.json).toEqual({ error: { code, message: expect.any(String) } });
  });
});
