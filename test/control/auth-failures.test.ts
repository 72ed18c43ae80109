// Failed authentication cannot fill the log (issue 16): junk tokens from one source are
// audited as one entry at once and one summary per window, whatever their number; tokens
// that can never verify are refused (401) before the identity provider is asked, so an
// unreachable issuer does not turn them into a 503.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthFailureAggregator, type FailureRecord } from '../../src/control/auth-failures.js';
import { ControlClient } from '../../src/control/client.js';
import { getJson } from '../api/server.js';
import { rawExchange, rawRequest } from '../helpers/raw-http.js';
import { type ControlFixture, startControl } from './fixture.js';

interface FailureEvent {
  readonly type: string;
  readonly ledger_entry_id: string;
  readonly record: { readonly count: number; readonly reasons?: Record<string, number>; readonly window_start: string };
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('AuthFailureAggregator', () => {
  const failure = (address: string, reason = 'malformed_token') => ({
    address,
    reason,
    method: 'POST',
    path: '/v1/policy/evaluate',
  });

  it('records the first failure of a window at once and the rest as one summary when it ends', () => {
    let now = 1_000_000;
    const records: FailureRecord[] = [];
    const agg = new AuthFailureAggregator((r) => records.push(r), {
      windowMs: 60_000,
      maxSources: 10,
      now: () => now,
      tickMs: 3_600_000,
    });
    for (let i = 0; i < 1000; i++)
      agg.add(failure('10.0.0.1', i % 3 === 0 ? 'algorithm_not_allowed' : 'malformed_token'));
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ count: 1, remote_address: '10.0.0.1', reason: 'algorithm_not_allowed' });
    now += 59_999;
    agg.flush(false);
    expect(records).toHaveLength(1);
    now += 1;
    agg.flush(false);
    expect(records).toHaveLength(2);
    expect(records[1]).toMatchObject({
      count: 999,
      remote_address: '10.0.0.1',
      reasons: { malformed_token: 666, algorithm_not_allowed: 333 },
      reason: 'malformed_token',
    });
    // The next window starts afresh.
    agg.add(failure('10.0.0.1'));
    expect(records).toHaveLength(3);
    agg.close();
  });

  it('bounds the entries per window whatever the number of sources', () => {
    const now = 5_000_000;
    const records: FailureRecord[] = [];
    const agg = new AuthFailureAggregator((r) => records.push(r), {
      windowMs: 60_000,
      maxSources: 5,
      now: () => now,
      tickMs: 3_600_000,
    });
    for (let s = 0; s < 500; s++) for (let i = 0; i < 3; i++) agg.add(failure(`2001:db8::${s.toString(16)}`));
    agg.close();
    // 5 sources: an entry at once and a summary each; the other 495 sources share one summary.
    expect(records).toHaveLength(2 * 5 + 1);
    const others = records.find((r) => r.remote_address === 'other sources');
    expect(others).toMatchObject({ count: 495 * 3 });
    const total = records.reduce((n, r) => n + (r.count as number), 0);
    expect(total).toBe(1500);
  });
});

