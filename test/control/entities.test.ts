// Entity slicing (src/policy/entities.ts): the policy engine hands Cedar only the entities a
// request can reach. Its decisions, reasons and errors must be exactly those of Cedar given
// the whole store, for policies that walk parents, attribute and tag references, entity
// literals in conditions and entities named in the context.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { EntitySlicer } from '../../src/policy/entities.js';
import { PolicyEngine, type EntityRef } from '../../src/policy/cedar.js';
import { scratchDir } from '../helpers/tmp.js';

const POLICIES = `
@id("staff-read") permit (principal in Group::"staff", action == Action::"read", resource) when { resource.dept == "eng" };
@id("owner-manager") permit (principal, action == Action::"approve", resource) when { resource.owner.manager == principal };
@id("tagged") permit (principal, action == Action::"tag", resource) when { resource.hasTag("steward") && resource.getTag("steward") in principal.teams };
@id("switch") forbid (principal, action, resource) unless { Flag::"kill".on == false };
@id("delegate") permit (principal, action == Action::"delegate", resource) when { context.for in Group::"eng" && context.for.level > 2 };
@id("broken") permit (principal, action == Action::"read", resource) when { resource.missing == 1 };
`;
const ENTITIES: cedar.EntityJson[] = [
  { uid: { type: 'Group', id: 'all' }, attrs: {}, parents: [] },
  { uid: { type: 'Group', id: 'staff' }, attrs: {}, parents: [{ type: 'Group', id: 'all' }] },
  { uid: { type: 'Group', id: 'eng' }, attrs: {}, parents: [{ type: 'Group', id: 'staff' }] },
  { uid: { type: 'Team', id: 'data' }, attrs: {}, parents: [] },
  {
    uid: { type: 'User', id: 'alice' },
    attrs: { teams: [{ __entity: { type: 'Team', id: 'data' } }], level: 3 },
    parents: [{ type: 'Group', id: 'eng' }],
  },
  {
    uid: { type: 'User', id: 'bob' },
    attrs: { manager: { __entity: { type: 'User', id: 'alice' } }, teams: [], level: 1 },
    parents: [{ type: 'Group', id: 'all' }],
  },
  { uid: { type: 'User', id: 'carol' }, attrs: { teams: [], level: 5 }, parents: [{ type: 'Group', id: 'eng' }] },
  {
    uid: { type: 'Document', id: 'q3' },
    attrs: { dept: 'eng', owner: { __entity: { type: 'User', id: 'bob' } } },
    parents: [],
    tags: { steward: { __entity: { type: 'Team', id: 'data' } } },
  },
  {
    uid: { type: 'Document', id: 'memo' },
    attrs: { dept: 'ops', owner: { __entity: { type: 'User', id: 'carol' } } },
    parents: [],
  },
  { uid: { type: 'Flag', id: 'kill' }, attrs: { on: false }, parents: [] },
  { uid: { type: 'Unrelated', id: 'x' }, attrs: { big: 'y'.repeat(100) }, parents: [] },
];

const silent = pino({ level: 'silent' });

