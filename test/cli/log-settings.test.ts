// Log-defining settings are kept with the log (issue 20): a restart that omits the witnesses
// uses the stored ones, a restart with different ones is refused unless --reconfigure, and
// an edited policy file counts as a change. Every setting is guarded (issue 31): adding
// witnesses, demo witnesses, a mirror, a threshold, a policy or a mirror quorum to what is
// stored is a change too, refused with one line (exit 2) naming it; the start-up summary lists
// every witness and mirror and the quorum.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVE_DEFAULTS, type ServeConfig } from '../../src/serve/config.js';
import { SIG_ED25519, SeedSigner, makeVerifier } from '../../src/core/note.js';
import { type RunningMirror, startMirror } from '../../src/mirror/host.js';
import { reconcileLogSettings } from '../../src/serve/log-settings.js';
import { settingsFile, settingsObject } from '../../src/serve/settings-home.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { type RunningWitness, startWitness } from '../../src/witness/host.js';
import { originHash } from '../../src/witness/protocol.js';
import { writeTestKey } from '../helpers/audit.js';
import { CLI, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';

beforeAll(ensureBuilt, 180_000);

const witnessCount = async (url: string) =>
  ((await (await fetch(`${url}/api/ledger/key`)).json()) as { witnesses: unknown[] }).witnesses.length;

describe('stele serve keeps its witness settings', () => {
  it('uses the stored witnesses when a restart omits them, refuses different ones, and changes them with --reconfigure', async () => {
    const dataDir = scratchDir('stele-settings-');
    const origin = 'settings.test/log';
    const first = await startServe({ dataDir, origin, args: ['--demo-witnesses', '2'] });
    expect(await witnessCount(first.url)).toBe(2);
    await first.stop();

    const forgetful = await startServe({ dataDir, origin });
    expect(await witnessCount(forgetful.url)).toBe(2);
    await forgetful.stop();

    await expect(startServe({ dataDir, origin, args: ['--demo-witnesses', '1'] })).rejects.toThrow(
      /exited with 2: .*started with demo witnesses \(--demo-witnesses\) 2.*--reconfigure/s,
    );

    const changed = await startServe({ dataDir, origin, args: ['--demo-witnesses', '1', '--reconfigure'] });
    expect(await witnessCount(changed.url)).toBe(1);
    await changed.stop();
    const after = await startServe({ dataDir, origin });
    expect(await witnessCount(after.url)).toBe(1);
    await after.stop();
  }, 120_000);
});

describe('stele serve refuses settings added to the stored ones (exit 2, one line)', () => {
  const origin = 'guard.test/log';
  const silent = pino({ level: 'silent' });
  const logVerifier = makeVerifier(origin, SIG_ED25519, new SeedSigner(origin, new Uint8Array(32).fill(31)).publicKey);
  const sb = new Sandbox('stele-settings-guard-');
  let witness: RunningWitness;
  let mirror: RunningMirror;
  const dataDir = join(sb.root, 'log');

  beforeAll(async () => {
    await writeTestKey(dataDir, origin, 31);
    witness = await startWitness({
      dataDir: join(sb.root, 'w1'),
      name: 'witness1.example.com',
      logs: [logVerifier],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    mirror = await startMirror({
      dataDir: join(sb.root, 'm1'),
      name: 'mirror1.example.com',
      logs: [{ verifier: logVerifier }],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
      fsync: false,
    });
  }, 60_000);
  afterAll(async () => {
    await witness?.close();
    await mirror?.close();
    sb.cleanup();
  });

  const serveArgs = (...extra: string[]) => [
    'serve',
    '--data-dir',
    dataDir,
    '--origin',
    origin,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--log-level',
    'warn',
    ...extra,
  ];
  const policyOf = async (url: string) =>
    ((await (await fetch(`${url}/api/ledger/key`)).json()) as { witnessPolicy: { policy: string } }).witnessPolicy
      .policy;

  /** `stele serve` without --json: its start-up summary, up to the `try` line; then stopped. */
  async function summaryOf(args: string[]): Promise<string> {
    const proc = spawn(process.execPath, [CLI, ...args], { env: sb.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stderr.on('data', (d) => (err += d));
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    try {
      await new Promise<void>((resolve, reject) => {
        proc.stdout.on('data', (d) => {
          out += d;
          if (out.includes('  try ')) resolve();
        });
        proc.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
      });
      return out;
    } finally {
      proc.kill('SIGTERM');
      await exited;
    }
  }

  it('witness1 at threshold 1 stored: --demo-witnesses 3 and --mirror are refused, and the published policy stays', async () => {
    const w1 = `${witness.vkey}=${witness.url}`;
    const first = await startServe({ dataDir, origin, args: ['--witness', w1, '--witness-threshold', '1'] });
    const pinned = await policyOf(first.url);
    await first.stop();
    expect(pinned).toContain('witness1.example.com');

    const demo = await sb.run(serveArgs('--demo-witnesses', '3'));
    expect(demo.code).toBe(2);
    expect(demo.stderr.trim().split('\n')).toHaveLength(1);
    expect(demo.stderr).toMatch(
      /started with demo witnesses \(--demo-witnesses\) none, and this start gives 3: .*pass --reconfigure/,
    );
    const mirrored = await sb.run(serveArgs('--mirror', `${mirror.vkey}=${mirror.url}`));
    expect(mirrored.code).toBe(2);
    expect(mirrored.stderr.trim().split('\n')).toHaveLength(1);
    expect(mirrored.stderr).toMatch(
      /started with mirrors \(--mirror\) none, and this start gives mirror1\.example\.com/,
    );

    const again = await startServe({ dataDir, origin });
    expect(await policyOf(again.url)).toBe(pinned);
    await again.stop();
    expect(JSON.parse(readFileSync(join(dataDir, 'private', 'log-settings.json'), 'utf8'))).toMatchObject({
      witnessThreshold: 1,
      demoWitnesses: null,
      mirrors: null,
    });
  }, 120_000);

  it('the start-up summary lists every witness and mirror, and the quorum', async () => {
    const text = await summaryOf(
      serveArgs(
        '--witness',
        `${witness.vkey}=${witness.url}`,
        '--witness-threshold',
        '1',
        '--mirror',
        `${mirror.vkey}=${mirror.url}`,
        '--reconfigure',
      ),
    );
    expect(text).toContain(`  witness   ${witness.vkey}\n`);
    expect(text).toContain(`  mirror    ${mirror.vkey} (copy at ${mirror.url}/${originHash(origin)}/)\n`);
    // The mirror is listed in the policy but not required: the quorum is the witness's.
    expect(text).toContain('  quorum    all of (witness1.example.com)\n');
    expect(text).not.toContain('demo witnesses');
    // Demo witnesses keep their state in the data directory: the summary says what that means.
    const demo = await summaryOf([
      'serve',
      '--data-dir',
      join(sb.root, 'demo'),
      '--origin',
      'demo.guard.test/log',
      '--port',
      '0',
      '--demo-witnesses',
      '2',
    ]);
    expect(demo).toMatch(/ {2}witness {3}witness1\.demo\.stele\+.*\n {2}witness {3}witness2\.demo\.stele\+/);
    expect(demo).toContain('  quorum    all of (witness1.demo.stele, witness2.demo.stele)\n');
    expect(demo).toContain('they protect against nothing a restore of it does');
  }, 60_000);
});

describe('reconcileLogSettings', () => {
  /** A start of a local log: its settings kept in the data directory. */
  const reconcile = (c: ServeConfig) => reconcileLogSettings(c, settingsFile(c.dataDir));
  /** A start that opened: its settings are recorded. */
  const start = async (c: ServeConfig) => {
    const r = await reconcile(c);
    await r.record();
    return r;
  };
  const cfg = (dataDir: string, extra: Partial<ServeConfig> = {}): ServeConfig => ({
    ...SERVE_DEFAULTS,
    dataDir,
    ...extra,
  });
  const a = 'w1.test+01234567+AAAA=https://w1.test';
  const b = 'w2.test+89abcdef+BBBB=https://w2.test';

  it('compares external witnesses as a set and names the stored ones when refusing', async () => {
    const dir = scratchDir('stele-settings-');
    await start(cfg(dir, { witnesses: `${a},${b}`, witnessThreshold: 2 }));
    const reordered = await start(cfg(dir, { witnesses: `${b},${a}`, witnessThreshold: 2 }));
    expect(reordered.applied).toEqual([]);
    const omitted = await start(cfg(dir));
    expect(omitted.applied).toEqual(['witnesses', 'witnessThreshold']);
    expect(omitted.cfg.witnesses).toBe(`${a},${b}`);
    expect(omitted.cfg.witnessThreshold).toBe(2);
    await expect(reconcile(cfg(dir, { witnesses: a }))).rejects.toThrow(
      /started with witnesses \(--witness\) w1\.test, w2\.test/,
    );
  });

  it('refuses witnesses added to a log stored without them unless --reconfigure, and records nothing for a refused start', async () => {
    const dir = scratchDir('stele-settings-');
    await start(cfg(dir));
    await expect(reconcile(cfg(dir, { witnesses: a }))).rejects.toThrow(
      /^this log was started with witnesses \(--witness\) none, and this start gives w1\.test: .*--reconfigure/,
    );
    expect((await start(cfg(dir))).cfg.witnesses).toBeUndefined();
    expect((await start(cfg(dir, { witnesses: a, reconfigure: true }))).applied).toEqual([]);
    expect((await start(cfg(dir))).cfg.witnesses).toBe(a);
    const unopened = scratchDir('stele-settings-');
    await reconcile(cfg(unopened, { witnesses: a }));
    expect(existsSync(join(unopened, 'private'))).toBe(false);
  });

  it('refuses every setting added beside the stored ones, naming it in one line', async () => {
    const dir = scratchDir('stele-settings-');
    await start(cfg(dir, { witnesses: a, witnessThreshold: 1 }));
    const policy = join(dir, 'witness.policy');
    writeFileSync(policy, 'quorum none\n');
    const m = 'm1.test+01234567+AAAA=https://m1.test';
    const cases: [Partial<ServeConfig>, RegExp][] = [
      [{ demoWitnesses: 3 }, /demo witnesses \(--demo-witnesses\) none, and this start gives 3/],
      [{ mirrors: m }, /mirrors \(--mirror\) none, and this start gives m1\.test/],
      [{ mirrors: m, mirrorQuorum: 1 }, /mirrors \(--mirror\) none, and this start gives m1\.test/],
      [{ witnessThreshold: 2 }, /witness threshold \(--witness-threshold\) 1, and this start gives 2/],
      [{ witnessPolicy: policy }, /witness policy \(--witness-policy\) none, and this start gives .*witness\.policy/],
      [{ witnesses: `${a},${b}` }, /witnesses \(--witness\) w1\.test, and this start gives w1\.test, w2\.test/],
    ];
    for (const [extra, why] of cases) {
      const err = await reconcile(cfg(dir, extra)).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err?.message, JSON.stringify(extra)).toMatch(why);
      expect(err?.message.split('\n')).toHaveLength(1);
    }
    // Nothing was stored by the refused starts; the stored settings still apply.
    const again = await start(cfg(dir));
    expect(again.cfg).toMatchObject({ witnesses: a, witnessThreshold: 1 });
    expect(again.cfg.demoWitnesses ?? 0).toBe(0);
    expect(again.cfg.mirrors).toBeUndefined();
  });

  it('refuses a stored policy file whose content changed', async () => {
    const dir = scratchDir('stele-settings-');
    const policy = join(dir, 'witness.policy');
    writeFileSync(policy, 'quorum none\n');
    await start(cfg(dir, { witnessPolicy: policy }));
    expect((await start(cfg(dir))).cfg.witnessPolicy).toBe(policy);
    writeFileSync(policy, 'quorum none\n# edited\n');
    await expect(reconcile(cfg(dir))).rejects.toThrow(/has changed; pass --reconfigure/);
    await expect(reconcile(cfg(dir, { witnessPolicy: policy }))).rejects.toThrow(/--reconfigure/);
    expect((await start(cfg(dir, { witnessPolicy: policy, reconfigure: true }))).applied).toEqual([]);
    expect((await start(cfg(dir))).cfg.witnessPolicy).toBe(policy);
  });
});

describe('settings kept in an object store (the S3 log: test/s3/rgw-witness.test.ts runs it on Ceph)', () => {
  const a = 'w1.test+01234567+AAAA=https://w1.test';
  const b = 'w2.test+89abcdef+BBBB=https://w2.test';
  const cfg = (dataDir: string, witnesses: string): ServeConfig => ({ ...SERVE_DEFAULTS, dataDir, witnesses });

  it('lets only one of two starts that read at once store its settings, unless both store the same', async () => {
    const dir = scratchDir('stele-settings-object-');
    const home = settingsObject(new FsObjectStore(dir), `${dir}/log-settings.json`);
    const [first, second, same] = await Promise.all([
      reconcileLogSettings(cfg(dir, a), home),
      reconcileLogSettings(cfg(dir, b), home),
      reconcileLogSettings(cfg(dir, a), home),
    ]);
    await first.record();
    await same.record();
    await expect(second.record()).rejects.toThrow(/another start stored other settings in .*start again/);
    const later = await reconcileLogSettings(cfg(dir, ''), home);
    expect(later.cfg.witnesses).toBe(a);
  });
});
