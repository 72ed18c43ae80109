// Production mode: every anchor is decided by the Cedar anchor policy before it enters the
// pool (issue 16): per principal, scope, artifact, digest and entry type; denials are 403
// with the deciding policies and counted in /metrics; the files are hot-reloaded, and a
// broken set leaves the previous one deciding. Also the tenants a token may write.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/log-server.js';
import { scratchDir } from '../helpers/tmp.js';
import { digestOf, getJson, postAnchor, startTestServer } from './server.js';

const TOKENS = {
  web: 'ci-web-token-0123456789',
  api: 'ci-api-token-0123456789',
  release: 'release-token-0123456789',
  other: 'other-tenant-token-01234',
  untenanted: 'no-tenant-token-0123456',
};
const BLOCKED = digestOf(0xdead);

// The README's policy (Group::"ci" tokens anchor only their own scope; release may also
// record document_verified), a digest deny list and a per-minute budget.
const POLICY = `
@id("ci-own-scope")
permit (principal in Group::"ci", action == Action::"ledger_anchor", resource)
when { context.scope == context.token };

@id("release-anchors-and-verifies")
permit (principal == Token::"release", action in [Action::"ledger_anchor", Action::"document_verified"], resource)
when { context.tenant == "acme" };

@id("no-secrets-artifacts")
forbid (principal, action, resource) when { context.artifact like "*.key" };

@id("blocked-digests")
forbid (principal, action, resource) when { ["${BLOCKED}"].contains(context.digest) };

@id("ci-budget")
forbid (principal in Group::"ci", action, resource) when { context.anchors_this_minute >= 50 };
`;
const ENTITIES = [
  { uid: { type: 'Group', id: 'ci' }, attrs: {}, parents: [] },
  { uid: { type: 'Token', id: 'ci-web' }, attrs: {}, parents: [{ type: 'Group', id: 'ci' }] },
  { uid: { type: 'Token', id: 'ci-api' }, attrs: {}, parents: [{ type: 'Group', id: 'ci' }] },
];

const auth = (t: string) => ({ authorization: `Bearer ${t}` });

