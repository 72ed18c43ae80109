// The digest hints' budget is the operator's (--digest-hints-mib, STELE_DIGEST_HINTS_MIB,
// [server].digest_hints_mib): resolved as every server setting is, bounded, and handed to the
// index a server opens. A server given 0 never builds hints however many lookups it answers;
// one left at the default builds them after its 1,000th (the index's info line says so).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DIGEST_HINTS_MIB, resolveServeConfig } from '../../src/serve/config.js';
import { type RunningServe, Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';

beforeAll(ensureBuilt, 180_000);
const sb = new Sandbox('stele-hints-setting-');
afterAll(() => sb.cleanup());

const BUILT = 'digest lookups start from the hints in memory';

describe('the digest hints setting', () => {
  it('comes from a flag over the environment over the file, and is bounded', () => {
    const file = join(sb.root, 'stele.toml');
    writeFileSync(file, '[server]\ndigest_hints_mib = 128\n');
    expect(resolveServeConfig({}, {}).digestHintsMib).toBeUndefined();
    expect(resolveServeConfig({ config: file }, {}).digestHintsMib).toBe(128);
    expect(resolveServeConfig({ config: file }, { STELE_DIGEST_HINTS_MIB: '0' }).digestHintsMib).toBe(0);
    expect(
      resolveServeConfig({ config: file, digestHintsMib: '16' }, { STELE_DIGEST_HINTS_MIB: '0' }).digestHintsMib,
    ).toBe(16);
    expect(resolveServeConfig({ digestHintsMib: String(MAX_DIGEST_HINTS_MIB) }, {}).digestHintsMib).toBe(
      MAX_DIGEST_HINTS_MIB,
    );
    expect(() => resolveServeConfig({ digestHintsMib: String(MAX_DIGEST_HINTS_MIB + 1) }, {})).toThrow(
      `digest hints must be 0..${MAX_DIGEST_HINTS_MIB} MiB`,
    );
    expect(() => resolveServeConfig({}, { STELE_DIGEST_HINTS_MIB: '-1' })).toThrow('must be a non-negative integer');
  });

  it('a server over the limit refuses to start with one line and exit code 2', async () => {
    const r = await sb.run(['serve', '--data-dir', join(sb.root, 'refused'), '--digest-hints-mib', '5000']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`stele: digest hints must be 0..${MAX_DIGEST_HINTS_MIB} MiB`);
  });

  /** A server with one entry, asked for it by digest 1,100 times; its log lines at info. */
  async function lookedUp(name: string, args: string[]): Promise<RunningServe> {
    const srv = await startServe({
      dataDir: join(sb.root, name),
      origin: `hints.test/${name}`,
      args: ['--log-level', 'info', ...args],
    });
    const digest = 'ab'.repeat(32);
    await postAnchor(srv.url, digest);
    for (let i = 0; i < 1100; i++) {
      const res = await fetch(`${srv.url}/api/ledger/entry?hash=${digest}`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      // The build runs in steps between requests: give it turns of the event loop at the end.
      if (i >= 1000) await new Promise((r) => setTimeout(r, 5));
    }
    return srv;
  }

  it('reaches the index a server opens: the default builds hints, 0 none', { timeout: 60_000 }, async () => {
    const byDefault = await lookedUp('default', []);
    const none = await lookedUp('none', ['--digest-hints-mib', '0']);
    try {
      expect(byDefault.stderr()).toContain(BUILT);
      expect(none.stderr()).not.toContain(BUILT);
      expect(none.stderr()).not.toContain("outgrew the hints' budget");
    } finally {
      await Promise.all([byDefault.stop(), none.stop()]);
    }
  });
});
