// The request log: one JSON line per request only at --log-level debug (at info, the
// default, /metrics counts requests and the log keeps start, stop and errors), and never a
// bearer token.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { digestOf, postAnchor, startTestServer } from './server.js';

/** A server whose log lines, at `level`, are collected. */
async function serveLogging(level: string) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const server = await startTestServer({}, pino({ level }, sink));
  return { server, requests: () => lines.filter((l) => l.msg === 'request') };
}

describe('the request log', () => {
  it('is off at info (the default): requests leave no line', async () => {
    const { server, requests } = await serveLogging('info');
    try {
      expect((await postAnchor(server.url, { digest: digestOf(1) })).status).toBe(201);
      expect((await fetch(`${server.url}/api/ledger/checkpoint`)).status).toBe(200);
      expect(requests()).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('at debug has one line per request: method, path, status and time, and no token', async () => {
    const { server, requests } = await serveLogging('debug');
    try {
      const auth = { authorization: 'Bearer s3cret-token-value' };
      expect((await postAnchor(server.url, { digest: digestOf(2) }, auth)).status).toBe(201);
      expect((await fetch(`${server.url}/api/ledger/entry?id=nope`)).status).toBe(400);
      expect(requests()).toEqual([
        expect.objectContaining({ method: 'POST', path: '/api/ledger/anchor', status: 201, ms: expect.any(Number) }),
        expect.objectContaining({ method: 'GET', path: '/api/ledger/entry', status: 400 }),
      ]);
      expect(JSON.stringify(requests())).not.toContain('s3cret');
    } finally {
      await server.close();
    }
  });
});
