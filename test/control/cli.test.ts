// `stele control …` as a subprocess against a running control plane: evaluate, lease,
// unwrap (demo KEK), rotate, epochs (chain and anchors verified), audit (signatures verified),
// and the exit codes.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ControlFixture, startControl } from './fixture.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function stele(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', NODE_NO_WARNINGS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe('stele control (CLI)', () => {
  let f: ControlFixture;
  let env: (client: string) => Promise<Record<string, string>>;

  beforeAll(async () => {
    f = await startControl();
    env = async (client) => ({ STELE_CONTROL_ENDPOINT: f.srv.url, STELE_CONTROL_TOKEN: await f.token(client) });
  });
  afterAll(() => f?.close());

  it('evaluates: exit 0 on allow, 1 on deny, 2 without a token or with a bad one', async () => {
    const svc = await env('svc');
    const [allow, deny, none, bad] = await Promise.all([
      stele(
        [
          'control',
          'evaluate',
          '--principal',
          'User::"alice"',
          '--action',
          'Action::"read"',
          '--resource',
          'Document::"q3-report"',
        ],
        svc,
      ),
      stele(
        [
          'control',
          'evaluate',
          '--principal',
          '{"type":"User","id":"bob"}',
          '--action',
          'Action::"read"',
          '--resource',
          'Document::"q3-report"',
          '--json',
        ],
        svc,
      ),
      stele(
        [
          'control',
          'evaluate',
          '--principal',
          'User::"alice"',
          '--action',
          'Action::"read"',
          '--resource',
          'Document::"q3-report"',
        ],
        { STELE_CONTROL_ENDPOINT: f.srv.url },
      ),
      stele(
        [
          'control',
          'evaluate',
          '--principal',
          'User::"alice"',
          '--action',
          'Action::"read"',
          '--resource',
          'Document::"q3-report"',
        ],
        { ...svc, STELE_CONTROL_TOKEN: 'x.y.z' },
      ),
    ]);
    expect(allow.code, allow.stderr).toBe(0);
    expect(allow.stdout).toMatch(/^ALLOW {2}dec_/);
    expect(allow.stdout).toMatch(/reasons +staff-read-eng/);
    expect(deny.code).toBe(1);
    expect(JSON.parse(deny.stdout)).toMatchObject({ decision: 'deny', reasons: ['deny-contractors'] });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/access token is needed/);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/401 invalid_token/);
  });

  it('leases, unwraps with the demo KEK, rotates, and unwraps the same DEK again', async () => {
    const l = await stele(
      ['control', 'lease', '--doc-id', 'q3-report', '--compartment', 'demo', '--ttl', '120s', '--json'],
      await env('svc'),
    );
    expect(l.code, l.stderr).toBe(0);
    const lease = JSON.parse(l.stdout);
    const unwrap = () =>
      stele(['control', 'unwrap', lease.wrapped_dek, '--lease-id', lease.lease_id, '--data-dir', f.dataDir, '--json']);
    const u1 = await unwrap();
    expect(u1.code, u1.stderr).toBe(0);
    const dek = JSON.parse(u1.stdout).dek;
    expect(dek).toMatch(/^[0-9a-f]{64}$/);
    const rot = await stele(['control', 'rotate'], await env('admin'));
    expect(rot.code, rot.stderr).toBe(0);
    expect(rot.stdout).toMatch(/^epoch 2 started: local:kek_/);
    const [u2, wrong, denied] = await Promise.all([
      unwrap(),
      stele([
        'control',
        'unwrap',
        lease.wrapped_dek,
        '--lease-id',
        'lse_01ARZ3NDEKTSV4RRFFQ69G5FAV',
        '--data-dir',
        f.dataDir,
      ]),
      stele(['control', 'lease', '--doc-id', 'q3-report', '--compartment', 'finance'], await env('svc')),
    ]);
    expect(JSON.parse(u2.stdout)).toMatchObject({ dek, epoch: 1 });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/unwrap failed/);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toMatch(/^DENIED {2}dec_/);
  });

  it('lists epochs with the chain and anchors verified, and follows the audit stream verifying signatures', async () => {
    const [epochs, audit, mfa] = await Promise.all([
      stele(['control', 'epochs'], await env('analyst')),
      stele(['control', 'audit', '--no-follow', '--json'], await env('analyst')),
      stele(['control', 'rotate'], await env('admin-nomfa')),
    ]);
    expect(epochs.code, epochs.stderr + epochs.stdout).toBe(0);
    expect(epochs.stdout).toMatch(/PASS {2}chain of 2 signed records, each anchored in the ledger/);
    expect(audit.code, audit.stderr).toBe(0);
    const events = audit.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events.length).toBeGreaterThan(5);
    expect(events.every((e) => e.verified === true)).toBe(true);
    expect(mfa.code).toBe(2);
    expect(mfa.stderr).toMatch(/403 mfa_required/);
  });
});