describe('authentication failures on /v1', () => {
  let f: ControlFixture;
  beforeAll(async () => {
    f = await startControl();
  }, 60_000);
  afterAll(() => f?.close());

  const failureEvents = async () => {
    const analyst = new ControlClient(f.srv.url, await f.token('analyst'));
    const events: FailureEvent[] = [];
    for await (const m of analyst.events({ follow: false, type: 'authentication_failure' }))
      events.push(JSON.parse(m.data) as FailureEvent);
    return events.filter((e) => e.type === 'authentication_failure');
  };

  it('turns 300 junk tokens from one address into two ledger entries per window that count them all', async () => {
    const before = (await getJson(`${f.srv.url}/api/ledger/checkpoint`)).body.lifetimeEntries;
    const known = (await failureEvents()).length;
    // The fixture's window is 1 s: the burst spans a few windows on a busy machine.
    const started = Date.now();
    const statuses = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        f.call('POST', '/v1/policy/evaluate', { token: `junk.${i}.token`, body: {} }).then((r) => r.status),
      ),
    );
    expect(statuses.every((s) => s === 401)).toBe(true);
    const windows = Math.ceil((Date.now() - started) / 1000) + 1;
    let events: FailureEvent[] = [];
    for (let i = 0; i < 50; i++) {
      await sleep(200);
      events = (await failureEvents()).slice(known);
      if (events.reduce((n, e) => n + e.record.count, 0) >= 300) break;
    }
    expect(events.reduce((n, e) => n + e.record.count, 0)).toBe(300);
    // At most 2 entries per window (the first failure, then one summary), not one per failure.
    expect(events.length).toBeGreaterThanOrEqual(2);
    expect(events.length).toBeLessThanOrEqual(2 * windows);
    expect(new Set(events.map((e) => e.record.window_start)).size).toBe(
      events.filter((e) => e.record.count === 1 && !e.record.reasons).length,
    );
    for (const e of events) expect(e.ledger_entry_id).toMatch(/^led_/);
    const after = (await getJson(`${f.srv.url}/api/ledger/checkpoint`)).body.lifetimeEntries;
    // The analyst's reads add nothing; only the failure entries were appended.
    expect(after - before).toBe(events.length);
  }, 60_000);

  it('answers /v1 at the same edge: JSON 405 for methods no route takes, 415 for encodings and charsets', async () => {
    const cases: [Buffer, number, string][] = [
      [rawRequest('TRACE', '/v1/policy/evaluate'), 405, 'method_not_allowed'],
      [rawRequest('PROPFIND', '/v1/audit/events'), 405, 'method_not_allowed'],
      [
        rawRequest('POST', '/v1/policy/evaluate', {
          headers: ['Content-Type: application/json', 'Content-Encoding: gzip'],
          body: '{}',
        }),
        415,
        'unsupported_encoding',
      ],
      [
        rawRequest('POST', '/v1/policy/evaluate', {
          headers: ['Content-Type: application/json; charset=utf-16'],
          body: '{}',
        }),
        415,
        'unsupported_charset',
      ],
      [rawRequest('GET', '/v1/keys/epochs', { headers: [`X-Big: ${'a'.repeat(20_000)}`] }), 431, 'headers_too_large'],
    ];
    for (const [req, status, code] of cases) {
      const r = await rawExchange(f.srv.url, req);
      expect(r.status).toBe(status);
      expect(r.json).toEqual({ error: { code, message: expect.any(String) } });
    }
  }, 60_000);

  it('refuses tokens that can never verify with 401 while the identity provider is down', async () => {
    const header = { typ: 'at+jwt', kid: 'k1' };
    const payload = b64({ sub: 'x', exp: Math.floor(Date.now() / 1000) + 600 });
    await f.idp.close();
    const cases: [string, string][] = [
      [`${b64({ ...header, alg: 'none' })}.${payload}.`, 'algorithm_not_allowed'],
      [`${b64({ ...header, alg: 'HS256' })}.${payload}.c2ln`, 'algorithm_not_allowed'],
      [`${b64({ ...header, alg: 'ES256', kid: 42 })}.${payload}.c2ln`, 'malformed_token'],
      [`${b64({ ...header, alg: 'ES256' })}.bm90LWpzb24.c2ln`, 'malformed_token'],
      ['only-one-part', 'malformed_token'],
    ];
    for (const [token, reason] of cases) {
      const r = await f.call('POST', '/v1/policy/evaluate', { token, body: {} });
      expect(r.status, `${reason}: ${JSON.stringify(r.body)}`).toBe(401);
      expect(r.body.error.reason).toBe(reason);
    }
    // The scheme is case-insensitive here too.
    const lower = await f.call('POST', '/v1/policy/evaluate', {
      body: {},
      headers: { authorization: `bearer ${b64({ ...header, alg: 'none' })}.${payload}.` },
    });
    expect(lower.body.error.reason).toBe('algorithm_not_allowed');
  }, 60_000);
});
