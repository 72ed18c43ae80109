// A real OpenID Provider (oidc-provider 9) on 127.0.0.1 for the control-plane tests and
// benchmark. It publishes the discovery document and JWKS, and issues RFC 9068 JWT access
// tokens through the client-credentials grant with a resource indicator (RFC 8707): the
// resource becomes the token's `aud`, and `extraTokenClaims` adds each client's configured
// claims (roles, amr, acr, …), the way an enterprise IdP maps group membership and the
// authentication context into its access tokens.
//
// Key rotation: `rotateKeys()` replaces the provider's signing keys (a fresh Provider
// instance behind the same listener and issuer URL), so tokens signed by the old key carry
// a kid the new JWKS no longer lists.
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
// oidc-provider 9 ships no type declarations; a computed specifier keeps this file
// type-checking whether or not @types/oidc-provider is ever installed.
const OIDC_PROVIDER: string = 'oidc-provider';
const Provider = ((await import(OIDC_PROVIDER)) as { default: unknown }).default as new (
  issuer: string,
  configuration: Record<string, unknown>,
) => ProviderInstance;

export interface OidcClientSpec {
  /** Claims merged into every access token this client obtains. */
  readonly claims?: Record<string, unknown>;
  /** Access-token lifetime in seconds (default 300). */
  readonly ttl?: number;
}

export interface TestOidcProvider {
  /** The issuer URL (no trailing slash), as the discovery document states it. */
  readonly issuer: string;
  /** The client secret shared by all test clients. */
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

export interface OidcProviderOptions {
  readonly clients: Record<string, OidcClientSpec>;
  /** Audience used when a token request names no resource. */
  readonly defaultResource: string;
  /** JWS algorithm of access tokens (default ES256). */
  readonly alg?: 'ES256' | 'RS256' | 'EdDSA' | 'PS256';
  /** Reuse these private JWKs instead of generating new ones. */
  readonly keys?: JWK[];
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

export async function startOidcProvider(o: OidcProviderOptions): Promise<TestOidcProvider> {
  const alg = o.alg ?? 'ES256';
  const secret = randomBytes(24).toString('base64url');
  let keys = o.keys ?? (await newKeys(alg));
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  let jwksFetches = 0;
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/jwks')) jwksFetches++;
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const build = (signingKeys: JWK[]) => {
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
    // Expected token-endpoint errors (invalid_target, …) are answered; keep the test output quiet.
    provider.on('server_error', () => undefined);
    return provider;
  };
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
      });
      const json = (await res.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!res.ok || !json.access_token)
        throw new Error(`token request for ${clientId} failed: ${res.status} ${json.error}: ${json.error_description}`);
      return json.access_token;
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
