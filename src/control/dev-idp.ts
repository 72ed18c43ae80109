// A development OpenID Provider (oidc-provider) on loopback: the issuer `stele dev-idp serve`
// runs so `serve --enterprise` works on one machine, and the one the control-plane tests run.
// It publishes the discovery document and JWKS and issues RFC 9068 JWT access tokens through
// the client-credentials grant with a resource indicator (RFC 8707): the resource becomes the
// token's `aud`, and each client's configured claims (roles, amr, acr, …) are added, the way
// an enterprise IdP maps group membership and the authentication context into its tokens.
//
// Never for production: any local process that knows the client secret gets an admin token,
// so it listens on loopback only. oidc-provider is a development dependency: the package
// is loaded only here, and its absence (an image built without dev dependencies) is one line.
import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWK, exportJWK, generateKeyPair } from 'jose';

/** The part of oidc-provider's Provider class used here. */
interface ProviderInstance {
  proxy: boolean;
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  on(event: string, fn: (...args: unknown[]) => void): void;
}
type ProviderClass = new (issuer: string, configuration: Record<string, unknown>) => ProviderInstance;

export class DevIdpError extends Error {
  override name = 'DevIdpError';
}

// oidc-provider 9 ships no type declarations; a computed specifier keeps this file
// type-checking whether or not @types/oidc-provider is ever installed.
const OIDC_PROVIDER: string = 'oidc-provider';
async function loadProvider(): Promise<ProviderClass> {
  try {
    return ((await import(OIDC_PROVIDER)) as { default: ProviderClass }).default;
  } catch {
    throw new DevIdpError(
      'the development identity provider needs the oidc-provider package, a development dependency: run it from a clone after `npm ci`',
    );
  }
}

/** Addresses the development IdP may listen on. */
export const LOOPBACK_HOSTS: readonly string[] = ['127.0.0.1', '::1', 'localhost'];

export interface DevIdpClient {
  /** Claims merged into every access token this client obtains. */
  readonly claims?: Record<string, unknown>;
  /** Access-token lifetime in seconds (default 300). */
  readonly ttl?: number;
}

export interface DevIdpOptions {
  readonly clients: Record<string, DevIdpClient>;
  /** Audience used when a token request names no resource. */
  readonly defaultResource: string;
  /** JWS algorithm of access tokens (default ES256). */
  readonly alg?: 'ES256' | 'RS256' | 'EdDSA' | 'PS256';
  /** Reuse these private JWKs instead of generating new ones. */
  readonly keys?: JWK[];
  /** Loopback only (default 127.0.0.1). */
  readonly host?: string;
  /** Default 0: any free port. */
  readonly port?: number;
  /** The clients' shared secret (default: 24 random bytes). */
  readonly secret?: string;
}

export interface DevIdp {
  /** The issuer URL (no trailing slash), as the discovery document states it. */
  readonly issuer: string;
  /** The client secret shared by all clients. */
  readonly secret: string;
  /** An access token (JWT) for `clientId`, audience `resource` (default: the provider's default resource). */
  token(clientId: string, resource?: string): Promise<string>;
  /** Replaces the signing keys; tokens signed before no longer verify against the JWKS. */
  rotateKeys(): Promise<void>;
  /** The private signing JWKs currently in use (to start a second issuer with the same keys). */
  readonly keys: JWK[];
  /** JWKS fetches served (to see caching). */
  readonly jwksFetches: number;
  close(): Promise<void>;
}

/** oidc-provider's storage interface, in memory (client-credentials tokens are JWTs, so little is stored). */
class MemoryAdapter {
  private static readonly data = new Map<string, unknown>();
  constructor(private readonly model: string) {}
  private key(id: string) {
    return `${this.model}:${id}`;
  }
  async upsert(id: string, payload: unknown) {
    MemoryAdapter.data.set(this.key(id), payload);
  }
  async find(id: string) {
    return MemoryAdapter.data.get(this.key(id));
  }
  async findByUserCode() {
    return undefined;
  }
  async findByUid() {
    return undefined;
  }
  async consume(id: string) {
    const v = MemoryAdapter.data.get(this.key(id)) as Record<string, unknown> | undefined;
    if (v) v.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string) {
    MemoryAdapter.data.delete(this.key(id));
  }
  async revokeByGrantId() {}
}

async function newKeys(alg: string): Promise<JWK[]> {
  const { privateKey } = await generateKeyPair(alg, {
    extractable: true,
    ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}),
  });
  const jwk = await exportJWK(privateKey);
  return [{ ...jwk, kid: `k-${randomBytes(6).toString('hex')}`, alg, use: 'sig' }];
}

