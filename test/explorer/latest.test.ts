// The overview's "Latest entries" lists the eight newest entries, verified, also when the
// last record bundle holds a single entry (257 entries: leaf 256 alone in bundle 1), where it
// listed that one entry only. An entry's fields are named in words; the header's search box
// is cleared off the search page.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestBrowser, hasChromium, launchBrowser } from '../helpers/browser.js';
import { type SteleChild, anchorMany, ensureBuilt, sha256hex, startStele } from '../helpers/explorer-servers.js';

describe.skipIf(!hasChromium())('explorer: latest entries across a bundle boundary', () => {
  let stele: SteleChild;
  let browser: TestBrowser;

  beforeAll(async () => {
    ensureBuilt();
    [stele, browser] = await Promise.all([startStele({ origin: 'latest.test/log' }), launchBrowser()]);
    await anchorMany(
      stele.url,
      Array.from({ length: 257 }, (_, i) => ({ digest: sha256hex(`latest ${i}`), artifact: `build-${i}.tgz` })),
    );
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stele?.stop();
  });

  it('shows the eight newest, newest first, each verified', async () => {
    const size = (await (await fetch(`${stele.url}/api/ledger/checkpoint`)).json()).treeSize as number;
    expect(size % 256).toBe(1);
    const { page, errors } = await browser.page();
    await page.goto(`${stele.url}/`);
    await page.waitForSelector('[data-testid=cp-time]', { timeout: 30_000 });
    const rows = page.locator('section[aria-labelledby=latest-h] [data-testid=entries] tbody tr');
    const seqs = await rows.evaluateAll((trs) => trs.map((r) => Number(r.getAttribute('data-seq'))));
    expect(seqs).toEqual(Array.from({ length: 8 }, (_, i) => size - 1 - i));
    expect(await rows.evaluateAll((trs) => trs.every((r) => r.getAttribute('data-status') === 'PASS'))).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("names an entry's fields in words, its time as a time", async () => {
    const { page } = await browser.page();
    await page.goto(`${stele.url}/#/entry/3`);
    await page.waitForSelector('[data-testid=entry][data-status=PASS]', { timeout: 30_000 });
    const terms = await page.locator('[data-testid=entry] dl.fields dt').allInnerTexts();
    expect(terms).toEqual(
      expect.arrayContaining(['Format version', 'Type', 'Result', 'Digest (SHA-256)', 'Recorded at', 'Artifact']),
    );
    expect(terms).not.toContain('artifactId');
    expect(await page.locator('[data-testid=entry] dl.fields time').getAttribute('datetime')).toMatch(
      /^\d{4}-\d\d-\d\dT/,
    );
    await page.close();
  });

  it("keeps the header's search box to the search page: no stale text on other pages", async () => {
    const { page } = await browser.page();
    await page.goto(`${stele.url}/`);
    const box = page.locator('#header [data-testid=search-input]');
    await box.fill('build-7.tgz');
    await box.press('Enter');
    await page.waitForURL(/#\/search\?q=build-7\.tgz/);
    expect(await box.inputValue()).toBe('build-7.tgz');
    await page.goto(`${stele.url}/#/entries`);
    await expect.poll(() => box.inputValue()).toBe('');
    await page.goBack();
    await expect.poll(() => box.inputValue()).toBe('build-7.tgz');
    await page.close();
  });
});
