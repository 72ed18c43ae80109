// Control-plane configuration: a TOML file's [control] table (STELE_CONTROL_CONFIG, else
// <control data dir>/control.toml when it exists), then STELE_* environment overrides, over
// the defaults below. Everything is validated at start; a bad setting stops the server with
// a message naming it, never a silent fallback.
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { ConfigError } from '../settings/errors.js';

/** A ConfigError, so `stele serve --enterprise` reports it as a usage error (exit 2) too. */
export class ControlConfigError extends ConfigError {
  override name = 'ControlConfigError';
}

/** Operations a role may be granted (the role-to-operation table). */
export const OPERATIONS = ['policy.evaluate', 'access.lease', 'keys.rotate', 'keys.read', 'audit.read'] as const;
export type Operation = (typeof OPERATIONS)[number];

export const DEFAULT_ROLES: Readonly<Record<string, readonly Operation[]>> = {
  admin: ['keys.rotate', 'keys.read', 'audit.read', 'policy.evaluate'],
  analyst: ['audit.read', 'keys.read'],
  service: ['policy.evaluate', 'access.lease', 'keys.read'],
};

/** JWS algorithms that may be allowed: asymmetric only (no `none`, no shared-secret HS*). */
export const ASYMMETRIC_ALGS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

export interface OidcSettings {
  /** Issuer URL, exactly as the `iss` claim and the discovery document state it. */
  readonly issuer: string;
  /** The setting that named the issuer (STELE_OIDC_ISSUER, or the file's key), for messages. */
  readonly issuerSetting?: string;
  /** Accepted `aud` values (the control plane's resource identifier). */
  readonly audience: readonly string[];
  readonly algorithms: readonly string[];
  /** Accepted JWT `typ` header values; empty accepts any (RFC 9068 says `at+jwt`). */
  readonly tokenTypes: readonly string[];
  readonly clockToleranceS: number;
  readonly jwksCacheMaxAgeS: number;
  readonly jwksCooldownS: number;
  readonly httpTimeoutMs: number;
  /** Claim holding the roles; dotted path for nested claims (`realm_access.roles`). */
  readonly rolesClaim: string;
  /** Claim whose value is recorded as the entry's tenant (optional). */
  readonly tenantClaim?: string;
  /** `amr` values that count as phishing-resistant MFA (any one suffices). */
  readonly mfaAmr: readonly string[];
  /** `acr` values that count as phishing-resistant MFA. */
  readonly mfaAcr: readonly string[];
  /** Roles whose operations require phishing-resistant MFA. */
  readonly mfaRoles: readonly string[];
  /** Verified tokens kept (by SHA-256 of the token) so repeat requests skip the signature check; 0 disables. */
  readonly tokenCacheSize: number;
  /** Longest a verified token is reused without re-verifying its signature, in seconds. */
  readonly tokenCacheTtlS: number;
}

export interface LeaseSettings {
  readonly ttlDefaultS: number;
  readonly ttlMinS: number;
  readonly ttlMaxS: number;
  /** Cedar entity type of the caller in a lease decision (the token's `sub` is the id). */
  readonly principalType: string;
  /** Cedar action id of a lease decision: `Action::"<action>"`. */
  readonly action: string;
  /** Cedar entity type of the document (doc_id is the id). */
  readonly resourceType: string;
}

export interface KekSettings {
  readonly provider: 'local' | 'aws-kms' | 'pkcs11';
  /** pkcs11: the token's PKCS#11 URI (module-path, token, pin-source). */
  readonly pkcs11Uri?: string;
  readonly region?: string;
  readonly endpoint?: string;
  /** Existing customer-managed key for the first epoch (else one is created). */
  readonly initialKeyId?: string;
  readonly timeoutMs: number;
}

export interface ControlConfig {
  readonly oidc: OidcSettings;
  readonly roles: Readonly<Record<string, readonly Operation[]>>;
  readonly policyDir: string;
  readonly policyPollMs: number;
  /** Decisions remembered per policy version (0: every request is evaluated by Cedar). */
  readonly policyDecisionCacheSize: number;
  readonly lease: LeaseSettings;
  readonly kek: KekSettings;
  /** Scope label of the control plane's ledger entries. */
  readonly ledgerScope: string;
  /** Name of the control plane's Ed25519 key (in its key file and signed records). */
  readonly signerName: string;
  /** The control plane's signing key: its key file (default) or the PKCS#11 URI of an Ed25519 key in an HSM. */
  readonly signerKey?: string;
  readonly auditFsync: boolean;
  /** Authentication failures recorded per second per remote address (the rest are counted). */
  /** Authentication failures are aggregated per source over windows this long (seconds). */
  readonly authFailureWindowS: number;
  /** Sources with their own failure entries per window; the rest share one summary. */
  readonly authFailureSources: number;
  /** Largest JSON request body, in bytes. */
  readonly bodyLimitBytes: number;
}

