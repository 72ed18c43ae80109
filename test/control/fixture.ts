// A ledger with the control plane mounted (stele serve --enterprise, in-process), a real
// OpenID Provider on loopback issuing its tokens, and Cedar policy files on disk.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunningServer } from '../../src/serve/log-server.js';
import { getJson, startTestServer } from '../api/server.js';
import { type OidcClientSpec, type TestOidcProvider, startOidcProvider } from '../helpers/oidc.js';
import { scratchDir } from '../helpers/tmp.js';
import type { Json } from '../helpers/json.js';

export const AUDIENCE = 'https://control.stele.test/v1';

export const CLIENTS: Record<string, OidcClientSpec> = {
  svc: { claims: { roles: ['service'] } },
  admin: { claims: { roles: ['admin'], amr: ['pwd', 'hwk'] } },
  'admin-nomfa': { claims: { roles: ['admin'], amr: ['pwd', 'otp'] } },
  analyst: { claims: { roles: ['analyst'], acr: 'phr' } },
  'analyst-nomfa': { claims: { roles: ['analyst'], amr: ['pwd'] } },
  short: { claims: { roles: ['service'] }, ttl: 2 },
  nobody: { claims: {} },
};

export const POLICIES = `
@id("staff-read-eng")
permit (principal in Group::"staff", action == Action::"read", resource)
when { resource.dept == "eng" };

@id("deny-contractors")
forbid (principal in Group::"contractors", action, resource);

@id("service-lease-demo")
permit (principal, action == Action::"lease", resource)
when { context.compartment == "demo" && context.roles.contains("service") };

@id("no-secret-leases")
forbid (principal, action == Action::"lease", resource in Compartment::"secret");
`;

export const ENTITIES = [
  { uid: { type: 'Group', id: 'staff' }, attrs: {}, parents: [] },
  { uid: { type: 'Group', id: 'contractors' }, attrs: {}, parents: [] },
  { uid: { type: 'User', id: 'alice' }, attrs: {}, parents: [{ type: 'Group', id: 'staff' }] },
  {
    uid: { type: 'User', id: 'bob' },
    attrs: {},
    parents: [
      { type: 'Group', id: 'staff' },
      { type: 'Group', id: 'contractors' },
    ],
  },
  { uid: { type: 'Compartment', id: 'secret' }, attrs: {}, parents: [] },
  { uid: { type: 'Document', id: 'q3-report' }, attrs: { dept: 'eng' }, parents: [] },
  { uid: { type: 'Document', id: 'payroll' }, attrs: { dept: 'finance' }, parents: [] },
  {
    uid: { type: 'Document', id: 'launch-codes' },
    attrs: { dept: 'eng' },
    parents: [{ type: 'Compartment', id: 'secret' }],
  },
];

export interface ControlFixture {
  /** The running server (replace it to restart on the same data directory). */
  srv: RunningServer;
  readonly idp: TestOidcProvider;
  readonly dataDir: string;
  readonly controlDir: string;
  readonly policyDir: string;
  token(client: string, resource?: string): Promise<string>;
  call(
    method: string,
    path: string,
    o?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: Json; headers: Headers }>;
  /** Replaces a policy file atomically (write aside, rename). */
  writePolicy(name: string, text: string): void;
  close(): Promise<void>;
}

export async function startControl(
  o: { toml?: string; alg?: 'ES256' | 'RS256' | 'EdDSA'; batchIntervalMs?: number } = {},
): Promise<ControlFixture> {
  const idp = await startOidcProvider({ clients: CLIENTS, defaultResource: AUDIENCE, alg: o.alg ?? 'ES256' });
  const dataDir = scratchDir('stele-control-');
  const controlDir = join(dataDir, 'control');
  const policyDir = join(controlDir, 'policy');
  mkdirSync(policyDir, { recursive: true });
  writeFileSync(join(policyDir, 'policies.cedar'), POLICIES);
  writeFileSync(join(policyDir, 'entities.json'), JSON.stringify(ENTITIES));
  writeFileSync(
    join(controlDir, 'control.toml'),
    o.toml ??
      `[control.oidc]
issuer = "${idp.issuer}"
audience = "${AUDIENCE}"
clock_tolerance_s = 0
jwks_cache_max_age_s = 2
jwks_cooldown_s = 0
token_cache_ttl_s = 1

[control.policy]
poll_ms = 100

[control.lease]
ttl_default_s = 300
ttl_min_s = 30
ttl_max_s = 3600

[control.audit]
fsync = false
auth_failure_window_s = 1
`,
  );
  const srv = await startTestServer({ dataDir, enterprise: true, batchIntervalMs: o.batchIntervalMs ?? 5 });
  const tokens = new Map<string, string>();
  const fx: ControlFixture = {
    srv,
    idp,
    dataDir,
    controlDir,
    policyDir,
    async token(client, resource) {
      if (resource !== undefined || client === 'short') return idp.token(client, resource);
      let t = tokens.get(client);
      if (!t) tokens.set(client, (t = await idp.token(client)));
      return t;
    },
    call(method, path, c = {}) {
      const headers: Record<string, string> = {
        ...(c.token ? { authorization: `Bearer ${c.token}` } : {}),
        ...c.headers,
      };
      let body: string | undefined;
      if (c.body !== undefined) {
        body = typeof c.body === 'string' ? c.body : JSON.stringify(c.body);
        headers['content-type'] ??= 'application/json';
      }
      return getJson(`${fx.srv.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    },
    writePolicy(name, text) {
      const tmp = join(policyDir, `.${name}.tmp`);
      writeFileSync(tmp, text);
      renameSync(tmp, join(policyDir, name));
    },
    async close() {
      await fx.srv.close();
      await idp.close();
    },
  };
  return fx;
}
