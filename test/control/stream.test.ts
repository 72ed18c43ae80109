// The audit stream over SSE: resuming with Last-Event-ID gives every later event exactly
// once (also across a server restart), filters by type and time, and every event's
// signature and record digest verify.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { AuditEvent } from '../../src/control/audit.js';
import { ControlClient, SseParser } from '../../src/control/client.js';
import { AUDIT_DOMAIN, recordDigest, verifySigned } from '../../src/control/signing.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { startServer } from '../../src/serve/log-server.js';
import { SERVE_DEFAULTS } from '../../src/serve/config.js';
import { type ControlFixture, startControl } from './fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const EVAL = { principal: 'User::"alice"', action: 'Action::"read"', resource: 'Document::"q3-report"' };

describe('audit stream (SSE)', () => {
  let f: ControlFixture;
  let svc: string;
  let analyst: string;
  let key: Uint8Array;

  const decide = async (n: number): Promise<number[]> => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = await f.call('POST', '/v1/policy/evaluate', { token: svc, body: EVAL });
      expect(r.status).toBe(200);
      ids.push(r.body.audit_event_id);
    }
    return ids;
  };

  const check = (e: AuditEvent) => {
    expect(verifySigned(AUDIT_DOMAIN, e as unknown as Record<string, unknown>, key)).toBe(true);
    expect(recordDigest(e.record)).toBe(e.digest);
    expect(e.ledger_entry_id).toMatch(/^led_\d+_[0-9a-f]{12}$/);
  };

  /** Reads a following stream until an event with id ≥ `until`, then disconnects. */
  async function readUntil(
    client: ControlClient,
    until: number,
    lastEventId?: string,
    during?: () => Promise<unknown>,
  ): Promise<AuditEvent[]> {
    const ac = new AbortController();
    const got: AuditEvent[] = [];
    const work = during?.();
    for await (const m of client.events({ signal: ac.signal, ...(lastEventId !== undefined ? { lastEventId } : {}) })) {
      const e = JSON.parse(m.data) as AuditEvent;
      expect(m.id).toBe(String(e.id));
      expect(m.event).toBe(e.type);
      got.push(e);
      if (e.id >= until) {
        ac.abort();
        break;
      }
    }
    await work;
    return got;
  }

  beforeAll(async () => {
    f = await startControl();
    [svc, analyst] = await Promise.all([f.token('svc'), f.token('analyst')]);
    const ep = await f.call('GET', '/v1/keys/epochs', { token: analyst });
    key = new Uint8Array(Buffer.from(ep.body.signer.public_key, 'base64'));
  });
  afterAll(() => f?.close());

  it('resumes from Last-Event-ID without gaps or duplicates, with live events arriving meanwhile', async () => {
    const first = await decide(8);
    const client = new ControlClient(f.srv.url, analyst);
    const part1 = await readUntil(client, first[4]!);
    expect(part1.map((e) => e.id)).toEqual(Array.from({ length: first[4]! }, (_, i) => i + 1));

    // Disconnected: more decisions happen.
    const offline = await decide(6);
    // Reconnect after the last event received; more decisions arrive while replaying.
    let live: number[] = [];
    const part2 = await readUntil(client, offline.at(-1)! + 5, String(part1.at(-1)!.id), async () => {
      await sleep(20);
      live = await decide(5);
    });
    expect(live.at(-1)).toBe(offline.at(-1)! + 5);
    const all = [...part1, ...part2];
    const ids = all.map((e) => e.id);
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of [...first, ...offline, ...live]) expect(ids).toContain(id);
    all.forEach(check);
  });

  it('honours the Last-Event-ID header exactly as a browser EventSource sends it on reconnect', async () => {
    const res = await fetch(`${f.srv.url}/v1/audit/events?follow=false`, {
      headers: { authorization: `Bearer ${analyst}`, 'last-event-id': '3', accept: 'text/event-stream' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const msgs = new SseParser().push(await res.text());
    expect(msgs[0]!.id).toBe('4');
    const ids = msgs.map((m) => Number(m.id));
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 4));
    // ?after= is the same for the first connection.
    const q = await fetch(`${f.srv.url}/v1/audit/events?follow=false&after=${ids.at(-1)! - 2}`, {
      headers: { authorization: `Bearer ${analyst}` },
    });
    expect(new SseParser().push(await q.text()).map((m) => Number(m.id))).toEqual([ids.at(-1)! - 1, ids.at(-1)!]);
  });

  it('filters by type and by time', async () => {
    const client = new ControlClient(f.srv.url, analyst);
    const all: AuditEvent[] = [];
    for await (const m of client.events({ follow: false })) all.push(JSON.parse(m.data));
    const types = new Set(all.map((e) => e.type));
    expect(types).toContain('key_epoch');
    expect(types).toContain('policy_evaluation');

    const epochs: AuditEvent[] = [];
    for await (const m of client.events({ follow: false, type: 'key_epoch' })) epochs.push(JSON.parse(m.data));
    expect(epochs.map((e) => e.id)).toEqual(all.filter((e) => e.type === 'key_epoch').map((e) => e.id));

    const mid = all[Math.floor(all.length / 2)]!;
    const later: AuditEvent[] = [];
    for await (const m of client.events({ follow: false, since: mid.time, type: 'policy_evaluation,access_decision' }))
      later.push(JSON.parse(m.data));
    expect(later.length).toBeGreaterThan(0);
    expect(later.every((e) => e.time >= mid.time && e.type !== 'key_epoch')).toBe(true);
    expect(later.map((e) => e.id)).toEqual(
      all.filter((e) => e.time >= mid.time && e.type !== 'key_epoch').map((e) => e.id),
    );

    // A window in the past ends by itself even when following.
    const window: AuditEvent[] = [];
    for await (const m of client.events({ since: all[0]!.time, until: mid.time, reconnect: false }))
      window.push(JSON.parse(m.data));
    expect(window.map((e) => e.id)).toEqual(all.filter((e) => e.time < mid.time).map((e) => e.id));
  });

  it('keeps numbering and resumes across a restart; an open stream does not block shutdown', async () => {
    const before = await decide(3);
    const client = new ControlClient(f.srv.url, analyst);
    // A stream left open while the server shuts down.
    const ac = new AbortController();
    const open = (async () => {
      let n = 0;
      try {
        for await (const _ of client.events({ signal: ac.signal, reconnect: false })) n++;
      } catch {
        // the connection closes with the server
      }
      return n;
    })();
    await sleep(100);
    // Decisions still being made when the shutdown starts are either refused (503) or
    // anchored and audited: never anchored without their audit event.
    const inflight = Array.from({ length: 20 }, () =>
      f.call('POST', '/v1/policy/evaluate', { token: svc, body: EVAL }).catch(() => null),
    );
    await sleep(5);
    const t0 = Date.now();
    await f.srv.close();
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(await open).toBeGreaterThanOrEqual(before.at(-1)!);

    const srv: RunningServer = await startServer(
      {
        ...SERVE_DEFAULTS,
        dataDir: f.dataDir,
        origin: 'api.test/log',
        port: 0,
        batchIntervalMs: 5,
        fsync: false,
        enterprise: true,
      },
      pino({ level: 'silent' }),
    );
    f.srv = srv;
    const answered = (await Promise.all(inflight))
      .filter((r) => r?.status === 200)
      .map((r) => r!.body.audit_event_id as number);
    const last = Math.max(before.at(-1)!, ...answered);
    const after = await decide(2);
    expect(after).toEqual([last + 1, last + 2]);
    // Every entry of this log is a control-plane record, and each has exactly one audit event.
    const cp = await f.call('GET', '/api/ledger/checkpoint');
    expect(cp.body.treeSize).toBe(after.at(-1));
    const resumed: AuditEvent[] = [];
    for await (const m of new ControlClient(srv.url, analyst).events({ follow: false, lastEventId: String(before[0]) }))
      resumed.push(JSON.parse(m.data));
    expect(resumed.map((e) => e.id)).toEqual(
      Array.from({ length: after.at(-1)! - before[0]! }, (_, i) => before[0]! + 1 + i),
    );
    resumed.forEach(check);
  });
});
