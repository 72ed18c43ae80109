// The local enterprise path, as a newcomer runs it: `stele dev-idp serve` (a real
// oidc-provider on loopback), `stele serve --enterprise` on the same data directory, and
// tokens from `stele dev-idp token --role …` passing /v1 end to end through `stele control`
// — all subprocesses. The client secret never appears in any output; tokens go to stdout only.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, type CliRun, type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';

const sb = new Sandbox('stele-dev-idp-');
const dataDir = join(sb.work, '.stele');
const outputs: CliRun[] = [];
let idp: ChildProcess;
let idpLine: { issuer: string; audience: string; controlConfig: { path: string; status: string }; roles: string[] };
let server: RunningServe;

/** `stele …` in the sandbox, its output kept for the secret check. */
async function stele(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const r = await sb.run(args, env);
  outputs.push(r);
  return r;
}

async function token(role: string): Promise<string> {
  const r = await stele(['dev-idp', 'token', '--role', role, '--data-dir', dataDir]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toBe('');
  return r.stdout.trim();
}

beforeAll(async () => {
  await ensureBuilt();
  idp = spawn(process.execPath, [CLI, 'dev-idp', 'serve', '--data-dir', dataDir, '--port', '0', '--json'], {
    cwd: sb.work,
    env: sb.env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  idp.stderr!.on('data', (d) => (err += d));
  const [line] = (await Promise.race([
    once(idp.stdout!, 'data'),
    once(idp, 'close').then(([code]) => {
      throw new Error(`dev-idp exited ${code}: ${err}`);
    }),
  ])) as [Buffer];
  idpLine = JSON.parse(String(line));
  outputs.push({ code: 0, stdout: String(line), stderr: err });
  server = await startServe({ dataDir, origin: 'dev-idp.test/log', args: ['--enterprise'] });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (idp && idp.exitCode === null) {
    idp.kill('SIGTERM');
    await once(idp, 'exit');
  }
  sb.cleanup();
});

describe('stele dev-idp', () => {
  it('listens on loopback only and points the data directory at itself', async () => {
    expect(idpLine.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(idpLine.roles).toEqual(['admin', 'analyst', 'service']);
    expect(idpLine.controlConfig).toEqual({ path: join(dataDir, 'control', 'control.toml'), status: 'written' });
    const toml = readFileSync(idpLine.controlConfig.path, 'utf8');
    expect(toml).toContain(`issuer = "${idpLine.issuer}"`);
    expect(toml).toContain(`audience = "${idpLine.audience}"`);
    // The state holding the client secret is the user's alone.
    expect(statSync(join(dataDir, 'dev-idp.json')).mode & 0o777).toBe(0o600);

    for (const host of ['0.0.0.0', '192.0.2.1', '::']) {
      const r = await stele(['dev-idp', 'serve', '--host', host, '--port', '0', '--data-dir', join(sb.root, 'x')]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^stele: the development identity provider listens on loopback only/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
    // An existing control.toml naming another issuer is left alone, and the output says so.
    const other = join(sb.root, 'other');
    mkdirSync(join(other, 'control'), { recursive: true });
    const mine =
      '[control.oidc]\nissuer = "https://login.example.com/realms/acme"\naudience = "https://stele.example.com/v1"\n';
    writeFileSync(join(other, 'control', 'control.toml'), mine);
    const second = spawn(process.execPath, [CLI, 'dev-idp', 'serve', '--data-dir', other, '--port', '0'], {
      cwd: sb.work,
      env: sb.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let said = '';
    second.stdout!.on('data', (d) => (said += d));
    while (!/names another issuer/.test(said) && second.exitCode === null) await new Promise((r) => setTimeout(r, 50));
    second.kill('SIGTERM');
    await once(second, 'exit');
    outputs.push({ code: 0, stdout: said, stderr: '' });
    expect(said).toMatch(
      /control\.toml names another issuer: set \[control\.oidc\] issuer = "http:\/\/127\.0\.0\.1:\d+"/,
    );
    expect(readFileSync(join(other, 'control', 'control.toml'), 'utf8')).toBe(mine);

    const dup = await stele(['dev-idp', 'serve', '--data-dir', dataDir, '--port', new URL(idpLine.issuer).port]);
    expect(dup.code).toBe(3);
    expect(dup.stderr).toMatch(/already in use/);
  });

  it('mints tokens for the three roles, on stdout only, with the claims the control plane reads', async () => {
    const claims = {
      admin: { roles: ['admin'], amr: ['pwd', 'hwk'] },
      analyst: { roles: ['analyst'], amr: ['pwd', 'hwk'] },
      service: { roles: ['service'] },
    };
    for (const [role, want] of Object.entries(claims)) {
      const jwt = decodeJwt(await token(role));
      expect(jwt).toMatchObject({ iss: idpLine.issuer, aud: idpLine.audience, sub: role, ...want });
    }
    const bad = await stele(['dev-idp', 'token', '--role', 'root', '--data-dir', dataDir]);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    const none = await stele(['dev-idp', 'token', '--role', 'admin', '--data-dir', join(sb.root, 'nowhere')]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no development identity provider for .*dev-idp serve/);
  });

  it("the README's enterprise path runs: evaluate, lease, rotate, audit --follow, with roles enforced", async () => {
    const endpoint = { STELE_CONTROL_ENDPOINT: server.url };
    const service = { ...endpoint, STELE_CONTROL_TOKEN: await token('service') };
    const q3 = ['--principal', 'User::"alice"', '--action', 'Action::"read"', '--resource', 'Document::"q3"'];

    // The starter policy denies everything: a decision, recorded, not an identity-provider error.
    const denied = await stele(['control', 'evaluate', ...q3, '--json'], service);
    expect(denied.code, denied.stderr).toBe(1);
    expect(JSON.parse(denied.stdout)).toMatchObject({ decision: 'deny', ledger_entry_id: expect.any(String) });

    // A policy as the README writes it; policies hot-reload.
    mkdirSync(join(dataDir, 'control', 'policy'), { recursive: true });
    writeFileSync(
      join(dataDir, 'control', 'policy', 'policies.cedar'),
      'permit (principal, action, resource) when { context.roles.contains("service") };\n',
    );
    let lease: CliRun | undefined;
    for (let i = 0; i < 100; i++) {
      lease = await stele(['control', 'lease', '--doc-id', 'q3', '--compartment', 'demo', '--ttl', '600s'], service);
      if (lease.code === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(lease!.code, lease!.stdout + lease!.stderr).toBe(0);
    expect(lease!.stdout).toMatch(/^lease lse_/);

    // admin (with MFA) rotates; service and analyst may not.
    const rotate = await stele(['control', 'rotate'], { ...endpoint, STELE_CONTROL_TOKEN: await token('admin') });
    expect(rotate.code, rotate.stderr).toBe(0);
    const analyst = { ...endpoint, STELE_CONTROL_TOKEN: await token('analyst') };
    const refused = await stele(['control', 'rotate'], analyst);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/403 /);
    expect((await stele(['control', 'rotate'], service)).code).toBe(2);

    // audit --follow (the README's line) streams verified events and keeps following.
    const follow = spawn(process.execPath, [CLI, 'control', 'audit', '--follow'], {
      cwd: sb.work,
      env: sb.env(analyst),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let seen = '';
    follow.stdout!.on('data', (d) => (seen += d));
    // Epoch 1's key_epoch event comes first (it is recorded at start-up); wait for the rotation's, the last event.
    const deadline = Date.now() + 30_000;
    while (!/key_epoch epoch 2 /.test(seen) && Date.now() < deadline && follow.exitCode === null)
      await new Promise((r) => setTimeout(r, 100));
    expect(follow.exitCode).toBeNull(); // still following
    follow.kill('SIGTERM');
    await once(follow, 'exit');
    const lines = seen.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l).toMatch(/^ok {3}#/);
    expect(seen).toMatch(/policy_evaluation/);
    expect(seen).toMatch(/access_decision/);
    expect(seen).toMatch(/key_epoch epoch 2 /);
    outputs.push({ code: 0, stdout: seen, stderr: '' });

    // --no-follow ends after the stored events.
    const stored = await stele(['control', 'audit', '--no-follow'], analyst);
    expect(stored.code, stored.stderr).toBe(0);
  });

  it('never prints the client secret', () => {
    const { secret } = JSON.parse(readFileSync(join(dataDir, 'dev-idp.json'), 'utf8')) as { secret: string };
    expect(secret.length).toBeGreaterThan(20);
    for (const o of outputs) {
      expect(o.stdout).not.toContain(secret);
      expect(o.stderr).not.toContain(secret);
    }
  });
});
