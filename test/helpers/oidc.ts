// A real OpenID Provider (oidc-provider) on 127.0.0.1 for the control-plane tests and
// benchmark: the development identity provider of `stele dev-idp` (src/control/dev-idp.ts),
// with the clients and claims each test names.
import { type DevIdp, type DevIdpClient, type DevIdpOptions, startDevIdp } from '../../src/control/dev-idp.js';

export type OidcClientSpec = DevIdpClient;
export type TestOidcProvider = DevIdp;
export type OidcProviderOptions = Omit<DevIdpOptions, 'host' | 'port'>;

export function startOidcProvider(o: OidcProviderOptions): Promise<TestOidcProvider> {
  return startDevIdp(o);
}
