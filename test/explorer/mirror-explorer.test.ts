/// <reference lib="dom" />
// `stele ledger mirror <dir> --with-explorer` as a subprocess, then the mirror directory
// served by a plain static file server (no API, no `?vkey=` link) and opened in Chromium:
// the explorer verifies the copy against the key the client pinned, finds a label in every
// scope by scanning the bundles (stored gzip, served without Content-Encoding), and shows a
// full newest page.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestBrowser, hasChromium, launchBrowser, screenshot } from '../helpers/browser.js';
import { type RunningServe, Sandbox, ensureBuilt as ensureCli, startServe } from '../helpers/cli.js';
import {
  type StaticServer,
  anchorMany,
  ensureBuilt as ensureExplorer,
  sha256hex,
  startStaticServer,
} from '../helpers/explorer-servers.js';

describe.skipIf(!hasChromium())('a mirror with its own explorer', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let browser: TestBrowser;
  let site: StaticServer | undefined;
  const mirrorDir = () => join(sb.work, 'mirror');

  beforeAll(async () => {
    await ensureCli();
    ensureExplorer();
    sb = new Sandbox('stele-mirror-explorer-');
    [serve, browser] = await Promise.all([
      startServe({
        dataDir: join(sb.root, 'data'),
        origin: 'mirror-explorer.test/log',
        args: ['--demo-witnesses', '1'],
      }),
      launchBrowser(),
    ]);
    await anchorMany(
      serve.url,
      Array.from({ length: 270 }, (_, i) => ({
        digest: sha256hex(`artifact ${i}`),
        artifact: i === 7 || i === 200 ? 'build-150.bin' : `build-${i}.bin`,
        scope: i === 200 ? 'nightly' : 'ci',
      })),
    );
  }, 180_000);

  afterAll(async () => {
    await site?.close();
    await browser?.close();
    await serve?.stop();
    sb?.cleanup();
  });

  it('copies the explorer and an explorer.json pinning the log key into the mirror', async () => {
    expect((await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId])).code).toBe(0);
    const r = await sb.json(['ledger', 'mirror', mirrorDir(), '--with-explorer']);
    expect(r.code).toBe(0);
    const explorer = r.out.explorer as { files: number; config: string; vkey: string };
    expect(explorer.vkey).toBe(serve.vkey);
    expect(explorer.files).toBeGreaterThan(1);
    expect(existsSync(join(mirrorDir(), 'index.html'))).toBe(true);
    expect(existsSync(join(mirrorDir(), 'checkpoint'))).toBe(true);
    // Record bundles are copied as the log stores them, gzip: the static server below sends
    // those bytes without Content-Encoding, so the explorer must recognise and gunzip them.
    expect([...readFileSync(join(mirrorDir(), 'tile/records/000')).subarray(0, 3)]).toEqual([0x1f, 0x8b, 0x08]);
    const config = JSON.parse(readFileSync(join(mirrorDir(), 'explorer.json'), 'utf8'));
    expect(config.vkey).toBe(serve.vkey);
    expect(config.origin).toBe(serve.origin);
    expect(config.witnesses).toHaveLength(1);
    expect(config.policy).toContain('quorum');
    // The text report says so too; a second run is incremental and keeps the explorer.
    const again = await sb.run(['ledger', 'mirror', mirrorDir(), '--with-explorer']);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/explorer +\d+ files and .*explorer\.json, pinned to /);
  }, 120_000);

  it('without a pinned key it refuses with one line and exit 2', async () => {
    const other = new Sandbox('stele-mirror-explorer-nopin-');
    try {
      const r = await other.run(['ledger', 'mirror', join(other.work, 'm'), '--from', serve.url, '--with-explorer']);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    } finally {
      other.cleanup();
    }
  }, 60_000);

  it('serves an explorer that verifies the copy with the pinned key, with no API and no link', async () => {
    await serve.stop(); // the log's own server is gone: only the mirror is left
    site = await startStaticServer({ roots: [mirrorDir()] });
    const { page, requests, errors } = await browser.page();
    await page.goto(`${site.url}/`);
    await page.waitForSelector('[data-testid=cp-status]:not([data-status=PENDING])', { timeout: 15_000 });
    expect(await page.locator('[data-testid=cp-status]').getAttribute('data-status')).toBe('PASS');
    expect(await page.locator('[data-testid=cp-checks] [data-check=witnesses]').getAttribute('data-status')).toBe(
      'PASS',
    );
    await screenshot(page, 'mirror-with-explorer');
    await page.goto(`${site.url}/#/trust`);
    expect(await page.locator('[data-testid=trust-vkey]').innerText()).toBe(serve.vkey);

    await page.goto(`${site.url}/#/search?q=build-150.bin`);
    await page.waitForSelector('[data-testid=label-matches] tbody tr');
    const scopes = await page
      .locator('[data-testid=label-matches] tbody tr[data-status=PASS]')
      .evaluateAll((trs) => trs.map((r) => r.getAttribute('data-scope')));
    expect(scopes.sort()).toEqual(['ci', 'nightly']);
    await screenshot(page, 'mirror-with-explorer-search');

    await page.goto(`${site.url}/#/entries`);
    await page.waitForSelector('[data-testid=page-status]:not([data-status=PENDING])');
    expect(await page.locator('[data-testid=entries] tbody tr[data-status=PASS]').count()).toBe(256);
    expect(requests.filter((u) => !u.startsWith(`${site!.url}/`))).toEqual([]);
    // A mirror is static files: its explorer.json says so, and the page never asks it for the API.
    expect(requests.filter((u) => u.includes('/api/ledger/'))).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);
});
