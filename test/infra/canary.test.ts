// The Synthetics canary's script (infra/canary.ts), the very text the stack deploys, run
// here as the Node.js canary runtime runs it (a CommonJS module whose handler's promise
// passes or fails the run) against a local server standing in for CloudFront: a fresh
// checkpoint passes; an old one, an error status and a body that is not checkpoint.json fail.
import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANARY_SCRIPT } from '../../infra/canary.js';

let server: Server;
let base: string;
let reply: { status: number; body: string } = { status: 200, body: '' };
let requests: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.writeHead(reply.status, { 'content-type': 'application/json' });
    res.end(reply.body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Loads the script as a fresh module with the canary's environment and runs its handler once. */
function runCanary(maxAgeSeconds: number): Promise<string> {
  const module = { exports: {} as { handler?: () => Promise<string> } };
  const env = { CHECKPOINT_URL: `${base}/checkpoint.json`, MAX_AGE_SECONDS: String(maxAgeSeconds) };
  runInNewContext(CANARY_SCRIPT, {
    module,
    exports: module.exports,
    process: { env },
    fetch,
    Date,
    JSON,
    Number,
    Math,
  });
  return module.exports.handler!();
}

const checkpointJson = (ageSeconds: number, size = 42) =>
  JSON.stringify({
    note: `example.com/log\n${size}\nq7mJv9h5mD7w2c0Z9QJ0f4mC8sVn0z3nA3bD1jN7mQs=\n\n— example.com/log AAAA\n`,
    timestamp: new Date(Date.now() - ageSeconds * 1000).toISOString(),
  });

describe('the checkpoint freshness canary', () => {
  it('passes on a fresh checkpoint, fetched through the URL it is given', async () => {
    requests = [];
    reply = { status: 200, body: checkpointJson(5, 1234) };
    await expect(runCanary(60)).resolves.toMatch(/^size 1234, published [0-9]+ s ago$/);
    expect(requests).toEqual(['/checkpoint.json']);
  });

  it('fails on a checkpoint older than the threshold, naming its size and age', async () => {
    reply = { status: 200, body: checkpointJson(600, 77) };
    await expect(runCanary(300)).rejects.toThrow(/the checkpoint \(size 77\) is 60[0-9] s old, more than 300 s/);
  });

  it('fails on an error status and on a body that is not checkpoint.json', async () => {
    reply = { status: 503, body: '' };
    await expect(runCanary(300)).rejects.toThrow(/HTTP 503/);
    reply = { status: 200, body: '<html>' };
    await expect(runCanary(300)).rejects.toThrow(/not JSON/);
    reply = { status: 200, body: JSON.stringify({ treeSize: 3 }) };
    await expect(runCanary(300)).rejects.toThrow(/not a checkpoint.json/);
  });
});
