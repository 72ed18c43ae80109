// Log-defining settings are kept with the log (issue 20): a restart that omits the witnesses
// uses the stored ones, a restart with different ones is refused unless --reconfigure, and
// an edited policy file counts as a change.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { SERVE_DEFAULTS, type ServeConfig } from '../../src/config.js';
import { reconcileLogSettings } from '../../src/serve/log-settings.js';
import { settingsFile, settingsObject } from '../../src/serve/settings-home.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { ensureBuilt, startServe } from '../helpers/cli.js';
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

  it('lets a log that had no witnesses gain them without --reconfigure, and records nothing for a refused start', async () => {
    const dir = scratchDir('stele-settings-');
    await start(cfg(dir));
    expect((await start(cfg(dir, { witnesses: a }))).applied).toEqual([]);
    expect((await start(cfg(dir))).cfg.witnesses).toBe(a);
    const unopened = scratchDir('stele-settings-');
    await reconcile(cfg(unopened, { witnesses: a }));
    expect(existsSync(join(unopened, 'private'))).toBe(false);
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
