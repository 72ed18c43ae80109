// `stele ledger anchor` of a file the log already holds, as a subprocess against `stele serve`:
// the log answers with the first entry (nothing appended) and the CLI says so; the proof it
// keeps is that entry's, and it verifies.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';

describe('anchoring the same file twice', () => {
  let sb: Sandbox;
  let serve: RunningServe;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-anchor-twice-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'anchor-twice.test/log' });
    sb.file('release.tgz', 'the release bytes\n');
    expect(
      (await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId, '--scope', 'rel'])).code,
    ).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('returns the first entry and says it was already anchored', async () => {
    const first = await sb.json(['ledger', 'anchor', 'release.tgz']);
    expect(first.code).toBe(0);
    expect(first.out.existing).toBe(false);
    const size = (await (await fetch(`${serve.url}/api/ledger/checkpoint`)).json()).treeSize as number;
    const again = await sb.run(['ledger', 'anchor', 'release.tgz']);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^Already anchored release\.tgz$/m);
    expect(again.stdout).toContain(`entry id    ${first.out.entryId}`);
    expect((await (await fetch(`${serve.url}/api/ledger/checkpoint`)).json()).treeSize).toBe(size);
    // Under another artifact label it is a new entry.
    const other = await sb.json(['ledger', 'anchor', 'release.tgz', '--artifact', 'release-copy.tgz']);
    expect(other.code).toBe(0);
    expect(other.out.entryId).not.toBe(first.out.entryId);
    const verify = await sb.run(['ledger', 'verify', 'release.tgz']);
    expect(verify.code).toBe(0);
  }, 120_000);

  it('--json says existing; --allow-duplicate appends a second entry on purpose', async () => {
    const again = await sb.json(['ledger', 'anchor', 'release.tgz']);
    expect(again.code).toBe(0);
    expect(again.out.existing).toBe(true);
    const forced = await sb.json(['ledger', 'anchor', 'release.tgz', '--allow-duplicate']);
    expect(forced.code).toBe(0);
    expect(forced.out.existing).toBe(false);
    expect(forced.out.leafIndex).toBeGreaterThan(again.out.leafIndex);
    expect(forced.out.entry.digest).toBe(again.out.entry.digest);
  }, 120_000);
});
