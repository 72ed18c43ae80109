// Entity slicing for Cedar: the entities a request can reach, instead of the whole store.
//
// cedar-wasm has no preparsed entity store (policies and schemas only), so every
// statefulIsAuthorized call converts the entities it is given from JS objects, at roughly
// 10 µs per entity: passing all of entities.json makes each decision cost O(store), 2 ms
// at a few hundred entities. Evaluation can only touch entities reachable from
//   - the request's principal, action and resource, and entity references in its context;
//   - entity literals in policy conditions (scope constraints compare the request's
//     entities with literals, which needs the request entities' ancestors, not the
//     literals' own data);
// by following parents (for `in`) and entity references in attributes and tags (for `.`,
// `has`, getTag). Giving Cedar exactly that closure yields the same decision, reasons and
// errors as the whole store: an entity outside it is never looked up.
import type * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import type { EntityRef } from './cedar.js';

/** Map key of an entity uid (the type's length first, so no id can make two uids collide). */
const keyOf = (type: string, id: string): string => `${type.length}:${type}${id}`;

/** Calls `found` for every entity reference inside a Cedar JSON value: `{"__entity": {…}}` or the implicit `{type, id}`. */
function eachRef(value: unknown, found: (type: string, id: string) => void): void {
  if (Array.isArray(value)) {
    for (const v of value) eachRef(v, found);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const o = value as Record<string, unknown>;
  // Taken whenever the shape fits (also a record that merely looks like a uid): an extra
  // entity in the slice changes nothing, a missing one would.
  if (typeof o.type === 'string' && typeof o.id === 'string') found(o.type, o.id);
  for (const v of Object.values(o)) eachRef(v, found);
}

/** The uid of an entity's `uid` field in either JSON form. */
function uidOf(uid: cedar.EntityUidJson): { type: string; id: string } {
  return '__entity' in uid ? uid.__entity : uid;
}

export class EntitySlicer {
  private readonly byKey = new Map<string, cedar.EntityJson>();
  /** Keys each entity leads to: its parents and the entity references in its attributes and tags. */
  private readonly edges = new Map<string, string[]>();
  /** What the policies' condition literals reach: the same for every request, so found once. */
  private readonly fromPolicies = new Set<string>();
  private readonly policyEntities: cedar.EntityJson[] = [];

  /** `policies`: the EST JSON (cedar.policyToJson) of every policy in the set. */
  constructor(entities: readonly cedar.EntityJson[], policies: readonly unknown[]) {
    for (const e of entities) {
      const { type, id } = uidOf(e.uid);
      const key = keyOf(type, id);
      this.byKey.set(key, e);
      const to: string[] = [];
      const add = (t: string, i: string) => to.push(keyOf(t, i));
      // Checked by Cedar when the set was loaded; read defensively all the same.
      for (const p of e.parents ?? []) {
        const u = uidOf(p);
        add(u.type, u.id);
      }
      eachRef(e.attrs, add);
      if (e.tags) eachRef(e.tags, add);
      this.edges.set(key, to);
    }
    const roots: string[] = [];
    for (const p of policies) eachRef((p as { conditions?: unknown }).conditions, (t, i) => roots.push(keyOf(t, i)));
    this.walk(roots, this.fromPolicies, this.policyEntities);
  }

  get size(): number {
    return this.byKey.size;
  }

  /** The entities reachable from the request and the policies' condition literals, each once. */
  slice(
    principal: EntityRef,
    action: EntityRef,
    resource: EntityRef,
    context: Record<string, unknown>,
  ): cedar.EntityJson[] {
    const roots = [
      keyOf(principal.type, principal.id),
      keyOf(action.type, action.id),
      keyOf(resource.type, resource.id),
    ];
    eachRef(context, (t, i) => roots.push(keyOf(t, i)));
    const out = this.policyEntities.slice();
    this.walk(roots, new Set(), out, this.fromPolicies);
    return out;
  }

  /** Depth-first from `roots`, adding each stored entity not in `seen` or `skip` to `out`. */
  private walk(roots: string[], seen: Set<string>, out: cedar.EntityJson[], skip?: ReadonlySet<string>): void {
    const stack = roots;
    while (stack.length > 0) {
      const key = stack.pop()!;
      if (seen.has(key) || skip?.has(key)) continue;
      seen.add(key);
      const e = this.byKey.get(key);
      if (!e) continue;
      out.push(e);
      for (const next of this.edges.get(key)!) stack.push(next);
    }
  }
}
