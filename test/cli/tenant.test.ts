// Tenants end to end (issue 16): the CLI sends its tenant (ledger init --tenant,
// STELE_LEDGER_TENANT), the entry records it, `ledger verify` shows it; in production the
// token decides, and a client naming another tenant is refused (403, one line, exit 2).
// Labels the log would refuse are refused by the CLI first.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';

describe('tenants from the CLI to the entry', () => {
  let sb: Sandbox;
  let serve: RunningServe;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-tenant-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'tenant.test/log' });
    sb.file('a.tgz', 'package a\n');
    sb.file('b.tgz', 'package b\n');
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      serve.url,
      '--tenant',
      'acme',
      '--scope',
      'releases',
      '--trust-key',
      serve.keyId,
    ]);
    expect(init.code, init.stderr).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('records the configured tenant and shows it in verify', async () => {
    const a = await sb.json(['ledger', 'anchor', 'a.tgz']);
    expect(a.code, a.stderr).toBe(0);
    expect(a.out.entry).toMatchObject({ tenant: 'acme', scope: 'releases', artifact: 'a.tgz' });
    const v = await sb.run(['ledger', 'verify', 'a.tgz']);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toContain('labels      artifact "a.tgz", scope "releases", tenant "acme"');
    const vj = await sb.json(['ledger', 'verify', 'a.tgz']);
    expect(vj.out.entry.tenant).toBe('acme');
  }, 60_000);

  it('takes STELE_LEDGER_TENANT over the file', async () => {
    const b = await sb.json(['ledger', 'anchor', 'b.tgz'], { STELE_LEDGER_TENANT: 'globex' });
    expect(b.code, b.stderr).toBe(0);
    expect(b.out.entry.tenant).toBe('globex');
    const text = await sb.run(['ledger', 'anchor', 'b.tgz', '--artifact', 'b-again'], {
      STELE_LEDGER_TENANT: 'globex',
    });
    expect(text.stdout).toContain('tenant "globex"');
  }, 60_000);

  it('refuses a label the log would refuse, before sending anything (exit 2, one line)', async () => {
    const r = await sb.run(['ledger', 'anchor', 'a.tgz', '--artifact', 'evil\u202egpj.exe']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^stele: artifact must not contain control, separator, bidi or invisible format characters \(found U\+202E\)\n$/,
    );
    const t = await sb.run(['ledger', 'anchor', 'a.tgz'], { STELE_LEDGER_TENANT: 'acme\u200b' });
    expect(t.code).toBe(2);
    expect(t.stderr).toMatch(/tenant must not contain .*U\+200B/);
  }, 60_000);
});

describe('tenants in production: the token decides', () => {
  it('refuses a tenant the token is not bound to with a clear 403', async () => {
    await ensureBuilt();
    const sb = new Sandbox('stele-tenant-prod-');
    const serve = await startServe({
      dataDir: join(sb.root, 'data'),
      origin: 'tenant-prod.test/log',
      args: ['--mode', 'production', '--anchor-tokens', 'ci=0123456789abcdef0123@acme'],
    });
    try {
      sb.file('pkg.tgz', 'production package\n');
      expect(
        (await sb.run(['ledger', 'init', '--endpoint', serve.url, '--tenant', 'globex', '--trust-key', serve.keyId]))
          .code,
      ).toBe(0);
      // No token: the 401 says how to give one.
      const anonymous = await sb.run(['ledger', 'anchor', 'pkg.tgz']);
      expect(anonymous.code).toBe(2);
      expect(anonymous.stderr).toMatch(
        /^stele: http:\/\/\S+\/api\/ledger\/anchor: the log requires a bearer token to anchor: set STELE_LEDGER_TOKEN to a token its operator issued \(STELE_ANCHOR_TOKENS on the server\)\n$/,
      );
      const wrong = await sb.run(['ledger', 'anchor', 'pkg.tgz'], { STELE_LEDGER_TOKEN: 'not-the-token-at-all' });
      expect(wrong.stderr).toMatch(/refused the one in STELE_LEDGER_TOKEN\n$/);
      const token = { STELE_LEDGER_TOKEN: '0123456789abcdef0123' };
      const refused = await sb.run(['ledger', 'anchor', 'pkg.tgz'], token);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(
        /^stele: http:\/\/\S+\/api\/ledger\/anchor: token ci is bound to tenant "acme" and cannot write tenant "globex" \(HTTP 403, tenant_mismatch\)\n$/,
      );
      const ok = await sb.json(['ledger', 'anchor', 'pkg.tgz'], { ...token, STELE_LEDGER_TENANT: 'acme' });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.out.entry.tenant).toBe('acme');
    } finally {
      await serve.stop();
      sb.cleanup();
    }
  }, 120_000);
});
