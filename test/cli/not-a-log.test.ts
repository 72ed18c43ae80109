// `ledger init --endpoint` pointed at something that is not a Stele log (a witness, a mirror,
// a static site answering 404 without an error document): one line that says so and what to
// give instead, where it printed "HTTP 404 (HTTP 404, http_404)".
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';

describe('an endpoint that is not a Stele log', () => {
  let sb: Sandbox;
  let server: Server;
  let url = '';

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-not-a-log-');
    server = createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }, 120_000);

  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    sb?.cleanup();
  });

  it('says what answered is not a log API, and what to give instead', async () => {
    const r = await sb.run(['ledger', 'init', '--endpoint', url, '--trust-key', 'ab'.repeat(32)]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr.trim()).toBe(
      `stele: ${url}/api/ledger/key: HTTP 404, and no Stele error document: ${url} does not serve a Stele log API (a witness, a mirror or another server?); give the log's API as --endpoint, or read a copy of its tiles with --tiles`,
    );
    expect(r.stderr).not.toMatch(/http_404/);
  }, 60_000);
});