/** An access token from `issuer`'s token endpoint by the client-credentials grant. */
export async function requestToken(issuer: string, clientId: string, secret: string, resource?: string) {
  const body = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: clientId,
    client_secret: secret,
    scope: 'stele',
  });
  if (resource !== undefined) body.set('resource', resource);
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    signal: AbortSignal.timeout(30_000),
  });
  const json = (await res.json().catch(() => ({}))) as {
    access_token?: string;
    expires_in?: number;
    error?: string;
    error_description?: string;
  };
  if (!res.ok || !json.access_token)
    throw new DevIdpError(
      `token request for ${clientId} failed: ${res.status} ${json.error}: ${json.error_description}`,
    );
  return { accessToken: json.access_token, expiresIn: json.expires_in ?? 0 };
}

/** The OIDC provider: one client-credentials client per configured client, JWT access tokens for the resource asked. */
function devProvider(
  Provider: Awaited<ReturnType<typeof loadProvider>>,
  issuer: string,
  o: DevIdpOptions,
  alg: string,
  secret: string,
  signingKeys: JWK[],
) {
  const provider = new Provider(issuer, {
    clients: Object.keys(o.clients).map((client_id) => ({
      client_id,
      client_secret: secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
    })),
    jwks: { keys: signingKeys as never },
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      introspection: { enabled: false },
      revocation: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => o.defaultResource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: unknown, resource: string, client: { clientId: string }) => ({
          scope: 'stele',
          audience: resource,
          accessTokenTTL: o.clients[client.clientId]?.ttl ?? 300,
          accessTokenFormat: 'jwt' as const,
          jwt: { sign: { alg } },
        }),
      },
    },
    adapter: MemoryAdapter,
    ttl: {
      ClientCredentials: (_ctx: unknown, token: { resourceServer?: { accessTokenTTL?: number } }) =>
        token.resourceServer?.accessTokenTTL ?? 300,
    },
    extraTokenClaims: async (_ctx: unknown, token: { clientId?: string }) => ({
      ...(o.clients[token.clientId ?? '']?.claims ?? {}),
    }),
    clientDefaults: { id_token_signed_response_alg: alg } as never,
    enabledJWA: { clientAuthSigningAlgValues: [], idTokenSigningAlgValues: [alg] } as never,
  });
  provider.proxy = false;
  // Expected token-endpoint errors (invalid_target, …) are answered; nothing to log.
  provider.on('server_error', () => undefined);
  return provider;
}

export async function startDevIdp(o: DevIdpOptions): Promise<DevIdp> {
  const host = o.host ?? '127.0.0.1';
  if (!LOOPBACK_HOSTS.includes(host))
    throw new DevIdpError(
      `the development identity provider listens on loopback only (${LOOPBACK_HOSTS.join(', ')}), not ${host}: it gives admin tokens to anyone who asks`,
    );
  const Provider = await loadProvider();
  const alg = o.alg ?? 'ES256';
  const secret = o.secret ?? randomBytes(24).toString('base64url');
  let keys = o.keys ?? (await newKeys(alg));
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  let jwksFetches = 0;
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/jwks')) jwksFetches++;
    handler(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, host, () => resolve());
  });
  // The address bound, not the name asked for: `localhost` may resolve to ::1.
  const { address, port, family } = server.address() as AddressInfo;
  const issuer = `http://${family === 'IPv6' ? `[${address}]` : address}:${port}`;

  const build = (signingKeys: JWK[]) => devProvider(Provider, issuer, o, alg, secret, signingKeys);
  handler = build(keys).callback();

  return {
    issuer,
    secret,
    get keys() {
      return keys;
    },
    get jwksFetches() {
      return jwksFetches;
    },
    async token(clientId, resource) {
      return (await requestToken(issuer, clientId, secret, resource)).accessToken;
    },
    async rotateKeys() {
      keys = await newKeys(alg);
      handler = build(keys).callback();
    },
    close() {
      return new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}

/**
 * The three roles of the control plane as development clients: admin and analyst carry a
 * phishing-resistant `amr` (hwk), as their operations require; service does not need one.
 */
export const DEV_ROLES = {
  admin: { roles: ['admin'], amr: ['pwd', 'hwk'] },
  analyst: { roles: ['analyst'], amr: ['pwd', 'hwk'] },
  service: { roles: ['service'], amr: ['pwd'] },
} as const satisfies Record<string, Record<string, unknown>>;

export type DevRole = keyof typeof DEV_ROLES;