type Table = Record<string, unknown>;

const isTable = (v: unknown): v is Table =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

function reader(table: Table, where: string, known: readonly string[]) {
  const unknown = Object.keys(table).find((k) => !known.includes(k));
  if (unknown) throw new ControlConfigError(`${where}: unknown setting ${unknown}`);
  const str = (k: string, def?: string): string | undefined => {
    const v = table[k];
    if (v === undefined) return def;
    if (typeof v !== 'string' || v === '') throw new ControlConfigError(`${where}.${k} must be a non-empty string`);
    return v;
  };
  const int = (k: string, def: number, min = 0, max = Number.MAX_SAFE_INTEGER): number => {
    const v = table[k] ?? def;
    const n = typeof v === 'string' && /^[0-9]+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ControlConfigError(`${where}.${k} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
  const bool = (k: string, def: boolean): boolean => {
    const v = table[k] ?? def;
    if (v === true || v === 'true' || v === '1') return true;
    if (v === false || v === 'false' || v === '0') return false;
    throw new ControlConfigError(`${where}.${k} must be true or false`);
  };
  const list = (k: string, def: readonly string[]): string[] => {
    const v = table[k];
    if (v === undefined) return [...def];
    const items =
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : v;
    if (!Array.isArray(items) || items.some((s) => typeof s !== 'string' || s === '')) {
      throw new ControlConfigError(`${where}.${k} must be a list of non-empty strings`);
    }
    return items as string[];
  };
  const sub = (k: string): Table => {
    const v = table[k] ?? {};
    if (!isTable(v)) throw new ControlConfigError(`${where}.${k} must be a table`);
    return v;
  };
  return { str, int, bool, list, sub };
}

/** Environment variables that override file settings: [variable, table, key]. */
const ENV_OVERRIDES: readonly [string, 'oidc' | 'policy' | 'kek' | 'lease' | '', string][] = [
  ['STELE_OIDC_ISSUER', 'oidc', 'issuer'],
  ['STELE_OIDC_AUDIENCE', 'oidc', 'audience'],
  ['STELE_OIDC_ROLES_CLAIM', 'oidc', 'roles_claim'],
  ['STELE_OIDC_ALGORITHMS', 'oidc', 'algorithms'],
  ['STELE_CONTROL_POLICY_DIR', 'policy', 'dir'],
  ['STELE_KEK_PROVIDER', 'kek', 'provider'],
  ['STELE_KEK_REGION', 'kek', 'region'],
  ['STELE_KEK_ENDPOINT', 'kek', 'endpoint'],
  ['STELE_KEK_PKCS11_URI', 'kek', 'pkcs11_uri'],
  ['STELE_CONTROL_SIGNER', '', 'signer_key'],
];

/** Reads the [control] table of `path` (absent file: empty). */
export function readControlFile(path: string): Table {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ControlConfigError(`cannot read control config ${path}: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseToml(text);
  } catch (e) {
    throw new ControlConfigError(`control config ${path} is not valid TOML: ${(e as Error).message.split('\n')[0]}`);
  }
  const control = (doc as Table).control ?? {};
  if (!isTable(control)) throw new ControlConfigError(`${path}: [control] must be a table`);
  return control;
}

/** Resolves the configuration for a control plane whose state lives in `dataDir`. */
export function resolveControlConfig(dataDir: string, env: NodeJS.ProcessEnv): ControlConfig {
  const explicit = env.STELE_CONTROL_CONFIG;
  const defaultPath = join(dataDir, 'control.toml');
  const file = explicit ? readControlFile(explicit) : existsSync(defaultPath) ? readControlFile(defaultPath) : {};
  // Environment overrides go into a copy of the file's tables.
  const raw: Table = { ...file };
  for (const [name, table, key] of ENV_OVERRIDES) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    const t = table === '' ? raw : { ...(isTable(raw[table]) ? raw[table] : {}) };
    t[key] = v;
    if (table !== '') raw[table] = t;
  }
  const config = parseControlConfig(raw, dataDir);
  const issuerSetting = env.STELE_OIDC_ISSUER
    ? 'STELE_OIDC_ISSUER'
    : `[control.oidc] issuer in ${explicit ?? defaultPath}`;
  return { ...config, oidc: { ...config.oidc, issuerSetting } };
}