describe('the anchor policy in production mode', () => {
  let srv: RunningServer;
  let policyDir: string;
  let n = 1;
  const next = () => digestOf(n++);

  const writePolicy = (name: string, text: string) => {
    const tmp = join(policyDir, `.${name}.tmp`);
    writeFileSync(tmp, text);
    renameSync(tmp, join(policyDir, name));
  };
  const policyVersion = async (): Promise<string> => {
    const r = await postAnchor(srv.url, { digest: BLOCKED, scope: 'ci-web' }, auth(TOKENS.web));
    return r.body.error.policyVersion;
  };
  const waitForVersion = async (from: string) => {
    for (let i = 0; i < 100; i++) {
      const v = await policyVersion();
      if (v !== from) return v;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the policy was not reloaded');
  };

  beforeAll(async () => {
    const dataDir = scratchDir('stele-policy-');
    policyDir = join(dataDir, 'anchor-policy');
    mkdirSync(policyDir, { recursive: true });
    writeFileSync(join(policyDir, 'anchors.cedar'), POLICY);
    writeFileSync(join(policyDir, 'entities.json'), JSON.stringify(ENTITIES));
    srv = await startTestServer({
      dataDir,
      mode: 'production',
      anchorTokens: `ci-web=${TOKENS.web}@acme,ci-api=${TOKENS.api}@acme,release=${TOKENS.release}@acme,other=${TOKENS.other}@globex,untenanted=${TOKENS.untenanted}`,
      anchorRate: 10_000,
    });
  }, 60_000);
  afterAll(() => srv?.close());

  it('lets a CI token anchor under its own scope only', async () => {
    const ok = await postAnchor(srv.url, { digest: next(), scope: 'ci-web', artifact: 'web.tgz' }, auth(TOKENS.web));
    expect(ok.status).toBe(201);
    expect(ok.body.entry).toMatchObject({ scope: 'ci-web', artifact: 'web.tgz', tenant: 'acme' });
    const other = await postAnchor(srv.url, { digest: next(), scope: 'ci-api', artifact: 'web.tgz' }, auth(TOKENS.web));
    expect(other.status).toBe(403);
    expect(other.body.error).toMatchObject({
      code: 'anchor_denied',
      reasons: [],
      policyVersion: expect.stringMatching(/^pv_[0-9a-f]{16}$/),
    });
    expect(other.body.error.message).toMatch(/no policy permits it/);
    expect((await postAnchor(srv.url, { digest: next(), scope: 'ci-api' }, auth(TOKENS.api))).status).toBe(201);
    expect((await postAnchor(srv.url, { digest: next() }, auth(TOKENS.api))).status).toBe(403);
  });

  it('decides entry types per principal: only release records document_verified', async () => {
    expect(
      (await postAnchor(srv.url, { digest: next(), scope: 'ci-web', type: 'document_verified' }, auth(TOKENS.web)))
        .status,
    ).toBe(403);
    const r = await postAnchor(
      srv.url,
      { digest: next(), scope: 'any', type: 'document_verified' },
      auth(TOKENS.release),
    );
    expect(r.status).toBe(201);
    expect(r.body.entry).toMatchObject({ type: 'document_verified', result: 'Verified', tenant: 'acme' });
    // A token no policy names (other, of tenant globex) anchors nothing.
    expect((await postAnchor(srv.url, { digest: next(), scope: 'other' }, auth(TOKENS.other))).status).toBe(403);
  });

  it('refuses by artifact and by digest with the forbidding policy as the reason', async () => {
    const key = await postAnchor(
      srv.url,
      { digest: next(), scope: 'ci-web', artifact: 'signing.key' },
      auth(TOKENS.web),
    );
    expect(key.status).toBe(403);
    expect(key.body.error.reasons).toEqual(['no-secrets-artifacts']);
    expect(key.body.error.message).toMatch(/refused by no-secrets-artifacts/);
    const blocked = await postAnchor(srv.url, { digest: BLOCKED.toUpperCase(), scope: 'ci-web' }, auth(TOKENS.release));
    expect(blocked.status).toBe(403);
    expect(blocked.body.error.reasons).toEqual(['blocked-digests']);
  });

  it('gives a principal a budget per minute (anchors_this_minute)', async () => {
    // Clear of a minute's turn (the budget restarts then): ci-api has anchored 0 or 1 this minute.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((r) => setTimeout(r, 60_100 - intoMinute));
    const results = (
      await Promise.all(
        Array.from({ length: 60 }, () => postAnchor(srv.url, { digest: next(), scope: 'ci-api' }, auth(TOKENS.api))),
      )
    ).map((r) => r.status);
    const allowed = results.filter((s) => s === 201).length;
    expect(allowed).toBeGreaterThanOrEqual(49);
    expect(allowed).toBeLessThanOrEqual(50);
    expect(results.filter((s) => s === 403).length).toBe(60 - allowed);
    // The budget is per principal: ci-web still anchors.
    expect((await postAnchor(srv.url, { digest: next(), scope: 'ci-web' }, auth(TOKENS.web))).status).toBe(201);
  }, 60_000);

  it('counts the decisions in /metrics', async () => {
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    const allow = Number(/stele_anchor_policy_decisions_total\{decision="allow"\} (\d+)/.exec(text)?.[1]);
    const deny = Number(/stele_anchor_policy_decisions_total\{decision="deny"\} (\d+)/.exec(text)?.[1]);
    expect(allow).toBeGreaterThan(50);
    expect(deny).toBeGreaterThanOrEqual(8);
  });

  it('keeps tenants apart: a token writes its own tenant only', async () => {
    const mismatch = await postAnchor(srv.url, { digest: next(), scope: 'ci-web', tenant: 'globex' }, auth(TOKENS.web));
    expect(mismatch.status).toBe(403);
    expect(mismatch.body.error.code).toBe('tenant_mismatch');
    const same = await postAnchor(srv.url, { digest: next(), scope: 'ci-web', tenant: 'acme' }, auth(TOKENS.web));
    expect(same.status).toBe(201);
    expect(same.body.entry.tenant).toBe('acme');
    // In production a token bound to no tenant writes none, whatever the client asks.
    const unbound = await postAnchor(srv.url, { digest: next(), tenant: 'acme' }, auth(TOKENS.untenanted));
    expect(unbound.status).toBe(403);
    expect(unbound.body.error.code).toBe('tenant_not_granted');
    // The scheme is case-insensitive (RFC 7235).
    expect(
      (await postAnchor(srv.url, { digest: next(), scope: 'ci-web' }, { authorization: `bearer ${TOKENS.web}` }))
        .status,
    ).toBe(201);
    expect(
      (await postAnchor(srv.url, { digest: next(), scope: 'ci-web' }, { authorization: `BEARER ${TOKENS.web}` }))
        .status,
    ).toBe(201);
  });

  it('hot-reloads under load, and a broken file leaves the previous policy deciding', async () => {
    const v1 = await policyVersion();
    // Anchors keep arriving while the policy changes: each is decided by one version,
    // allowed or denied, never an error.
    let stop = false;
    const statuses: number[] = [];
    const load = (async () => {
      while (!stop) {
        const batch = await Promise.all(
          Array.from({ length: 8 }, () => postAnchor(srv.url, { digest: next(), scope: 'any' }, auth(TOKENS.release))),
        );
        statuses.push(...batch.map((r) => r.status));
      }
    })();
    writePolicy(
      'anchors.cedar',
      `${POLICY}\n@id("release-frozen")\nforbid (principal == Token::"release", action, resource);\n`,
    );
    const v2 = await waitForVersion(v1);
    stop = true;
    await load;
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 201 || s === 403)).toBe(true);
    // Every anchor sent once the new version is live is denied (a batch sent before may end later, allowed).
    const afterReload = await Promise.all(
      Array.from({ length: 8 }, () => postAnchor(srv.url, { digest: next(), scope: 'any' }, auth(TOKENS.release))),
    );
    expect(afterReload.map((r) => r.status)).toEqual(Array(8).fill(403));
    const frozen = await postAnchor(srv.url, { digest: next(), scope: 'any' }, auth(TOKENS.release));
    expect(frozen.body.error).toMatchObject({ code: 'anchor_denied', reasons: ['release-frozen'], policyVersion: v2 });

    // A file that does not parse: the previous set (v2) keeps deciding.
    writePolicy('anchors.cedar', 'permit (principal, action, resource) when { this is not cedar');
    await new Promise((r) => setTimeout(r, 2500));
    const still = await postAnchor(srv.url, { digest: next(), scope: 'any' }, auth(TOKENS.release));
    expect(still.status).toBe(403);
    expect(still.body.error).toMatchObject({ reasons: ['release-frozen'], policyVersion: v2 });
    expect((await postAnchor(srv.url, { digest: next(), scope: 'ci-web' }, auth(TOKENS.web))).status).toBe(201);

    // Fixed again: the new set decides.
    writePolicy('anchors.cedar', POLICY);
    await waitForVersion(v2);
    expect((await postAnchor(srv.url, { digest: next(), scope: 'any' }, auth(TOKENS.release))).status).toBe(201);
  }, 90_000);

  it('leaves refused anchors out of the log', async () => {
    const cp = (await getJson(`${srv.url}/api/ledger/checkpoint`)).body;
    const denied = await postAnchor(srv.url, { digest: BLOCKED, scope: 'ci-web' }, auth(TOKENS.web));
    expect(denied.status).toBe(403);
    expect((await getJson(`${srv.url}/api/ledger/entry?hash=${BLOCKED}`)).status).toBe(404);
    expect((await getJson(`${srv.url}/api/ledger/checkpoint`)).body.lifetimeEntries).toBe(cp.lifetimeEntries);
  });
});

describe('tenants in demo mode', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer();
  }, 60_000);
  afterAll(() => srv?.close());

  it('records the tenant the client names, in NFC', async () => {
    const r = await postAnchor(srv.url, { digest: digestOf(1), tenant: 'acme' });
    expect(r.status).toBe(201);
    expect(r.body.entry.tenant).toBe('acme');
    const nfd = await postAnchor(srv.url, {
      digest: digestOf(2),
      tenant: 'cafe\u0301',
      artifact: 'Re\u0301sume\u0301.pdf',
    });
    expect(nfd.status).toBe(201);
    expect(nfd.body.entry.tenant).toBe('caf\u00e9');
    expect(nfd.body.entry.artifact).toBe('R\u00e9sum\u00e9.pdf');
    const none = await postAnchor(srv.url, { digest: digestOf(3) });
    expect(none.body.entry).not.toHaveProperty('tenant');
  });
});
