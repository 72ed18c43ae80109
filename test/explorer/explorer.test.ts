/// <reference lib="dom" />
// The explorer in a real browser (Debian's Chromium via playwright-core) against
// `stele serve` started from the built dist on loopback, and against static servers that
// serve the same log directory as a mirror would: faithfully, with a tile byte flipped,
// with a checkpoint signed by another key, and with a forked checkpoint signed by the log key.
// Screenshots of every main view land in test-artifacts/explorer/.
import { writeFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCheckpointBody, parseCheckpointBody, signCheckpoint } from '../../src/core/checkpoint.js';
import { SeedSigner, parseNote } from '../../src/core/note.js';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';
import { type TestBrowser, hasChromium, launchBrowser, screenshot, timings } from '../helpers/browser.js';
import {
  EXPLORER_DIST,
  type SteleChild,
  type StaticServer,
  anchor,
  anchorMany,
  ensureBuilt,
  flipByte,
  sha256hex,
  startStaticServer,
  startStele,
} from '../helpers/explorer-servers.js';

const ENTRIES = 300; // two record bundles, so paging and a level-1 tile are exercised
const FILE_TEXT = 'stele explorer release artifact v1.2.3\n';
const FILE_DIGEST = sha256hex(FILE_TEXT);

const settled = (testid: string) => `[data-testid=${testid}]:not([data-status=PENDING])`;

async function statusOf(page: Page, selector: string): Promise<string | null> {
  await page.waitForSelector(selector, { timeout: 15_000 });
  return page.locator(selector).first().getAttribute('data-status');
}

async function checkStatus(page: Page, check: string): Promise<string | null> {
  return page.locator(`[data-testid=cp-checks] [data-check=${check}]`).getAttribute('data-status');
}