/** Validates a [control] table (already merged with overrides). */
export function parseControlConfig(raw: Table, dataDir: string): ControlConfig {
  const top = reader(raw, '[control]', [
    'oidc',
    'roles',
    'policy',
    'lease',
    'kek',
    'audit',
    'ledger_scope',
    'signer_name',
    'signer_key',
    'body_limit_bytes',
  ]);
  const oidc = oidcSettings(top.sub('oidc'));
  const roles = roleTable(top.sub('roles'));
  const p = reader(top.sub('policy'), '[control.policy]', ['dir', 'poll_ms', 'decision_cache_size']);
  const policyDir = p.str('dir', 'policy')!;

  const lease = leaseSettings(top.sub('lease'));
  const kek = kekSettings(top.sub('kek'));
  const signerKey = top.str('signer_key');
  if (signerKey !== undefined && signerKey !== 'file' && !signerKey.startsWith('pkcs11:'))
    throw new ControlConfigError('[control].signer_key (env STELE_CONTROL_SIGNER) must be "file" or a pkcs11: URI');

  const ledgerScope = top.str('ledger_scope', 'control')!;
  if (Buffer.byteLength(ledgerScope) > 256 || /[\u0000-\u001f\u007f]/u.test(ledgerScope))
    throw new ControlConfigError('[control].ledger_scope must be at most 256 UTF-8 bytes without control characters');
  const a = reader(top.sub('audit'), '[control.audit]', [
    'fsync',
    'auth_failure_rate',
    'auth_failure_window_s',
    'auth_failure_sources',
  ]);
  return {
    oidc,
    roles,
    policyDir: isAbsolute(policyDir) ? policyDir : join(dataDir, policyDir),
    policyPollMs: p.int('poll_ms', 1_000, 10, 60_000),
    policyDecisionCacheSize: p.int('decision_cache_size', 10_000, 0, 1_000_000),
    lease,
    kek,
    ledgerScope,
    signerName: top.str('signer_name', 'stele-control')!,
    ...(signerKey !== undefined && signerKey !== 'file' ? { signerKey } : {}),
    auditFsync: a.bool('fsync', true),
    // auth_failure_rate (a per-second budget) is superseded by the window: still accepted, unused.
    authFailureWindowS: a.int('auth_failure_window_s', 60, 1, 86_400),
    authFailureSources: a.int('auth_failure_sources', 100, 1, 100_000),
    bodyLimitBytes: top.int('body_limit_bytes', 16 * 1024, 1024, 1024 * 1024),
  };
}

/** [control.oidc]: the issuer (https, or http on loopback), audiences, asymmetric algorithms, caches, MFA. */
function oidcSettings(table: Table): OidcSettings {
  const o = reader(table, '[control.oidc]', [
    'issuer',
    'audience',
    'algorithms',
    'token_types',
    'clock_tolerance_s',
    'jwks_cache_max_age_s',
    'jwks_cooldown_s',
    'http_timeout_ms',
    'roles_claim',
    'tenant_claim',
    'mfa_amr',
    'mfa_acr',
    'mfa_roles',
    'token_cache_size',
    'token_cache_ttl_s',
  ]);
  const issuer = o.str('issuer');
  if (!issuer) {
    throw new ControlConfigError(
      'the control plane needs an OIDC issuer: set [control.oidc] issuer (and audience) in control.toml or STELE_OIDC_ISSUER / STELE_OIDC_AUDIENCE',
    );
  }
  let issuerUrl: URL;
  try {
    issuerUrl = new URL(issuer);
  } catch {
    throw new ControlConfigError('[control.oidc].issuer must be a URL');
  }
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(issuerUrl.hostname);
  if (issuerUrl.protocol !== 'https:' && !(issuerUrl.protocol === 'http:' && loopback)) {
    throw new ControlConfigError('[control.oidc].issuer must be an https URL (http is accepted on loopback only)');
  }
  const audience = o.list('audience', []);
  if (audience.length === 0)
    throw new ControlConfigError(
      '[control.oidc].audience is required: the resource identifier tokens must be issued for',
    );
  const algorithms = o.list('algorithms', ['RS256', 'PS256', 'ES256', 'EdDSA']);
  for (const a of algorithms) {
    if (!(ASYMMETRIC_ALGS as readonly string[]).includes(a)) {
      throw new ControlConfigError(
        `[control.oidc].algorithms: ${a} is not allowed (asymmetric algorithms only: ${ASYMMETRIC_ALGS.join(', ')}; never none or HS*)`,
      );
    }
  }
  const oidc: OidcSettings = {
    issuer,
    audience,
    algorithms,
    tokenTypes: o.list('token_types', ['at+jwt', 'application/at+jwt']),
    clockToleranceS: o.int('clock_tolerance_s', 30, 0, 300),
    jwksCacheMaxAgeS: o.int('jwks_cache_max_age_s', 600, 1, 86_400),
    jwksCooldownS: o.int('jwks_cooldown_s', 30, 0, 3_600),
    httpTimeoutMs: o.int('http_timeout_ms', 5_000, 100, 60_000),
    rolesClaim: o.str('roles_claim', 'roles')!,
    ...(o.str('tenant_claim') ? { tenantClaim: o.str('tenant_claim')! } : {}),
    mfaAmr: o.list('mfa_amr', ['hwk', 'sc', 'pop', 'phr']),
    mfaAcr: o.list('mfa_acr', ['phr', 'phrh', 'http://schemas.openid.net/pape/policies/2007/06/phishing-resistant']),
    mfaRoles: o.list('mfa_roles', ['admin', 'analyst']),
    tokenCacheSize: o.int('token_cache_size', 10_000, 0, 1_000_000),
    tokenCacheTtlS: o.int('token_cache_ttl_s', 60, 1, 3_600),
  };
  if (oidc.tokenCacheTtlS > oidc.jwksCacheMaxAgeS) {
    throw new ControlConfigError('[control.oidc].token_cache_ttl_s must not exceed jwks_cache_max_age_s');
  }

  return oidc;
}

