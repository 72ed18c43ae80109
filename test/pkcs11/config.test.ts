// The checkpoint signer is configured like every other server setting: flag over
// environment over the TOML file; anything but "file" or a pkcs11: URI is refused.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveServeConfig } from '../../src/serve/config.js';
import { ConfigError } from '../../src/settings/errors.js';
import { parseControlConfig } from '../../src/control/config.js';
import { scratchDir } from '../helpers/tmp.js';

const URI =
  'pkcs11:token=stele;object=log?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin';

describe('--signer / STELE_SIGNER / [server].signer', () => {
  it('takes the flag over the environment over the file, and defaults to the key file', () => {
    const file = join(scratchDir('stele-signer-cfg-'), 'stele.toml');
    writeFileSync(file, `[server]\nsigner = "${URI.replace('object=log', 'object=from-file')}"\n`);
    expect(resolveServeConfig({}, {}).signer).toBeUndefined();
    expect(resolveServeConfig({ config: file }, {}).signer).toContain('object=from-file');
    expect(resolveServeConfig({ config: file }, { STELE_SIGNER: URI }).signer).toBe(URI);
    expect(resolveServeConfig({ config: file, signer: 'file' }, { STELE_SIGNER: URI }).signer).toBe('file');
  });

  it('refuses anything else; the S3/AWS backend takes a pkcs11: URI too (test/s3/rgw-hsm.test.ts)', () => {
    expect(() => resolveServeConfig({ signer: '/etc/key' }, {})).toThrow(ConfigError);
    expect(() => resolveServeConfig({ signer: '/etc/key' }, {})).toThrow(/signer must be "file" or a pkcs11: URI/);
    expect(resolveServeConfig({ signer: URI, backend: 'aws' }, {}).signer).toBe(URI);
  });

  it('control plane: signer_key and the pkcs11 KEK provider need pkcs11: URIs', () => {
    const oidc = { issuer: 'https://idp.example', audience: 'stele' };
    const c = parseControlConfig({ oidc, signer_key: URI, kek: { provider: 'pkcs11', pkcs11_uri: URI } }, '/d');
    expect(c.signerKey).toBe(URI);
    expect(c.kek).toMatchObject({ provider: 'pkcs11', pkcs11Uri: URI });
    expect(() => parseControlConfig({ oidc, kek: { provider: 'pkcs11' } }, '/d')).toThrow(/pkcs11_uri/);
    expect(() => parseControlConfig({ oidc, signer_key: '/etc/key' }, '/d')).toThrow(/signer_key/);
    expect(parseControlConfig({ oidc, signer_key: 'file' }, '/d').signerKey).toBeUndefined();
  });
});
