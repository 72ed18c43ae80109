// Policy decisions, leases and key epochs through the HTTP API: Cedar allows and denies as
// written (also after a reload), every decision is in the ledger with a verifying inclusion
// proof, leases unwrap to the same DEK before and after a rotation, TTL bounds hold, and
// bad input on every route is a clear JSON error that records nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ControlClient } from '../../src/control/client.js';
import { type EpochRecord, KeyEpochs, verifyEpochChain } from '../../src/control/epochs.js';
import { unwrapLease } from '../../src/control/leases.js';
import { openControlState } from '../../src/control/mount.js';
import { AUDIT_DOMAIN, recordDigest, verifySigned } from '../../src/control/signing.js';
import { formatCheckpointBody } from '../../src/core/checkpoint.js';
import { hashFromHex, leafHash } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { openNote, parseVkey } from '../../src/core/note.js';
import { type ControlFixture, POLICIES, startControl } from './fixture.js';
import type { Json } from '../helpers/json.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('control-plane decisions', () => {
  let f: ControlFixture;
  let svc: string;
  let admin: string;
  let analyst: string;

  const evaluate = (body: unknown, token = svc) => f.call('POST', '/v1/policy/evaluate', { token, body });
  const lease = (body: unknown, token = svc) => f.call('POST', '/v1/access/lease', { token, body });

  /** All audit events so far (analyst with MFA). */
  async function events(): Promise<Json[]> {
    const out: Json[] = [];
    for await (const m of new ControlClient(f.srv.url, analyst).events({ follow: false })) out.push(JSON.parse(m.data));
    return out;
  }

  /** The ledger entry `id`: its digest, and an inclusion proof that verifies against a checkpoint signed by the log key. */
  async function expectAnchored(id: string, digest: string, type: string, result: string) {
    const r = await f.call('GET', `/api/ledger/entry?id=${id}`);
    expect(r.status).toBe(200);
    expect(r.body.entry).toMatchObject({ id, type, result, digest, scope: 'control' });
    const ok = verifyInclusion(
      r.body.leafIndex,
      r.body.treeSize,
      leafHash(hashFromHex(r.body.entry.proof.entryHash)),
      r.body.auditPath.map(hashFromHex),
      hashFromHex(r.body.rootHash),
    );
    expect(ok).toBe(true);
    const body = formatCheckpointBody({
      origin: r.body.checkpoint.logId,
      size: r.body.treeSize,
      root: hashFromHex(r.body.rootHash),
    });
    expect(openNote(r.body.checkpoint.note, parseVkey(f.srv.vkey)).body).toBe(body);
  }

  beforeAll(async () => {
    f = await startControl();
    [svc, admin, analyst] = await Promise.all([f.token('svc'), f.token('admin'), f.token('analyst')]);
  });
  afterAll(() => f?.close());

  describe('Cedar policies', () => {
    const cases: [string, string, string, string, string[]][] = [
      ['User::"alice"', 'Action::"read"', 'Document::"q3-report"', 'allow', ['staff-read-eng']],
      ['User::"alice"', 'Action::"read"', 'Document::"payroll"', 'deny', []],
      ['User::"bob"', 'Action::"read"', 'Document::"q3-report"', 'deny', ['deny-contractors']],
      ['User::"mallory"', 'Action::"read"', 'Document::"q3-report"', 'deny', []],
      ['User::"alice"', 'Action::"write"', 'Document::"q3-report"', 'deny', []],
    ];
    it.each(cases)('%s %s %s → %s', async (principal, action, resource, decision, reasons) => {
      const r = await evaluate({ principal, action, resource });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ decision, reasons });
      expect(r.body.decision_id).toMatch(/^dec_[0-9A-Z]{26}$/);
      expect(r.body.policy_version).toMatch(/^pv_[0-9a-f]{16}$/);
      expect(r.body.ledger_entry_id).toMatch(/^led_\d+_[0-9a-f]{12}$/);
    });

    it('accepts entity references as {type, id} objects and uses the context', async () => {
      const r = await evaluate({
        principal: { type: 'User', id: 'alice' },
        action: { type: 'Action', id: 'read' },
        resource: { type: 'Document', id: 'q3-report' },
        context: { ip: '10.0.0.1', n: 3 },
      });
      expect(r.body.decision).toBe('allow');
    });

    it('hot-reloads the policy set atomically, with a new version id', async () => {
      const before = await evaluate({
        principal: 'User::"alice"',
        action: 'Action::"read"',
        resource: 'Document::"payroll"',
      });
      expect(before.body.decision).toBe('deny');
      f.writePolicy(
        'finance.cedar',
        '@id("alice-payroll") permit (principal == User::"alice", action == Action::"read", resource == Document::"payroll");\n',
      );
      let after = before;
      for (let i = 0; i < 50 && after.body.policy_version === before.body.policy_version; i++) {
        await sleep(50);
        after = await evaluate({
          principal: 'User::"alice"',
          action: 'Action::"read"',
          resource: 'Document::"payroll"',
        });
      }
      expect(after.body.policy_version).not.toBe(before.body.policy_version);
      expect(after.body).toMatchObject({ decision: 'allow', reasons: ['alice-payroll'] });
      // The other policies are unchanged by the reload.
      expect(
        (await evaluate({ principal: 'User::"bob"', action: 'Action::"read"', resource: 'Document::"q3-report"' })).body
          .decision,
      ).toBe('deny');

      // A broken file is refused: the previous set stays active, same version.
      f.writePolicy('broken.cedar', 'permit (principal, action, resource) when { ;\n');
      await sleep(400);
      const still = await evaluate({
        principal: 'User::"alice"',
        action: 'Action::"read"',
        resource: 'Document::"payroll"',
      });
      expect(still.body).toMatchObject({ decision: 'allow', policy_version: after.body.policy_version });

      // Fixing it (removing the permit) loads again and the decision follows the new text.
      f.writePolicy('broken.cedar', '@id("no-payroll") forbid (principal, action, resource == Document::"payroll");\n');
      let last = still;
      for (let i = 0; i < 50 && last.body.policy_version === still.body.policy_version; i++) {
        await sleep(50);
        last = await evaluate({
          principal: 'User::"alice"',
          action: 'Action::"read"',
          resource: 'Document::"payroll"',
        });
      }
      expect(last.body).toMatchObject({ decision: 'deny', reasons: ['no-payroll'] });
      f.writePolicy('broken.cedar', '');
      f.writePolicy('finance.cedar', '');
      f.writePolicy('policies.cedar', POLICIES);
    });

    it('anchors every decision: the ledger entry holds the digest of the audited record, and its proof verifies', async () => {
      await sleep(300);
      const evs = (await events()).filter((e) => e.type === 'policy_evaluation');
      expect(evs.length).toBeGreaterThanOrEqual(cases.length + 3);
      for (const e of evs) {
        expect(recordDigest(e.record)).toBe(e.digest);
        await expectAnchored(
          e.ledger_entry_id,
          e.digest,
          'policy_evaluation',
          e.record.decision === 'allow' ? 'Allow' : 'Deny',
        );
      }
    });
  });

  describe('leases and key epochs', () => {
    async function unwrap(leaseId: string, wrapped: string) {
      const state = await openControlState(f.controlDir, {});
      const epochs = await KeyEpochs.readOnly(state.epochStore, state.signer, state.kek, pino({ level: 'silent' }));
      return Buffer.from((await unwrapLease(epochs, leaseId, wrapped)).dek).toString('hex');
    }

    it('issues a lease on allow: lse_ id, base64url wrapped DEK, expiry, epoch, decision and ledger entry', async () => {
      const t0 = Date.now();
      const r = await lease({ doc_id: 'q3-report', compartment: 'demo', ttl: '600s' });
      expect(r.status).toBe(201);
      expect(r.body.lease_id).toMatch(/^lse_[0-9A-Z]{26}$/);
      expect(r.body.wrapped_dek).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Date.parse(r.body.expires) - t0).toBeGreaterThan(598_000);
      expect(Date.parse(r.body.expires) - t0).toBeLessThan(602_000);
      expect(r.body.expires).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(r.body.decision_id).toMatch(/^dec_/);
      const digest = (await events()).find((e) => e.ledger_entry_id === r.body.ledger_entry_id)!.digest;
      await expectAnchored(r.body.ledger_entry_id, digest, 'access_decision', 'Granted');
    });

    it('denies by policy with 403, the decision id and its ledger entry; no DEK is issued', async () => {
      for (const body of [
        { doc_id: 'q3-report', compartment: 'finance' },
        { doc_id: 'launch-codes', compartment: 'demo' },
      ]) {
        const r = await lease(body);
        expect(r.status).toBe(403);
        expect(r.body.error).toMatchObject({ code: 'access_denied' });
        expect(r.body.error.decision_id).toMatch(/^dec_/);
        expect(r.body).not.toHaveProperty('wrapped_dek');
        const ev = (await events()).find((e) => e.ledger_entry_id === r.body.error.ledger_entry_id)!;
        expect(ev.record).toMatchObject({ decision: 'deny', decision_id: r.body.error.decision_id });
        expect(ev.record).not.toHaveProperty('lease');
        await expectAnchored(ev.ledger_entry_id, ev.digest, 'access_decision', 'Denied');
      }
    });

    it('enforces the TTL bounds (30s..3600s, default 300s) with 400', async () => {
      for (const ttl of ['29s', '3601s', '0s', '-5s', '300', '5m', 'abc', '1e3s', 300, '']) {
        const r = await lease({ doc_id: 'q3-report', compartment: 'demo', ttl });
        expect(r.status, String(ttl)).toBe(400);
        expect(r.body.error.code).toBe('invalid_ttl');
        expect(r.body.error.message).toMatch(/30s to 3600s \(default 300s\)/);
      }
      for (const ttl of ['30s', '3600s'])
        expect((await lease({ doc_id: 'q3-report', compartment: 'demo', ttl })).status).toBe(201);
      const d = await lease({ doc_id: 'q3-report', compartment: 'demo' });
      expect(Math.abs(Date.parse(d.body.expires) - Date.now() - 300_000)).toBeLessThan(3_000);
    });

    it('unwraps a lease to the same DEK with its epoch KEK before and after a rotation, until the epoch is retired', async () => {
      const a = (await lease({ doc_id: 'q3-report', compartment: 'demo', ttl: '900s' })).body;
      const b = (await lease({ doc_id: 'q3-report', compartment: 'demo', ttl: '900s' })).body;
      const epochBefore = a.epoch;
      const deka = await unwrap(a.lease_id, a.wrapped_dek);
      expect(deka).toMatch(/^[0-9a-f]{64}$/);
      expect(await unwrap(a.lease_id, a.wrapped_dek)).toBe(deka);
      expect(await unwrap(b.lease_id, b.wrapped_dek)).not.toBe(deka); // a fresh DEK per lease
      // Bound to its lease: another lease id does not unwrap it.
      await expect(unwrap(b.lease_id, a.wrapped_dek)).rejects.toThrow(/does not authenticate/);

      const rot = await f.call('POST', '/v1/keys/rotate', { token: admin, body: {} });
      expect(rot.status).toBe(201);
      expect(rot.body.epoch).toMatchObject({ epoch: epochBefore + 1, status: 'current', created_by: 'admin' });
      expect(rot.body.ledger_entry_id).toMatch(/^led_/);
      await expectAnchored(rot.body.ledger_entry_id, rot.body.epoch.record_hash, 'key_epoch', 'Rotated');

      // The old lease still unwraps to the same DEK; new leases use the new epoch.
      expect(await unwrap(a.lease_id, a.wrapped_dek)).toBe(deka);
      const c = (await lease({ doc_id: 'q3-report', compartment: 'demo' })).body;
      expect(c.epoch).toBe(epochBefore + 1);
      expect(c.kek_id).not.toBe(a.kek_id);
      const dekc = await unwrap(c.lease_id, c.wrapped_dek);

      // Retiring the older epochs: their leases stop unwrapping, the current one's do not.
      const retire = await f.call('POST', '/v1/keys/rotate', {
        token: admin,
        body: { retire_before: epochBefore + 1 },
      });
      expect(retire.status).toBe(201);
      expect(retire.body.epoch.retires).toEqual(Array.from({ length: epochBefore }, (_, i) => i + 1));
      await expect(unwrap(a.lease_id, a.wrapped_dek)).rejects.toThrow(/retired/);
      expect(await unwrap(c.lease_id, c.wrapped_dek)).toBe(dekc);
    });

    it('lists the signed epoch chain; each record verifies, links to the previous one and is anchored', async () => {
      const r = await f.call('GET', '/v1/keys/epochs', { token: analyst });
      expect(r.status).toBe(200);
      const epochs: (EpochRecord & { record_hash: string; ledger_entry_id: string; status: string })[] = r.body.epochs;
      // Epoch 1 (created at start), 2 (rotation), 3 (rotation retiring epoch 1).
      expect(epochs.length).toBe(3);
      expect(r.body.current).toBe(3);
      const key = new Uint8Array(Buffer.from(r.body.signer.public_key, 'base64'));
      expect(verifyEpochChain(epochs, key)).toEqual([]);
      expect(epochs.map((e) => e.status)).toEqual(['retired', 'active', 'current']);
      expect(epochs[2]!.retires).toEqual([1]);
      for (const e of epochs)
        await expectAnchored(e.ledger_entry_id, e.record_hash, 'key_epoch', e.epoch === 1 ? 'Created' : 'Rotated');
      // A tampered record is detected.
      const bad = epochs.map((e) => ({ ...e }));
      (bad[1] as { kek_id: string }).kek_id = 'local:kek_01AAAAAAAAAAAAAAAAAAAAAAAA';
      expect(verifyEpochChain(bad, key).join()).toMatch(/epoch 2: signature does not verify/);
    });
  });

  describe('bad input', () => {
    it('answers clear JSON errors on every route and records nothing as allowed', async () => {
      const before = await events();
      const ledgerBefore = (await f.call('GET', '/api/ledger/checkpoint')).body.lifetimeEntries;
      const P = 'User::"alice"';
      const A = 'Action::"read"';
      const R = 'Document::"q3-report"';
      const cases: [
        string,
        string,
        { body?: unknown; headers?: Record<string, string>; token?: string },
        number,
        string,
      ][] = [
        ['POST', '/v1/policy/evaluate', {}, 400, 'missing_body'],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: '{"principal":', headers: { 'content-type': 'application/json' } },
          400,
          'invalid_json',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: 'principal=alice', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
          415,
          'unsupported_media_type',
        ],
        ['POST', '/v1/policy/evaluate', { body: [P, A, R] }, 400, 'invalid_body'],
        ['POST', '/v1/policy/evaluate', { body: { action: A, resource: R } }, 400, 'missing_principal'],
        ['POST', '/v1/policy/evaluate', { body: { principal: P, resource: R } }, 400, 'missing_action'],
        ['POST', '/v1/policy/evaluate', { body: { principal: P, action: A } }, 400, 'missing_resource'],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, extra: 1 } },
          400,
          'unknown_field',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: 'alice', action: A, resource: R } },
          400,
          'invalid_principal',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: { type: 'User' }, action: A, resource: R } },
          400,
          'invalid_principal',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: { type: '1User', id: 'a' }, action: A, resource: R } },
          400,
          'invalid_principal',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: 'Document::"read"', resource: R } },
          400,
          'invalid_action',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, context: [] } },
          400,
          'invalid_context',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, context: { x: null } } },
          400,
          'invalid_context',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, context: { x: 1.5 } } },
          400,
          'invalid_context',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, context: { x: { __extn: { fn: 'nope', arg: 'x' } } } } },
          400,
          'invalid_request',
        ],
        [
          'POST',
          '/v1/policy/evaluate',
          { body: { principal: P, action: A, resource: R, context: { pad: 'x'.repeat(20_000) } } },
          413,
          'body_too_large',
        ],
        ['GET', '/v1/policy/evaluate', {}, 405, 'method_not_allowed'],
        ['POST', '/v1/access/lease', { body: {} }, 400, 'missing_doc_id'],
        ['POST', '/v1/access/lease', { body: { doc_id: 'q3-report' } }, 400, 'missing_compartment'],
        ['POST', '/v1/access/lease', { body: { doc_id: '', compartment: 'demo' } }, 400, 'invalid_doc_id'],
        ['POST', '/v1/access/lease', { body: { doc_id: 5, compartment: 'demo' } }, 400, 'invalid_doc_id'],
        ['POST', '/v1/access/lease', { body: { doc_id: 'a\nb', compartment: 'demo' } }, 400, 'invalid_doc_id'],
        ['POST', '/v1/access/lease', { body: { doc_id: 'x'.repeat(257), compartment: 'demo' } }, 400, 'invalid_doc_id'],
        [
          'POST',
          '/v1/access/lease',
          { body: { doc_id: 'q3-report', compartment: ['demo'] } },
          400,
          'invalid_compartment',
        ],
        [
          'POST',
          '/v1/access/lease',
          { body: { doc_id: 'q3-report', compartment: 'demo', ttl: '1s' } },
          400,
          'invalid_ttl',
        ],
        [
          'POST',
          '/v1/access/lease',
          { body: { doc_id: 'q3-report', compartment: 'demo', dek: 'mine' } },
          400,
          'unknown_field',
        ],
        [
          'POST',
          '/v1/access/lease',
          { body: 'null', headers: { 'content-type': 'application/json' } },
          400,
          'invalid_body',
        ],
        ['GET', '/v1/access/lease', {}, 405, 'method_not_allowed'],
        ['POST', '/v1/keys/rotate', { token: 'admin', body: { retire_before: 'all' } }, 400, 'invalid_retire_before'],
        ['POST', '/v1/keys/rotate', { token: 'admin', body: { retire_before: 999 } }, 400, 'invalid_retire_before'],
        ['POST', '/v1/keys/rotate', { token: 'admin', body: { epoch: 7 } }, 400, 'unknown_field'],
        [
          'POST',
          '/v1/keys/rotate',
          { token: 'admin', body: '{', headers: { 'content-type': 'application/json' } },
          400,
          'invalid_json',
        ],
        ['GET', '/v1/keys/rotate', { token: 'admin' }, 405, 'method_not_allowed'],
        ['GET', '/v1/keys/epochs?page=2', {}, 400, 'unknown_parameter'],
        ['POST', '/v1/keys/epochs', {}, 405, 'method_not_allowed'],
        ['GET', '/v1/audit/events?type=everything', { token: 'analyst' }, 400, 'invalid_type'],
        ['GET', '/v1/audit/events?since=yesterday', { token: 'analyst' }, 400, 'invalid_since'],
        [
          'GET',
          '/v1/audit/events?since=2030-01-01T00:00:00Z&until=2029-01-01T00:00:00Z',
          { token: 'analyst' },
          400,
          'invalid_until',
        ],
        ['GET', '/v1/audit/events?follow=maybe', { token: 'analyst' }, 400, 'invalid_follow'],
        ['GET', '/v1/audit/events?limit=5', { token: 'analyst' }, 400, 'unknown_parameter'],
        [
          'GET',
          '/v1/audit/events',
          { token: 'analyst', headers: { 'last-event-id': 'abc' } },
          400,
          'invalid_last_event_id',
        ],
        [
          'GET',
          '/v1/audit/events',
          { token: 'analyst', headers: { 'last-event-id': '99999999' } },
          400,
          'invalid_last_event_id',
        ],
        ['POST', '/v1/audit/events', { token: 'analyst' }, 405, 'method_not_allowed'],
        ['GET', '/v1/nothing-here', {}, 404, 'not_found'],
        ['GET', '/v1', {}, 404, 'not_found'],
      ];
      const tokens: Record<string, string> = { svc, admin, analyst };
      for (const [method, path, o, status, code] of cases) {
        const r = await f.call(method, path, { ...o, token: tokens[o.token ?? 'svc'] });
        expect(r.status, `${method} ${path} ${JSON.stringify(o.body)?.slice(0, 80)}: ${JSON.stringify(r.body)}`).toBe(
          status,
        );
        expect(r.headers.get('content-type')).toMatch(/^application\/json/);
        expect(r.body.error.code, `${method} ${path}`).toBe(code);
        expect(typeof r.body.error.message).toBe('string');
        expect(r.body.error.message.length).toBeGreaterThan(8);
      }
      await sleep(200);
      // Nothing was recorded for malformed requests: no ledger entry, no audit event.
      expect((await f.call('GET', '/api/ledger/checkpoint')).body.lifetimeEntries).toBe(ledgerBefore);
      const after = await events();
      expect(after.length).toBe(before.length);
      // And across the whole run, every "allowed" record is a well-formed decision.
      for (const e of after) {
        if (e.record.decision === 'allow') expect(['policy_evaluation', 'access_decision']).toContain(e.type);
        if (e.type === 'access_decision' && e.record.decision === 'allow')
          expect(e.record.lease.lease_id).toMatch(/^lse_/);
      }
    });

    it('leaves the ledger routes to the ledger', async () => {
      expect((await f.call('GET', '/api/ledger/checkpoint')).status).toBe(200);
      expect((await f.call('GET', '/api/ledger/nope')).body.error.code).toBe('not_found');
      const doc = await f.call('GET', '/v1/openapi.json');
      expect(doc.status).toBe(200);
      expect(doc.body.openapi).toBe('3.1.0');
      expect(Object.keys(doc.body.paths).sort()).toEqual([
        '/v1/access/lease',
        '/v1/audit/events',
        '/v1/keys/epochs',
        '/v1/keys/rotate',
        '/v1/openapi.json',
        '/v1/policy/evaluate',
      ]);
    });
  });

  it('signs every audit event with the key listed at /v1/keys/epochs', async () => {
    const key = new Uint8Array(
      Buffer.from((await f.call('GET', '/v1/keys/epochs', { token: analyst })).body.signer.public_key, 'base64'),
    );
    const evs = await events();
    expect(evs.length).toBeGreaterThan(20);
    evs.forEach((e, i) => {
      expect(e.id).toBe(i + 1);
      expect(verifySigned(AUDIT_DOMAIN, e, key)).toBe(true);
    });
  });
});