/** [control.roles]: role → operations (the default roles when the table is empty). */
function roleTable(rolesTable: Table): Record<string, Operation[]> {
  const roles: Record<string, Operation[]> =
    Object.keys(rolesTable).length > 0
      ? {}
      : Object.fromEntries(Object.entries(DEFAULT_ROLES).map(([k, v]) => [k, [...v]]));
  for (const [role, ops] of Object.entries(rolesTable)) {
    if (!Array.isArray(ops) || ops.some((op) => !(OPERATIONS as readonly unknown[]).includes(op))) {
      throw new ControlConfigError(
        `[control.roles].${role} must be a list of operations from ${OPERATIONS.join(', ')}`,
      );
    }
    roles[role] = ops as Operation[];
  }

  return roles;
}

/** [control.lease]: TTL bounds (min ≤ default ≤ max) and the Cedar names of a lease request. */
function leaseSettings(table: Table): LeaseSettings {
  const l = reader(table, '[control.lease]', [
    'ttl_default_s',
    'ttl_min_s',
    'ttl_max_s',
    'principal_type',
    'action',
    'resource_type',
  ]);
  const lease: LeaseSettings = {
    ttlDefaultS: l.int('ttl_default_s', 300, 1),
    ttlMinS: l.int('ttl_min_s', 30, 1),
    ttlMaxS: l.int('ttl_max_s', 3_600, 1, 7 * 86_400),
    principalType: l.str('principal_type', 'User')!,
    action: l.str('action', 'lease')!,
    resourceType: l.str('resource_type', 'Document')!,
  };
  if (!(lease.ttlMinS <= lease.ttlDefaultS && lease.ttlDefaultS <= lease.ttlMaxS)) {
    throw new ControlConfigError('[control.lease]: ttl_min_s ≤ ttl_default_s ≤ ttl_max_s must hold');
  }

  return lease;
}

/** [control.kek]: the key-encryption key's provider (local, aws-kms or pkcs11) and its settings. */
function kekSettings(table: Table): KekSettings {
  const k = reader(table, '[control.kek]', [
    'provider',
    'region',
    'endpoint',
    'initial_key_id',
    'timeout_ms',
    'pkcs11_uri',
  ]);
  const provider = k.str('provider', 'local');
  if (provider !== 'local' && provider !== 'aws-kms' && provider !== 'pkcs11')
    throw new ControlConfigError('[control.kek].provider must be local or aws-kms (or pkcs11 for an HSM)');
  const pkcs11Uri = k.str('pkcs11_uri');
  if (provider === 'pkcs11' && !pkcs11Uri?.startsWith('pkcs11:'))
    throw new ControlConfigError(
      '[control.kek].pkcs11_uri (env STELE_KEK_PKCS11_URI) must be the pkcs11: URI of the HSM token',
    );
  const kek: KekSettings = {
    provider,
    ...(provider === 'pkcs11' ? { pkcs11Uri: pkcs11Uri! } : {}),
    ...(k.str('region') ? { region: k.str('region')! } : {}),
    ...(k.str('endpoint') ? { endpoint: k.str('endpoint')! } : {}),
    ...(k.str('initial_key_id') ? { initialKeyId: k.str('initial_key_id')! } : {}),
    timeoutMs: k.int('timeout_ms', 5_000, 100, 60_000),
  };

  return kek;
}
