// A changed copy of an anchored release, verified as a subprocess against `stele serve`: it
// FAILs (exit 1) and rule 3 names the anchored file it differs from — the digest the log
// recorded under that name and the entry — where a file under a name the log never saw says
// only that it is not anchored.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import type { JsonObject } from '../helpers/json.js';

const rule3 = (out: JsonObject) => (out.checks as JsonObject[]).find((c) => c.rule === 3)!;

describe('verifying a tampered release', () => {
  let sb: Sandbox;
  let serve: RunningServe;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-tampered-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'tampered.test/log' });
    expect((await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId])).code).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('names the anchored original and its digest', async () => {
    sb.file('release-1.2.3.tgz', 'the release as built\n');
    const anchored = await sb.json(['ledger', 'anchor', 'release-1.2.3.tgz']);
    expect(anchored.code).toBe(0);
    sb.file('release-1.2.3.tgz', 'the release with a backdoor\n');
    const v = await sb.json(['ledger', 'verify', 'release-1.2.3.tgz']);
    expect(v.code).toBe(1);
    expect(v.out.result).toBe('FAIL');
    expect(rule3(v.out).detail).toBe(
      `release-1.2.3.tgz is anchored with digest ${anchored.out.digest} (entry ${anchored.out.entryId}); this file's digest is ${v.out.digest}: it differs from the anchored file`,
    );
    const text = await sb.run(['ledger', 'verify', 'release-1.2.3.tgz']);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/FAIL {2}3\. Leaf hash: release-1\.2\.3\.tgz is anchored with digest [0-9a-f]{64}/);
  }, 60_000);

  it('says only "not anchored" for a name the log never saw', async () => {
    sb.file('never-seen.bin', 'nothing anchored this\n');
    const v = await sb.json(['ledger', 'verify', 'never-seen.bin']);
    expect(v.code).toBe(1);
    expect(rule3(v.out).detail).toMatch(/^no entry in the log has the file's digest [0-9a-f]{64}: it is not anchored$/);
  }, 60_000);
});
