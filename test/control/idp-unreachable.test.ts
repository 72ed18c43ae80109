// The control plane's identity provider that cannot be reached stops `stele serve
// --enterprise` at start with one line on stderr naming the issuer's discovery document, the
// setting that names the issuer (the file's key, or STELE_OIDC_ISSUER) and the reason in
// words, exit 3 (issue 33), as storage and KMS endpoints do (test/cli/unreachable.test.ts).
// The issuer is a loopback port nothing listens on; the server is a subprocess.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';

let sb: Sandbox;
let down: string;

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-idp-down-');
  down = `http://127.0.0.1:${await freePort()}`;
}, 120_000);
afterAll(() => sb?.cleanup());

/** A data directory whose control.toml names `issuer`; returns it and the file. */
function dataDirWith(name: string, issuer: string): { dataDir: string; toml: string } {
  const dataDir = join(sb.root, name);
  const toml = join(dataDir, 'control', 'control.toml');
  mkdirSync(join(dataDir, 'control'), { recursive: true });
  writeFileSync(toml, `[control.oidc]\nissuer = "${issuer}"\naudience = "https://control.test/v1"\n`);
  return { dataDir, toml };
}

/** The lines of stderr that are not the server's JSON log. */
function plainLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => {
    if (l === '') return false;
    try {
      return typeof JSON.parse(l) !== 'object';
    } catch {
      return true;
    }
  });
}

const refused = 'connection refused (nothing listens on that port)';

describe('serve --enterprise with an identity provider that cannot be reached', () => {
  it('names the issuer, the control.toml key that names it and why, and exits 3', async () => {
    const { dataDir, toml } = dataDirWith('file', down);
    const r = await sb.run(['serve', '--enterprise', '--data-dir', dataDir, '--port', '0', '--origin', 'idp.test/log']);
    expect(plainLines(r.stderr), r.stderr).toEqual([
      `stele: cannot reach the OIDC identity provider ${down}/.well-known/openid-configuration ([control.oidc] issuer in ${toml}): ${refused}`,
    ]);
    expect(r.code).toBe(3);
  }, 60_000);

  it('names STELE_OIDC_ISSUER when the environment set the issuer', async () => {
    const { dataDir } = dataDirWith('env', 'https://idp.example.invalid');
    const r = await sb.run(
      ['serve', '--enterprise', '--data-dir', dataDir, '--port', '0', '--origin', 'idp.test/log'],
      {
        STELE_OIDC_ISSUER: down,
      },
    );
    expect(plainLines(r.stderr), r.stderr).toEqual([
      `stele: cannot reach the OIDC identity provider ${down}/.well-known/openid-configuration (STELE_OIDC_ISSUER): ${refused}`,
    ]);
    expect(r.code).toBe(3);
  }, 60_000);
});