describe('entity slicing', () => {
  it('gives the same decision, reasons and errors as the whole entity store', async () => {
    const dir = scratchDir('stele-slice-');
    writeFileSync(join(dir, 'policies.cedar'), POLICIES);
    writeFileSync(join(dir, 'entities.json'), JSON.stringify(ENTITIES));
    const engine = await PolicyEngine.open(dir, silent);
    const parts = cedar.policySetTextToParts(POLICIES);
    if (parts.type !== 'success') throw new Error('policies do not parse');
    const staticPolicies: Record<string, string> = {};
    for (const p of parts.policies) {
      const est = cedar.policyToJson(p);
      if (est.type !== 'success') throw new Error('policy to JSON');
      staticPolicies[est.json.annotations!.id!] = p;
    }
    const users = ['alice', 'bob', 'carol', 'nobody'].map((id) => ({ type: 'User', id }));
    const actions = ['read', 'approve', 'tag', 'delegate'].map((id) => ({ type: 'Action', id }));
    const docs = ['q3', 'memo', 'absent'].map((id) => ({ type: 'Document', id }));
    const contexts: Record<string, unknown>[] = [
      {},
      { for: { __entity: { type: 'User', id: 'alice' } } },
      { for: { __entity: { type: 'User', id: 'bob' } } },
    ];
    let allowed = 0;
    for (const principal of users) {
      for (const action of actions) {
        for (const resource of docs) {
          for (const context of contexts) {
            const whole = cedar.isAuthorized({
              principal,
              action,
              resource,
              context: context as cedar.Context,
              policies: { staticPolicies },
              entities: ENTITIES,
            });
            if (whole.type !== 'success') throw new Error('isAuthorized failed');
            const d = engine.evaluate({ principal, action, resource, context });
            const label = `${principal.id} ${action.id} ${resource.id} ${JSON.stringify(context)}`;
            expect(d.decision, label).toBe(whole.response.decision);
            expect([...d.reasons].sort(), label).toEqual([...whole.response.diagnostics.reason].sort());
            expect(d.errors.length, label).toBe(whole.response.diagnostics.errors.length);
            if (d.decision === 'allow') allowed++;
          }
        }
      }
    }
    // The grid exercises every permit: parents, attribute chains, tags, the context reference.
    expect(allowed).toBeGreaterThan(4);
    engine.close();
  });

  it('remembers decisions per policy version only: an entities change is a new version with a fresh cache', async () => {
    const dir = scratchDir('stele-decisions-');
    writeFileSync(join(dir, 'policies.cedar'), POLICIES);
    writeFileSync(join(dir, 'entities.json'), JSON.stringify(ENTITIES));
    const engine = await PolicyEngine.open(dir, silent, { decisionCacheSize: 100, pollMs: 60_000 });
    const req = {
      principal: { type: 'User', id: 'alice' },
      action: { type: 'Action', id: 'read' },
      resource: { type: 'Document', id: 'q3' },
      context: { ip: '10.0.0.1' },
    };
    const first = engine.evaluate(req);
    expect(first.decision).toBe('allow');
    expect(engine.evaluate({ ...req, context: { ip: '10.0.0.1' } })).toBe(first);
    expect(Object.isFrozen(first.reasons)).toBe(true);
    // alice leaves eng (and so staff): only the entities change.
    const moved = ENTITIES.map((e) => (('id' in e.uid ? e.uid.id : '') === 'alice' ? { ...e, parents: [] } : e));
    writeFileSync(join(dir, 'entities.json'), JSON.stringify(moved));
    expect(await engine.reload()).toBe(true);
    const after = engine.evaluate(req);
    expect(after.policyVersion).not.toBe(first.policyVersion);
    expect(after.decision).toBe('deny');
    engine.close();
  });

  it('hands Cedar only what the request reaches', () => {
    const est = (text: string) => {
      const parts = cedar.policySetTextToParts(text);
      if (parts.type !== 'success') throw new Error('parse');
      return parts.policies.map((p) => {
        const j = cedar.policyToJson(p);
        if (j.type !== 'success') throw new Error('json');
        return j.json;
      });
    };
    const slicer = new EntitySlicer(ENTITIES, est(POLICIES));
    const ids = (p: EntityRef, a: EntityRef, r: EntityRef, c: Record<string, unknown> = {}) =>
      slicer
        .slice(p, a, r, c)
        .map((e) => ('__entity' in e.uid ? e.uid.__entity.id : e.uid.id))
        .sort();
    const read = { type: 'Action', id: 'read' };
    // alice's ancestors, her team, the document's owner chain and steward tag, the policy literals' flag and group.
    expect(ids({ type: 'User', id: 'alice' }, read, { type: 'Document', id: 'q3' })).toEqual([
      'alice',
      'all',
      'bob',
      'data',
      'eng',
      'kill',
      'q3',
      'staff',
    ]);
    expect(ids({ type: 'User', id: 'nobody' }, read, { type: 'Document', id: 'absent' })).toEqual([
      'all',
      'eng',
      'kill',
      'staff',
    ]);
    expect(
      ids(
        { type: 'User', id: 'nobody' },
        read,
        { type: 'Document', id: 'absent' },
        { x: { nested: [{ type: 'User', id: 'carol' }] } },
      ),
    ).toContain('carol');
  });
});