describe.skipIf(!hasChromium())('explorer in a real browser', () => {
  let stele: SteleChild;
  let browser: TestBrowser;
  let tmp: string;
  let file: string;
  let unknownFile: string;
  let explorerJson: string;
  const statics: StaticServer[] = [];

  beforeAll(async () => {
    ensureBuilt();
    [stele, browser] = await Promise.all([startStele({ witnesses: 3 }), launchBrowser()]);
    tmp = mkdtempSync(join(tmpdir(), 'stele-explorer-files-'));
    file = join(tmp, 'release-1.2.3.tgz');
    unknownFile = join(tmp, 'never-anchored.bin');
    writeFileSync(file, FILE_TEXT);
    writeFileSync(unknownFile, 'this file was never anchored\n');
    await anchor(stele.url, { digest: FILE_DIGEST, artifact: 'release-1.2.3.tgz', scope: 'releases' });
    await anchorMany(
      stele.url,
      Array.from({ length: ENTRIES - 1 }, (_, i) => ({
        digest: sha256hex(`entry ${i}`),
        artifact: `build-${i}.tgz`,
        scope: 'ci',
        ...(i % 4 === 0 ? { type: 'document_verified' } : {}),
      })),
    );
    explorerJson = await (await fetch(`${stele.url}/explorer.json`)).text();
  }, 120_000);

  afterAll(async () => {
    await Promise.all(statics.map((s) => s.close()));
    await browser?.close();
    await stele?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  /** A static server over the log directory and the built explorer, like a mirror. */
  async function mirror(o: { mutate?: (path: string, body: Uint8Array) => Uint8Array } = {}): Promise<StaticServer> {
    const s = await startStaticServer({
      roots: [stele.logDir, EXPLORER_DIST],
      files: { 'explorer.json': explorerJson },
      ...o,
    });
    statics.push(s);
    return s;
  }

  it('serves the explorer at / without shadowing the log and the API', async () => {
    const page = await fetch(`${stele.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(page.headers.get('content-security-policy')).toContain("connect-src 'self'");
    const html = await page.text();
    const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeDefined();
    const js = await fetch(`${stele.url}/${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(`${stele.url}/checkpoint`)).headers.get('content-type')).toContain('text/plain');
    expect((await fetch(`${stele.url}/api/ledger/checkpoint`)).status).toBe(200);
    expect((await fetch(`${stele.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${stele.url}/assets/nope.js`)).status).toBe(404);
    const cfg = JSON.parse(explorerJson) as { vkey: string; witnesses: string[]; witnessThreshold: number };
    expect(cfg.vkey).toBe(stele.vkey);
    expect(cfg.witnesses).toHaveLength(3);
  });

  it('verifies the checkpoint in the browser, fast, with no third-party requests', async () => {
    const { page, requests, errors } = await browser.page();
    const started = Date.now();
    await page.goto(`${stele.url}/`);
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');
    const wall = Date.now() - started;
    expect(await checkStatus(page, 'signature')).toBe('PASS');
    expect(await checkStatus(page, 'witnesses')).toBe('PASS');
    expect(await checkStatus(page, 'tiles')).toBe('PASS');
    expect(await checkStatus(page, 'consistency')).toBe('SKIP'); // first visit
    expect(await page.locator('[data-testid=witnesses] [data-status=PASS]').count()).toBe(3);
    expect(await page.locator('[data-testid=cp-size]').innerText()).toBe(String(ENTRIES));
    await page.waitForSelector('[data-testid=cp-time]');
    expect(await page.locator('[data-testid=banner]').isHidden()).toBe(true);
    const ms = (await timings(page)).checkpointMs ?? Infinity;
    expect(ms).toBeLessThan(1000);
    expect(wall).toBeLessThan(5000);
    await screenshot(page, 'checkpoint');
    expect(requests.filter((u) => !u.startsWith(`${stele.url}/`))).toEqual([]);
    expect(errors).toEqual([]);

    // The log grows; on the next visit this browser proves the new checkpoint extends the old one.
    await anchorMany(
      stele.url,
      Array.from({ length: 5 }, (_, i) => ({ digest: sha256hex(`later ${i}`) })),
    );
    await page.reload();
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');
    expect(await checkStatus(page, 'consistency')).toBe('PASS');
    expect(await page.locator('[data-check=consistency]').innerText()).toMatch(
      new RegExp(`size ${ENTRIES} → ${ENTRIES + 5}`),
    );
    await page.close();
  });

  it('browses entries newest first, a full page even when the last bundle is partial, each verified', async () => {
    const size = (await (await fetch(`${stele.url}/api/ledger/checkpoint`)).json()).treeSize as number;
    expect(size % 256).not.toBe(0); // the last bundle is partial
    const { page } = await browser.page();
    await page.goto(`${stele.url}/#/entries`);
    expect(await statusOf(page, settled('page-status'))).toBe('PASS');
    const seqs = await page
      .locator('[data-testid=entries] tbody tr')
      .evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-seq'))));
    // The newest 256 entries, newest first, across the partial bundle and the one before it.
    expect(seqs).toEqual(Array.from({ length: 256 }, (_, i) => size - 1 - i));
    expect(await page.locator('[data-testid=entries] tbody tr[data-status=FAIL]').count()).toBe(0);
    await screenshot(page, 'entries');
    await page.getByRole('link', { name: 'Older →' }).first().click();
    expect(await statusOf(page, settled('page-status'))).toBe('PASS');
    const older = await page
      .locator('[data-testid=entries] tbody tr')
      .evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-seq'))));
    expect(older).toEqual(Array.from({ length: 256 }, (_, i) => 255 - i));
    await page.getByRole('link', { name: '← Newer' }).first().click();
    expect(await statusOf(page, settled('page-status'))).toBe('PASS');
    expect(await page.locator('[data-testid=entries] tbody tr').count()).toBe(256);
    await page.close();
  });

  it('finds an artifact label in every scope without its scope, and says NOT FOUND only when there is none', async () => {
    await anchor(stele.url, { digest: sha256hex('nightly 150'), artifact: 'build-150.tgz', scope: 'nightly' });
    const { page } = await browser.page();
    await page.goto(`${stele.url}/`);
    await page.locator('header [data-testid=search-input]').fill('build-150.tgz');
    await page.locator('header [data-testid=search-input]').press('Enter');
    await page.waitForSelector('[data-testid=label-matches] tbody tr');
    const rows = await page
      .locator('[data-testid=label-matches] tbody tr')
      .evaluateAll((trs) => trs.map((r) => `${r.getAttribute('data-scope')}=${r.getAttribute('data-status')}`));
    expect(rows.sort()).toEqual(['ci=PASS', 'nightly=PASS']);
    expect(await page.locator('[data-testid=label-summary]').innerText()).toMatch(/2 artifacts named "build-150\.tgz"/);
    expect(await page.locator('[data-testid=not-found]').count()).toBe(0);
    await screenshot(page, 'search-label-all-scopes');

    await page.goto(`${stele.url}/#/search?q=no-such-build.tgz`);
    expect(await statusOf(page, '[data-testid=not-found]')).toBe('NOTFOUND');
    // One box: the same solid border on every side (a dashed 8 px left edge broke into bars).
    const border = await page.locator('[data-testid=not-found]').evaluate((el) => {
      const s = getComputedStyle(el);
      return [s.borderTopStyle, s.borderRightStyle, s.borderBottomStyle, s.borderLeftStyle];
    });
    expect(border).toEqual(['solid', 'solid', 'solid', 'solid']);
    await screenshot(page, 'search-not-found');
    await page.close();
  });

  it('finds an anchored digest, an entry id and an artifact label, each verified from the tiles', async () => {
    const { page } = await browser.page();
    await page.goto(`${stele.url}/`);
    await page.locator('header [data-testid=search-input]').fill(FILE_DIGEST);
    await page.locator('header [data-testid=search-input]').press('Enter');
    expect(await statusOf(page, '[data-testid=entry-verdict]')).toBe('PASS');
    expect(await page.locator('[data-testid=entry-verdict]').innerText()).toContain('Verified in your browser');
    expect(await page.locator('[data-testid=entry-report] [data-check=rule-4]').getAttribute('data-status')).toBe(
      'PASS',
    );
    expect(await page.locator('[data-testid=audit-path] svg rect').count()).toBeGreaterThan(3);
    await screenshot(page, 'entry');
    const id = await page.locator('[data-testid=entry]').first().getAttribute('data-seq');
    expect(id).toBe('0');

    const entryId = (await (await fetch(`${stele.url}/api/ledger/entry?leaf=7`)).json()).entry.id as string;
    await page.goto(`${stele.url}/#/search?q=${entryId}`);
    expect(await statusOf(page, '[data-testid=entry-verdict]')).toBe('PASS');
    expect(await page.locator('[data-testid=entry]').getAttribute('data-seq')).toBe('7');

    await page.goto(`${stele.url}/#/search?q=build-41.tgz&scope=ci`);
    expect(await statusOf(page, '[data-testid=entry-verdict]')).toBe('PASS');
    expect(await page.locator('[data-testid=entry]').innerText()).toContain('build-41.tgz');
    await page.close();
  });

  it('verifies a dropped file locally: PASS when anchored, "not found" otherwise', async () => {
    const { page, requests } = await browser.page();
    await page.goto(`${stele.url}/#/verify`);
    await page.locator('[data-testid=file-input]').setInputFiles(file);
    expect(await statusOf(page, '[data-testid=verify-result]')).toBe('PASS');
    expect(await page.locator('[data-testid=file-digest]').innerText()).toBe(FILE_DIGEST);
    const rules = await page
      .locator('[data-testid=verify-report] [data-check]')
      .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-check')}=${e.getAttribute('data-status')}`));
    // Rule 2 passes once this browser has seen an earlier checkpoint (an earlier test), else it is skipped.
    expect(rules.join(' ')).toMatch(/^rule-1=PASS rule-2=(PASS|SKIP) rule-3=PASS rule-4=PASS rule-5=PASS rule-6=PASS$/);
    await screenshot(page, 'verify-pass');
    // The file itself never leaves the page: only its digest is looked up.
    expect(requests.some((u) => u.includes(`hash=${FILE_DIGEST}`))).toBe(true);

    // A real drop event (DataTransfer with a File) on the drop zone.
    await page.evaluate((text) => {
      const dt = new DataTransfer();
      dt.items.add(new File([text], 'dropped-release.tgz'));
      document
        .querySelector('[data-testid=dropzone]')!
        .dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, FILE_TEXT);
    await page.waitForFunction(() =>
      document.querySelector('[data-testid=verify-output]')?.textContent?.includes('dropped-release.tgz'),
    );
    expect(await statusOf(page, '[data-testid=verify-result]')).toBe('PASS');

    await page.locator('[data-testid=file-input]').setInputFiles(unknownFile);
    expect(await statusOf(page, '[data-testid=verify-result]')).toBe('NOTFOUND');
    expect(await page.locator('[data-testid=verify-result]').innerText()).toMatch(/not found/i);
    expect(await page.locator('[data-testid=differs]').count()).toBe(0);
    await screenshot(page, 'verify-not-found');

    // A changed copy under the anchored file's name: the verified original is named.
    await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['a release someone changed\n'], 'release-1.2.3.tgz'));
      document
        .querySelector('[data-testid=dropzone]')!
        .dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    });
    await page.waitForSelector('[data-testid=differs]', { timeout: 30_000 });
    expect(await statusOf(page, '[data-testid=verify-result]')).toBe('NOTFOUND');
    expect(await page.locator('[data-testid=differs]').innerText()).toMatch(
      new RegExp(
        `^release-1\\.2\\.3\\.tgz is anchored with digest ${FILE_DIGEST} \\(entry led_\\d+_[0-9a-f]{12}, verified against the signed checkpoint\\); this file's digest is [0-9a-f]{64}: it differs from the anchored file\\.$`,
      ),
    );
    await page.close();
  });

  it('draws anchors over time and by type, and works on a narrow screen and from the keyboard', async () => {
    const { page } = await browser.page();
    const size = (await (await fetch(`${stele.url}/api/ledger/checkpoint`)).json()).treeSize as number;
    await page.goto(`${stele.url}/#/charts`);
    await page.waitForSelector('[data-testid=time-chart] svg > rect');
    expect(await page.locator('[data-testid=type-chart]').innerText()).toContain('document_verified');
    // The whole log, not its last few bundles: every entry is counted.
    expect(await page.locator('[data-testid=chart-coverage]').getAttribute('data-sampled')).toBe('false');
    expect(await page.locator('[data-testid=chart-coverage]').innerText()).toContain(`all ${size} entries`);
    const counted = await page
      .locator('[data-testid=type-chart] svg title')
      .innerHTML()
      .then((t) => [...t.matchAll(/ (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0));
    expect(counted).toBe(size);
    await screenshot(page, 'charts');
    // A log with more bundles than the charts read is sampled evenly, counts scaled to the whole log.
    await page.goto(`${stele.url}/#/charts?bundles=1`);
    await page.waitForSelector('[data-testid=time-chart] svg > rect');
    expect(await page.locator('[data-testid=chart-coverage]').getAttribute('data-sampled')).toBe('true');
    expect(await page.locator('[data-testid=chart-coverage]').innerText()).toMatch(
      /sampled: 1 of its 2 record bundles/,
    );
    await screenshot(page, 'charts-sampled');
    await page.goto(`${stele.url}/#/trust`);
    expect(await page.locator('[data-testid=trust-vkey]').innerText()).toBe(stele.vkey);
    await screenshot(page, 'trust');

    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(`${stele.url}/#/`);
    await page.reload();
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow).toBeLessThanOrEqual(1);
    await screenshot(page, 'narrow-checkpoint');
    // The entries table fits too: each row a card of labelled lines, the verdict of each in view.
    await page.goto(`${stele.url}/#/entries`);
    expect(await statusOf(page, settled('page-status'))).toBe('PASS');
    const fit = await page.evaluate(() => {
      const t = document.querySelector<HTMLElement>('[data-testid=entries]')!;
      return { table: t.scrollWidth, box: t.parentElement!.clientWidth };
    });
    expect(fit.table).toBeLessThanOrEqual(fit.box);
    const firstRow = page.locator('[data-testid=entries] tbody tr').first();
    expect(await firstRow.locator('td[data-label=Verified]').isVisible()).toBe(true);
    expect(await firstRow.locator('td[data-label=Time]').isVisible()).toBe(true);
    await screenshot(page, 'narrow-entries');
    await page.goto(`${stele.url}/#/`);
    await page.reload();
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');

    await page.setViewportSize({ width: 1200, height: 900 });
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Entries');
    await page.keyboard.press('Enter');
    expect(await statusOf(page, settled('page-status'))).toBe('PASS');
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');
    await page.close();
  });

  it('works from a static mirror without the API, scanning record bundles to find a digest', async () => {
    const m = await mirror();
    const { page, requests } = await browser.page();
    await page.goto(`${m.url}/`);
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');
    await page.goto(`${m.url}/#/search?q=${FILE_DIGEST}`);
    expect(await statusOf(page, '[data-testid=entry-verdict]')).toBe('PASS');
    expect(await page.locator('[data-testid=search-result]').innerText()).toMatch(/scan of all \d+ entries/);
    await screenshot(page, 'mirror-search');
    await page.goto(`${m.url}/#/search?q=${sha256hex('nothing')}`);
    expect(await statusOf(page, '[data-testid=not-found]')).toBe('NOTFOUND');
    // No search API on a mirror: the label is found in every scope by scanning the bundles.
    await page.goto(`${m.url}/#/search?q=build-150.tgz`);
    await page.waitForSelector('[data-testid=label-matches] tbody tr');
    expect(await page.locator('[data-testid=label-matches] tbody tr[data-status=PASS]').count()).toBe(2);
    expect(await page.locator('[data-testid=label-summary]').innerText()).toMatch(/scan of all \d+ entries/);
    await screenshot(page, 'mirror-search-label');
    // Immutable tiles are fetched once per page, however many views read them.
    const tileGets = requests.filter((u) => u.includes('/tile/'));
    expect(new Set(tileGets).size).toBe(tileGets.length);
    await page.close();
  });

  it('shows FAIL and the warning banner when a tile is altered', async () => {
    // Flip a bit of the first hash of every level-0 tile: the right-edge one the checkpoint
    // view reads, and the one holding leaf 0 (the anchored file's entry).
    const m = await mirror({ mutate: (path, body) => (path.startsWith('tile/0/') ? flipByte(body, 5) : body) });
    const { page } = await browser.page();
    await page.goto(`${m.url}/`);
    expect(await statusOf(page, settled('cp-status'))).toBe('FAIL');
    expect(await checkStatus(page, 'signature')).toBe('PASS');
    expect(await checkStatus(page, 'tiles')).toBe('FAIL');
    await expect.poll(() => page.locator('[data-testid=banner]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid=banner]').innerText()).toMatch(/Verification FAILED/);
    await screenshot(page, 'tampered-tile');
    await page.goto(`${m.url}/#/search?q=${FILE_DIGEST}`);
    expect(await statusOf(page, '[data-testid=entry-verdict]')).toBe('FAIL');
    await screenshot(page, 'tampered-tile-entry');
    await page.close();
  });

  it('shows FAIL and the warning banner for a checkpoint signed by another key', async () => {
    const m = await mirror();
    const real = await (await fetch(`${stele.url}/checkpoint`)).text();
    const body = parseCheckpointBody(parseNote(real).body);
    const forger = new SeedSigner(stele.origin, crypto.getRandomValues(new Uint8Array(32)));
    const forged = await signCheckpoint({ ...body, root: new Uint8Array(32).fill(7) }, forger);
    m.override('checkpoint', forged.note);
    const { page } = await browser.page();
    await page.goto(`${m.url}/`);
    expect(await statusOf(page, settled('cp-status'))).toBe('FAIL');
    expect(await checkStatus(page, 'signature')).toBe('FAIL');
    await expect.poll(() => page.locator('[data-testid=banner]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid=banner]').innerText()).toMatch(/Checkpoint signature/);
    await screenshot(page, 'forged-checkpoint');
    await page.close();
  });

  it('detects a fork: a validly signed checkpoint that is not an extension of the one seen before', async () => {
    const m = await mirror();
    const { page } = await browser.page();
    await page.goto(`${m.url}/`);
    expect(await statusOf(page, settled('cp-status'))).toBe('PASS');
    // The log key itself signs a different tree of the same size (a split view).
    const { signer } = await loadOrCreateKey(join(stele.dataDir, 'private', 'log.key'), stele.origin);
    const real = parseCheckpointBody(parseNote(await (await fetch(`${m.url}/checkpoint`)).text()).body);
    const fork = await signCheckpoint(
      { origin: real.origin, size: real.size, root: new Uint8Array(32).fill(9) },
      signer,
    );
    expect(formatCheckpointBody(fork)).not.toBe(formatCheckpointBody(real));
    m.override('checkpoint', fork.note);
    await page.reload();
    expect(await statusOf(page, settled('cp-status'))).toBe('FAIL');
    expect(await checkStatus(page, 'signature')).toBe('PASS');
    expect(await checkStatus(page, 'consistency')).toBe('FAIL');
    expect(await page.locator('[data-check=consistency]').innerText()).toMatch(/forked/);
    await expect.poll(() => page.locator('[data-testid=banner]').isVisible()).toBe(true);
    await screenshot(page, 'forked-checkpoint');
    await page.close();
  });
});
